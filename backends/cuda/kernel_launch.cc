#include "backends/cuda/kernel_launch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_cache.h"
#include "core/error.h"

namespace sloth::cuda {

void ParamWords::d(double v) {
  int64_t x;
  std::memcpy(&x, &v, 8);
  w.push_back(x);
}

void ParamWords::arr(IntSpan v, size_t len) {
  for (size_t k = 0; k < len; ++k) w.push_back(k < v.size() ? v[k] : 0);
}

void launch(cudaKernel_t k, const KernelSource& ks, ParamWords& words, int64_t work,
            int64_t blocks) {
  if (static_cast<int>(words.w.size()) != ks.words)
    throw Error(absl::StrFormat("cuda backend: %s takes %d parameter words, %d were packed", ks.name,
                                ks.words, words.w.size()));
  DeviceContext& c = DeviceContext::get();
  if (blocks < 0) blocks = (work + 255) / 256;
  blocks = std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(c.sm_count) * 32);
  void* args[] = {words.w.data()};
  SLOTH_CU(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                            dim3(256), args, 0, c.stream));
}

void launch(const KernelSource& ks, ParamWords& words, int64_t work, int64_t blocks) {
  launch(kernel_cache().get(ks), ks, words, work, blocks);
}

void coalesce(Shape& shape, std::vector<Strides*> strides) {
  Shape s;
  std::vector<Strides> st(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !s.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = st[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      s.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) st[k].back() = (*strides[k])[d];
    } else {
      s.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) st[k].push_back((*strides[k])[d]);
    }
  }
  if (s.empty()) {
    s.push_back(1);
    for (auto& v : st) v.push_back(0);
  }
  shape = std::move(s);
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(st[k]);
}

absl::Status check_rank(const char* what, size_t nd) {
  if (nd > static_cast<size_t>(kMaxDims))
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuda backend: %s over %d dims after coalescing (at most %d)", what, nd, kMaxDims));
  return absl::OkStatus();
}

}  // namespace sloth::cuda
