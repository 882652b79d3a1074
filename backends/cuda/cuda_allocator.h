// The caching device allocator: cudaMalloc is slow and synchronizes, so freed blocks go to
// size-binned free lists and are handed out again.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "core/storage.h"

namespace sloth::cuda {

// The size class a request is served from: powers of two up to 1 MiB, whole MiB up to
// 64 MiB, multiples of 8 MiB above.
size_t bin_size(size_t bytes);

// All work runs on one stream, so a block freed by the host can be handed out again at
// once: later kernels are ordered after the ones that used it. When cudaMalloc fails the
// cache is emptied and the call retried once before reporting out of memory.
class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::cuda(0); }
  AllocatorStats stats();
  void empty();  // returns every cached block to the driver

 private:
  void empty_locked();
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // bin size -> free blocks
  AllocatorStats stats_;
};

// The process-wide instance (never destroyed: tensors may outlive static destruction).
CachingAllocator& caching_allocator();

}  // namespace sloth::cuda
