// Per-thread slab pools for the objects every traced op makes and drops (IR nodes, tensor
// impls, alias groups). Why not a free list: after a large graph is freed, a LIFO list hands
// objects back in the order they died, scattered over tens of MB, so every op of the next
// graph misses the cache and the TLB on each object it makes, builds and frees (the 1e5-node
// rows of trace_bench ran 1.5-2x slower after a big graph than alone). Here objects live in
// 2 MiB chunks (huge pages where the kernel grants them) and a take hands out the
// lowest-addressed free slot of the current chunk, so consecutive ops get neighbouring slots
// whatever ran before.
//
// Objects stay constructed while free (a recycled node keeps its vectors' capacity, as the
// free lists did): take() says whether the slot is fresh (the caller constructs) or recycled.
// A chunk belongs to the thread that made it; the owner marks frees in a plain bitmap, other
// threads (a data loader dropping a tensor) in an atomic one that the owner folds in when it
// looks for space. A thread that exits hands its non-empty chunks to a global list, from
// which other threads adopt them.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace sloth {

// Sanitized builds take chunks from the heap: LeakSanitizer scans the heap, not mmap'ed memory,
// for pointers, and AddressSanitizer checks the bounds of heap blocks.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedHeap = true;
#else
inline constexpr bool kSanitizedHeap = false;
#endif
#else
inline constexpr bool kSanitizedHeap = false;
#endif

// A 2 MiB-aligned chunk of 2 MiB outside malloc's heap (huge pages where the kernel grants
// them; from the heap in sanitized builds), and its return. Throws std::bad_alloc.
void* map_huge_chunk();
void unmap_huge_chunk(void* p);

class SlabPool;

// The chunk header, at the start of each 2 MiB chunk; the bitmaps follow it, then the slots.
struct SlabChunk {
  static constexpr size_t kBytes = size_t{2} << 20;
  // The pool whose thread may touch free_bits, used, built, cursor; null: orphaned (its
  // thread exited), touched only under the orphan list's lock.
  std::atomic<SlabPool*> owner{nullptr};
  // Slots other threads freed into remote_bits since the last fold (a hint: may lag).
  std::atomic<int64_t> remote_frees{0};
  char* slots = nullptr;
  int32_t nslots = 0, nwords = 0;
  int32_t used = 0;    // slots handed out and not known free
  int32_t built = 0;   // slots [0, built) hold constructed objects
  int32_t cursor = 0;  // words below it have no free slot
  uint64_t* free_bits = nullptr;               // 1: free (the owner's)
  std::atomic<uint64_t>* remote_bits = nullptr;  // 1: freed by another thread, not folded yet

  static SlabChunk* of(const void* p) {
    return reinterpret_cast<SlabChunk*>(reinterpret_cast<uintptr_t>(p) & ~(kBytes - 1));
  }
};

// One thread's pool of one object type: slots of `stride` bytes (the object's size rounded up
// to a cache line, so an object touches no more lines than it must).
class SlabPool {
 public:
  struct Type {
    size_t stride;
    void (*destroy)(void*);  // runs the destructor of a constructed, free object
  };

  // A slot: *fresh is true when it holds no object yet (the caller constructs one there).
  // `tls` is the type's per-thread slot (thread_local SlabPool* = nullptr).
  template <size_t kStride>
  static void* take(const Type& type, SlabPool*& tls, bool* fresh) {
    SlabPool* pool = tls;
    if (pool != nullptr && pool != dead() && pool->current_ != nullptr) {
      SlabChunk* c = pool->current_;
      if (c->used == 0) --pool->empty_chunks_;
      if (void* p = take_from(c, kStride, fresh)) return p;  // else full (used != 0)
    }
    return take_slow(type, tls, fresh);
  }

  // The lowest free slot of `c` (taken by whoever may touch its bitmap); null when full.
  static void* take_from(SlabChunk* c, size_t stride, bool* fresh) {
    for (int32_t w = c->cursor; w < c->nwords; ++w) {
      const uint64_t b = c->free_bits[w];
      if (b == 0) continue;
      c->free_bits[w] = b & (b - 1);
      c->cursor = w;
      ++c->used;
      // Slots at and above `built` were never handed out, so the lowest free slot is below
      // it (a recycled object) or is it (a fresh one).
      const int32_t s = w * 64 + std::countr_zero(b);
      *fresh = s >= c->built;
      if (*fresh) ++c->built;
      return c->slots + static_cast<size_t>(s) * stride;
    }
    c->cursor = c->nwords;
    return nullptr;
  }

  // Returns an object's slot (the object stays constructed, for the next take).
  template <size_t kStride>
  static void give(const Type& type, SlabPool* tls, void* p) {
    SlabChunk* c = SlabChunk::of(p);
    const size_t s = static_cast<size_t>(static_cast<char*>(p) - c->slots) / kStride;
    const uint64_t bit = uint64_t{1} << (s & 63);
    const int32_t w = static_cast<int32_t>(s >> 6);
    if (tls != nullptr && c->owner.load(std::memory_order_relaxed) == tls) {
      c->free_bits[w] |= bit;
      if (w < c->cursor) c->cursor = w;
      if (--c->used == 0) tls->chunk_emptied(type, c);
      return;
    }
    c->remote_bits[w].fetch_or(bit, std::memory_order_release);
    c->remote_frees.fetch_add(1, std::memory_order_release);
  }

  // Chunks mapped now, all types and threads (tests, leak checks).
  static int64_t chunks_mapped();

  // What a type's per-thread slot holds after the thread's pools were torn down at its exit.
  static SlabPool* dead() { return reinterpret_cast<SlabPool*>(uintptr_t{1}); }

 private:
  explicit SlabPool(const Type& type) : type_(&type) {}
  static void* take_slow(const Type& type, SlabPool*& tls, bool* fresh);
  void chunk_emptied(const Type& type, SlabChunk* c);
  ~SlabPool();
  friend struct SlabPoolAccess;

  const Type* type_;
  SlabChunk* current_ = nullptr;
  SlabChunk** chunks_ = nullptr;  // owned chunks (a plain array: this object is per thread)
  int32_t nchunks_ = 0, cap_ = 0;
  int32_t empty_chunks_ = 0;
};

}  // namespace sloth
