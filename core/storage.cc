#include "core/storage.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/error.h"

namespace sloth {
namespace {

std::atomic<uint64_t> next_storage_id{1};

// Rounds a request to its bin: powers of two up to 1 MiB, then 1 MiB steps up to 64 MiB and
// 2^k beyond, so reuse is likely and waste stays below ~50% for small and ~2% for large sizes.
size_t bin_size(size_t bytes) {
  if (bytes <= 64) return 64;
  if (bytes <= (1u << 20)) {
    size_t b = 64;
    while (b < bytes) b <<= 1;
    return b;
  }
  const size_t mb = 1u << 20;
  if (bytes <= 64 * mb) return (bytes + mb - 1) / mb * mb;
  size_t b = 64 * mb;
  while (b < bytes) b <<= 1;
  return b;
}

class CachingCpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    size_t b = bin_size(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    stats_.live_bytes += b;
    auto it = free_.find(b);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= b;
      return p;
    }
    // Large blocks ask for huge pages (far fewer page faults on first touch). madvise needs a
    // page-aligned start, and a huge page a 2 MiB-aligned one: such blocks are aligned to it.
    constexpr size_t kHugePage = size_t{2} << 20;
    const bool huge = b >= kHugePage;
    const size_t align = huge ? kHugePage : kAlignment;
    // posix_memalign, not aligned_alloc: bins are 1 MiB multiples, and aligned_alloc wants the
    // size to be a multiple of the alignment.
    void* p = nullptr;
    if (posix_memalign(&p, align, b) != 0) {
      release_cache_locked();
      if (posix_memalign(&p, align, b) != 0)
        fail("out of host memory allocating %d bytes", static_cast<int64_t>(b));
    }
    if (huge) madvise(p, b, MADV_HUGEPAGE);
    ++stats_.os_allocations;
    stats_.os_bytes += b;
    return p;
  }
  void deallocate(void* p, size_t bytes) override {
    size_t b = bin_size(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.live_bytes -= b;
    stats_.cached_bytes += b;
    free_[b].push_back(p);
  }
  Device device() const override { return Device::cpu(); }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache_locked();
  }

 private:
  void release_cache_locked() {
    for (auto& [b, list] : free_) {
      for (void* p : list) std::free(p);
      stats_.cached_bytes -= static_cast<int64_t>(b * list.size());
      list.clear();
    }
  }
  std::mutex mu_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

CachingCpuAllocator& the_cpu_allocator() {
  static auto* a = new CachingCpuAllocator();  // never destroyed: storages may outlive main
  return *a;
}

}  // namespace

Storage::Storage(Allocator* alloc, size_t bytes)
    : data_(alloc->allocate(bytes)), bytes_(bytes), device_(alloc->device()), alloc_(alloc),
      id_(next_storage_id.fetch_add(1, std::memory_order_relaxed)) {}

Storage::Storage(void* data, size_t bytes, Device device, std::function<void(void*)> deleter)
    : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)),
      id_(next_storage_id.fetch_add(1, std::memory_order_relaxed)) {}

Storage::~Storage() {
  if (alloc_ != nullptr) alloc_->deallocate(data_, bytes_);
  else if (deleter_) deleter_(data_);
}

Allocator* cpu_allocator() { return &the_cpu_allocator(); }
AllocatorStats cpu_allocator_stats() { return the_cpu_allocator().stats(); }
void cpu_allocator_empty_cache() { the_cpu_allocator().empty_cache(); }

}  // namespace sloth
