#include "core/storage.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/slab_pool.h"
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
    if (!kSanitizedHeap && b <= kSmallBin) return carve(b);
    const size_t align = large_align(b);
    // posix_memalign, not aligned_alloc: bins are 1 MiB multiples, and aligned_alloc wants the
    // size to be a multiple of the alignment.
    void* p = nullptr;
    const size_t room = kColoured ? b + kPage : b;
    if (posix_memalign(&p, align, room) != 0) {
      release_cache_locked();
      if (posix_memalign(&p, align, room) != 0)
        fail("out of host memory allocating %d bytes", static_cast<int64_t>(b));
    }
    if (align == kHugePage) madvise(p, room, MADV_HUGEPAGE);
    ++stats_.os_allocations;
    stats_.os_bytes += b;
    // Coloured as carve() colours small blocks: the block starts 17 lines further into its
    // page than the last one did (mod 64 lines); free_block() finds the start again.
    const size_t colour = kColoured ? (large_blocks_++ * 17 % 64) * 64 : 0;
    return static_cast<char*>(p) + colour;
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
  // Small bins are carved from chunks of sloth's own (core/slab_pool.h), not taken from
  // malloc: the cache keeps its blocks for the life of the process, and 1e5 of them scattered
  // through glibc's heap (the outputs of a wide graph) left every later malloc searching
  // fragmented bins. Planning a 17k-node graph took 54-57 ms after a 1e5-output graph, and
  // 21-27 ms in the same process with the cache emptied first.
  static constexpr size_t kSmallBin = size_t{256} << 10;
  static constexpr size_t kPage = 4096;
  // Sanitized builds hand out blocks exactly as allocated, so that AddressSanitizer sees
  // an overrun past a block's end.
  static constexpr bool kColoured = !kSanitizedHeap;
  static constexpr size_t kHugePage = size_t{2} << 20;
  // Large blocks ask for huge pages (far fewer page faults on first touch). madvise needs a
  // page-aligned start, and a huge page a 2 MiB-aligned one: such blocks are aligned to it.
  static size_t large_align(size_t b) { return b >= kHugePage ? kHugePage : kPage; }
  // A large block handed out at its colour offset (under a page) past an aligned start.
  static void free_block(void* p, size_t b) {
    std::free(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(large_align(b) - 1)));
  }
  static constexpr size_t kChunk = SlabChunk::kBytes;  // map_huge_chunk's size
  static uintptr_t chunk_of(const void* p) { return reinterpret_cast<uintptr_t>(p) & ~(kChunk - 1); }
  // Cache colouring: blocks of a bin of 4 KiB or more, carved back to back from a 2 MiB-aligned
  // chunk, would all start at the same offset within a page. An SGD update streams a weight,
  // its gradient and its momentum (three blocks of one bin) in step, and with equal page
  // offsets each store to one block and load from the next share their low 12 address bits:
  // the load waits on the store it is taken to alias (4K aliasing), and all three compete for
  // the same L1 sets. A 64x64 momentum update ran 1.3-2x slower so (update over 16 KB blocks at
  // equal page offsets against offsets 5 or 17 lines apart). Each block is padded by an odd
  // number of cache lines, so consecutive blocks of a bin start at different lines of a page.
  static size_t carve_stride(size_t b) {
    if (b >= (size_t{16} << 10)) return b + 17 * 64;
    if (b >= (size_t{4} << 10)) return b + 5 * 64;
    return b;
  }
  void* carve(size_t b) {
    Carver& c = carvers_[b];
    const size_t stride = carve_stride(b);
    if (static_cast<size_t>(c.end - c.next) < stride) {
      char* chunk;
      try {
        chunk = static_cast<char*>(map_huge_chunk());
      } catch (const std::bad_alloc&) {
        release_cache_locked();
        chunk = static_cast<char*>(map_huge_chunk());
      }
      c.next = chunk;
      c.end = chunk + kChunk;
      carved_[chunk_of(chunk)] = 0;
      ++stats_.os_allocations;
      stats_.os_bytes += kChunk;
    }
    void* p = c.next;
    c.next += stride;
    ++carved_[chunk_of(p)];
    return p;
  }

  void release_cache_locked() {
    // Free blocks of the small bins go back a whole chunk at a time: a chunk whose carved
    // blocks are all free (and which its bin is not carving from) is returned.
    absl::flat_hash_map<uintptr_t, int32_t> free_in;
    for (auto& [b, list] : free_)
      if (!kSanitizedHeap && b <= kSmallBin)
        for (void* p : list) ++free_in[chunk_of(p)];
    absl::flat_hash_set<uintptr_t> carving;
    for (auto& [b, c] : carvers_)
      if (c.next != c.end) carving.insert(chunk_of(c.next));
    absl::flat_hash_set<uintptr_t> unmap;
    for (auto& [chunk, n] : free_in)
      if (n == carved_[chunk] && !carving.contains(chunk)) unmap.insert(chunk);
    for (auto& [b, list] : free_) {
      const bool small = !kSanitizedHeap && b <= kSmallBin;
      size_t kept = 0;
      for (void* p : list) {
        if (!small) free_block(p, b);
        else if (!unmap.contains(chunk_of(p))) list[kept++] = p;
      }
      stats_.cached_bytes -= static_cast<int64_t>(b * (list.size() - kept));
      list.resize(kept);
    }
    for (uintptr_t chunk : unmap) {
      carved_.erase(chunk);
      unmap_huge_chunk(reinterpret_cast<void*>(chunk));
    }
  }
  struct Carver {
    char* next = nullptr;
    char* end = nullptr;
  };
  absl::flat_hash_map<size_t, Carver> carvers_;     // per small bin: the chunk it carves
  absl::flat_hash_map<uintptr_t, int32_t> carved_;  // small-bin chunk -> blocks carved
  std::mutex mu_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_;
  uint64_t large_blocks_ = 0;  // large blocks made so far: the next one's colour
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

void Storage::take_ownership_of_copy() {
  if (alloc_ != nullptr || deleter_ || !device_.is_cpu()) return;
  void* own = the_cpu_allocator().allocate(bytes_);
  if (bytes_ != 0) std::memcpy(own, data_, bytes_);
  data_ = own;
  alloc_ = &the_cpu_allocator();
}

Allocator* cpu_allocator() { return &the_cpu_allocator(); }
AllocatorStats cpu_allocator_stats() { return the_cpu_allocator().stats(); }
void cpu_allocator_empty_cache() { the_cpu_allocator().empty_cache(); }

}  // namespace sloth
