// Loaded kernels by name. Generated kernel names derive from a hash of their source, so one
// name is one source: each is compiled with NVRTC and loaded once per process. With
// SLOTH_CUDA_CACHE_DIR the compiled image is also kept on disk, which saves the NVRTC time
// on later runs.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/codegen.h"

namespace sloth::cuda {

class KernelCache {
 public:
  // Compiles (or reads from the disk cache) and loads `ks` on first use; throws on failure.
  cudaKernel_t get(const KernelSource& ks);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, cudaKernel_t> kernels_;
};

// The process-wide instance (never destroyed).
KernelCache& kernel_cache();

}  // namespace sloth::cuda
