#include "backends/cuda/nvrtc_cache.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_compile.h"
#include "core/error.h"
#include "core/settings.h"

namespace sloth::cuda {

cudaKernel_t KernelCache::get(const KernelSource& ks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(ks.name);
  if (it != kernels_.end()) return it->second;
  DeviceContext& c = DeviceContext::get();
  std::string image;
  std::string path;
  if (const std::string& dir = settings().cuda_cache_dir; !dir.empty()) {
    // The arch, the options and the full-source hash are in the file name: a stale file is
    // never loaded.
    path = absl::StrFormat("%s/%s.%s.%s.%016x.cubin", dir, ks.name, c.arch, kNvrtcOptionsTag,
                           fnv1a(ks.source));
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      image = ss.str();
    }
  }
  if (image.empty()) {
    auto code = nvrtc_compile(ks.source, ks.name, c.arch);
    if (!code.ok()) throw Error(std::string(code.status().message()));
    image = std::move(code->image);
    if (!path.empty()) {
      std::ofstream f(path, std::ios::binary);
      f.write(image.data(), static_cast<std::streamsize>(image.size()));
    }
  }
  cudaLibrary_t lib;
  SLOTH_CU(cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t k;
  SLOTH_CU(cudaLibraryGetKernel(&k, lib, ks.name.c_str()));
  kernels_[ks.name] = k;
  return k;
}

KernelCache& kernel_cache() {
  static KernelCache* m = new KernelCache;
  return *m;
}

}  // namespace sloth::cuda
