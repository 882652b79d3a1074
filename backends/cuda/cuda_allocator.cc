#include "backends/cuda/cuda_allocator.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_runtime.h"
#include "core/error.h"

namespace sloth::cuda {

size_t bin_size(size_t bytes) {
  if (bytes <= 512) return 512;
  const size_t mb = 1u << 20;
  if (bytes <= mb) {
    size_t b = 512;
    while (b < bytes) b <<= 1;
    return b;
  }
  if (bytes <= 64 * mb) return (bytes + mb - 1) / mb * mb;
  return (bytes + 8 * mb - 1) / (8 * mb) * (8 * mb);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t b = bin_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.allocations;
  stats_.live_bytes += b;
  auto& list = free_[b];
  if (!list.empty()) {
    void* p = list.back();
    list.pop_back();
    stats_.cached_bytes -= b;
    return p;
  }
  DeviceContext::get();  // selects device 0 before the first cudaMalloc
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, b);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    empty_locked();
    e = cudaMalloc(&p, b);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    stats_.live_bytes -= b;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fail("CUDA out of memory: cudaMalloc of %d bytes failed (%s) after emptying the cache; "
         "%d bytes are in live tensors, the device has %d of %d bytes free. Free tensors or "
         "use smaller batches.",
         static_cast<int64_t>(b), cudaGetErrorString(e), stats_.live_bytes,
         static_cast<int64_t>(free_b), static_cast<int64_t>(total_b));
  }
  ++stats_.os_allocations;
  stats_.os_bytes += b;
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes) {
  const size_t b = bin_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.live_bytes -= b;
  stats_.cached_bytes += b;
  free_[b].push_back(p);
}

AllocatorStats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_locked();
}

void CachingAllocator::empty_locked() {
  // Cached blocks may still be read by queued kernels.
  cudaStreamSynchronize(DeviceContext::get().stream);
  for (auto& [b, list] : free_) {
    for (void* p : list) cudaFree(p);
    stats_.cached_bytes -= static_cast<int64_t>(b * list.size());
    list.clear();
  }
}

CachingAllocator& caching_allocator() {
  static CachingAllocator* a = new CachingAllocator;
  return *a;
}

}  // namespace sloth::cuda
