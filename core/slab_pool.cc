#include "core/slab_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace sloth {
namespace {

// Empty chunks a thread keeps per type before it returns them (64 MiB: a program that once had
// 1e5 live nodes makes its next graph of that size without asking the kernel for memory).
constexpr int32_t kRetainEmpty = 32;

std::atomic<int64_t> mapped{0};

}  // namespace

void* map_huge_chunk() {
  constexpr size_t kBytes = SlabChunk::kBytes;
  if (kSanitizedHeap) {
    void* p = std::aligned_alloc(kBytes, kBytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  // Twice the size, then trim to a 2 MiB-aligned chunk: the header is found by masking a
  // slot's address, and an aligned chunk can be one huge page.
  void* raw = mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (a + kBytes - 1) & ~(kBytes - 1);
  if (aligned > a) munmap(raw, aligned - a);
  const uintptr_t end = a + 2 * kBytes;
  if (end > aligned + kBytes) munmap(reinterpret_cast<void*>(aligned + kBytes), end - aligned - kBytes);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, kBytes, MADV_HUGEPAGE);  // best effort: THP in "madvise" mode honours it
#endif
  return p;
}

void unmap_huge_chunk(void* p) {
  if (kSanitizedHeap) std::free(p);
  else munmap(p, SlabChunk::kBytes);
}

namespace {

void unmap_chunk(void* p) {
  mapped.fetch_sub(1, std::memory_order_relaxed);
  unmap_huge_chunk(p);
}

SlabChunk* new_chunk(const SlabPool::Type& type, SlabPool* owner) {
  char* base = static_cast<char*>(map_huge_chunk());
  mapped.fetch_add(1, std::memory_order_relaxed);
  // Header, then the two bitmaps, then the slots (cache-line aligned).
  const size_t header = (sizeof(SlabChunk) + 63) & ~size_t{63};
  size_t nslots = (SlabChunk::kBytes - header) / type.stride;
  for (;;) {
    const size_t words = (nslots + 63) / 64;
    const size_t start = (header + 2 * words * sizeof(uint64_t) + 63) & ~size_t{63};
    if (start + nslots * type.stride <= SlabChunk::kBytes) break;
    --nslots;
  }
  const size_t words = (nslots + 63) / 64;
  auto* c = new (base) SlabChunk();
  c->nslots = static_cast<int32_t>(nslots);
  c->nwords = static_cast<int32_t>(words);
  c->free_bits = reinterpret_cast<uint64_t*>(base + header);
  c->remote_bits = new (base + header + words * sizeof(uint64_t)) std::atomic<uint64_t>[words];
  for (size_t w = 0; w < words; ++w) {
    const size_t in_word = std::min<size_t>(64, nslots - w * 64);
    c->free_bits[w] = in_word == 64 ? ~uint64_t{0} : (uint64_t{1} << in_word) - 1;
    c->remote_bits[w].store(0, std::memory_order_relaxed);
  }
  c->slots = base + ((header + 2 * words * sizeof(uint64_t) + 63) & ~size_t{63});
  c->owner.store(owner, std::memory_order_relaxed);
  return c;
}

void free_chunk(const SlabPool::Type& type, SlabChunk* c) {
  for (int32_t s = 0; s < c->built; ++s) type.destroy(c->slots + static_cast<size_t>(s) * type.stride);
  c->~SlabChunk();
  unmap_chunk(c);
}

// Moves the slots other threads freed into the owner's bitmap.
void fold_remote(SlabChunk* c) {
  if (c->remote_frees.load(std::memory_order_relaxed) == 0) return;
  c->remote_frees.store(0, std::memory_order_relaxed);
  for (int32_t w = 0; w < c->nwords; ++w) {
    if (c->remote_bits[w].load(std::memory_order_relaxed) == 0) continue;
    const uint64_t b = c->remote_bits[w].exchange(0, std::memory_order_acquire);
    c->free_bits[w] |= b;
    c->used -= std::popcount(b);
    if (b != 0 && w < c->cursor) c->cursor = w;
  }
}

// Chunks whose thread exited, per type, with their objects possibly still in use elsewhere.
struct Orphans {
  std::mutex mu;
  std::vector<std::pair<const SlabPool::Type*, SlabChunk*>> chunks;
};
Orphans& orphans() {
  static auto* o = new Orphans();  // never destroyed: threads may exit during static destruction
  return *o;
}

}  // namespace

struct SlabPoolAccess {
  // Per thread: the pools it made, so that its exit orphans their chunks.
  struct ExitGuard {
    std::vector<SlabPool**> pools;
    ~ExitGuard() {
      for (SlabPool** slot : pools) {
        delete *slot;
        *slot = SlabPool::dead();
      }
    }
  };
  static ExitGuard& guard() {
    thread_local ExitGuard g;
    return g;
  }
  static SlabPool* make(const SlabPool::Type& type, SlabPool*& tls) {
    auto* p = new SlabPool(type);
    tls = p;
    guard().pools.push_back(&tls);
    return p;
  }
};

void* SlabPool::take_slow(const Type& type, SlabPool*& tls, bool* fresh) {
  if (tls == nullptr) SlabPoolAccess::make(type, tls);
  if (tls == dead()) {
    // This thread's pools are gone (a static destructor making a node at exit): take from
    // the orphaned chunks under their lock.
    Orphans& o = orphans();
    std::lock_guard<std::mutex> lock(o.mu);
    for (auto& [t, c] : o.chunks) {
      if (t != &type) continue;
      fold_remote(c);
      if (void* p = take_from(c, type.stride, fresh)) return p;
    }
    SlabChunk* c = new_chunk(type, nullptr);
    o.chunks.emplace_back(&type, c);
    return take_from(c, type.stride, fresh);
  }
  SlabPool* pool = tls;
  // The current chunk is full. Take the owned chunk with the most free slots (folding in
  // other threads' frees) if it has a fair share free, else adopt an orphan, else map a new one.
  SlabChunk* best = nullptr;
  int32_t best_free = 0;
  for (int32_t i = 0; i < pool->nchunks_; ++i) {
    SlabChunk* c = pool->chunks_[i];
    const bool was_empty = c->used == 0;
    fold_remote(c);
    if (!was_empty && c->used == 0) ++pool->empty_chunks_;
    if (c->nslots - c->used > best_free) {
      best = c;
      best_free = c->nslots - c->used;
    }
  }
  if (best == nullptr || best_free < best->nslots / 16) {
    best = nullptr;
    {
      Orphans& o = orphans();
      std::lock_guard<std::mutex> lock(o.mu);
      for (size_t i = 0; i < o.chunks.size(); ++i) {
        auto [t, c] = o.chunks[i];
        if (t != &type) continue;
        fold_remote(c);
        if (c->nslots - c->used < c->nslots / 16) continue;
        c->owner.store(pool, std::memory_order_relaxed);
        o.chunks.erase(o.chunks.begin() + static_cast<ptrdiff_t>(i));
        best = c;
        break;
      }
    }
    if (best == nullptr) best = new_chunk(type, pool);
    if (pool->nchunks_ == pool->cap_) {
      pool->cap_ = std::max(8, 2 * pool->cap_);
      auto** grown = new SlabChunk*[static_cast<size_t>(pool->cap_)];
      std::copy(pool->chunks_, pool->chunks_ + pool->nchunks_, grown);
      delete[] pool->chunks_;
      pool->chunks_ = grown;
    }
    pool->chunks_[pool->nchunks_++] = best;
    if (best->used == 0) ++pool->empty_chunks_;
  }
  pool->current_ = best;
  if (best->used == 0) --pool->empty_chunks_;
  return take_from(best, type.stride, fresh);
}

void SlabPool::chunk_emptied(const Type& type, SlabChunk* c) {
  ++empty_chunks_;
  if (empty_chunks_ <= kRetainEmpty || c == current_) return;
  --empty_chunks_;
  auto* end = chunks_ + nchunks_;
  auto* it = std::find(chunks_, end, c);
  *it = end[-1];
  --nchunks_;
  free_chunk(type, c);
}

SlabPool::~SlabPool() {
  // The thread exits: free the chunks nothing uses, orphan the others.
  for (int32_t i = 0; i < nchunks_; ++i) {
    SlabChunk* c = chunks_[i];
    fold_remote(c);
    if (c->used == 0) {
      free_chunk(*type_, c);
      continue;
    }
    Orphans& o = orphans();
    std::lock_guard<std::mutex> lock(o.mu);
    c->owner.store(nullptr, std::memory_order_relaxed);
    o.chunks.emplace_back(type_, c);
  }
  delete[] chunks_;
}

int64_t SlabPool::chunks_mapped() { return mapped.load(std::memory_order_relaxed); }

}  // namespace sloth
