// core/slab_pool.h: lowest-address-first slots whatever the free order, recycled objects kept
// constructed, frees from other threads, chunks of exited threads adopted, empty chunks
// returned past the retention limit, and IR nodes made from it.
#include "core/slab_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "core/storage.h"
#include "lazy/node.h"

namespace sloth {
namespace {

struct Obj {
  static inline std::atomic<int64_t> constructed{0}, destroyed{0};
  Obj() { constructed.fetch_add(1); }
  ~Obj() { destroyed.fetch_add(1); }
  int64_t value = 0;
  char pad[100] = {};
};
constexpr size_t kStride = 128;
static_assert(sizeof(Obj) <= kStride);
const SlabPool::Type kObjSlab{kStride, [](void* p) { static_cast<Obj*>(p)->~Obj(); }};
thread_local SlabPool* obj_slabs = nullptr;

Obj* take() {
  bool fresh;
  void* p = SlabPool::take<kStride>(kObjSlab, obj_slabs, &fresh);
  return fresh ? new (p) Obj() : static_cast<Obj*>(p);
}
void give(Obj* o) { SlabPool::give<kStride>(kObjSlab, obj_slabs, o); }

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(SlabPool, HandsOutLowestSlotsFirstWhateverTheFreeOrder) {
  std::vector<Obj*> a(3000);
  for (auto& o : a) o = take();
  for (size_t i = 1; i < a.size(); ++i)
    if (SlabChunk::of(a[i]) == SlabChunk::of(a[i - 1])) {
      EXPECT_EQ(addr(a[i]), addr(a[i - 1]) + kStride);
    }
  std::vector<uintptr_t> before;
  for (Obj* o : a) before.push_back(addr(o));
  std::sort(before.begin(), before.end());
  for (size_t i = 0; i < a.size(); ++i) a[i]->value = static_cast<int64_t>(i);
  const int64_t made = Obj::constructed.load();
  std::shuffle(a.begin(), a.end(), std::mt19937(7));
  for (Obj* o : a) give(o);
  // The same slots again, now in address order, and recycled (not constructed again, their
  // fields as the last holder left them).
  std::vector<uintptr_t> after;
  int64_t values = 0;
  for (auto& o : a) {
    o = take();
    after.push_back(addr(o));
    values += o->value;
  }
  EXPECT_EQ(Obj::constructed.load(), made);
  EXPECT_EQ(values, 3000 * 2999 / 2);
  EXPECT_EQ(after, before);
  for (Obj* o : a) give(o);
}

TEST(SlabPool, FreesFromAnotherThreadAreReusedByTheOwner) {
  // Fill whole chunks, so that the owner's next take must look for space.
  std::vector<Obj*> a;
  const int64_t chunks = SlabPool::chunks_mapped();
  while (SlabPool::chunks_mapped() < chunks + 2) a.push_back(take());
  Obj* last = a.back();  // the first object of a new chunk
  a.pop_back();
  std::vector<Obj*> first_chunk;
  for (Obj* o : a)
    if (SlabChunk::of(o) == SlabChunk::of(a.front())) first_chunk.push_back(o);
  // Another thread frees a quarter of the first chunk.
  std::vector<Obj*> remote(first_chunk.begin(), first_chunk.begin() + first_chunk.size() / 4);
  std::thread([&] {
    for (Obj* o : remote) give(o);
  }).join();
  // Fill the rest of the new chunk: the owner then folds the remote frees in and reuses them.
  std::vector<Obj*> b;
  while (SlabChunk::of(b.empty() ? last : b.back()) == SlabChunk::of(last)) b.push_back(take());
  EXPECT_EQ(SlabChunk::of(b.back()), SlabChunk::of(first_chunk.front()));
  EXPECT_EQ(b.back(), remote.front());
  EXPECT_EQ(SlabPool::chunks_mapped(), chunks + 2);
  give(last);
  for (Obj* o : b) give(o);
  for (Obj* o : a)
    if (std::find(remote.begin(), remote.end(), o) == remote.end()) give(o);
}

TEST(SlabPool, ChunksOfAnExitedThreadAreAdopted) {
  std::vector<Obj*> made;
  std::thread([&] {
    for (int i = 0; i < 1000; ++i) made.push_back(take());
  }).join();
  // The thread is gone; its objects are still in use here, then freed here.
  for (Obj* o : made) EXPECT_EQ(o->value, 0);
  for (Obj* o : made) give(o);
  // A new thread adopts the orphaned chunk: its first object is the lowest freed slot.
  Obj* first = nullptr;
  std::thread([&] {
    first = take();
    give(first);
  }).join();
  EXPECT_EQ(first, made.front());
}

TEST(SlabPool, ReturnsEmptyChunksPastTheRetentionLimit) {
  const int64_t chunks = SlabPool::chunks_mapped();
  std::vector<Obj*> a;
  while (SlabPool::chunks_mapped() < chunks + 40) a.push_back(take());
  const int64_t destroyed = Obj::destroyed.load(), peak = SlabPool::chunks_mapped();
  for (Obj* o : a) give(o);
  // Up to 32 empty chunks stay (for the next large graph), and the current one; the rest go
  // back, their objects destroyed.
  EXPECT_LE(SlabPool::chunks_mapped(), chunks + 33);
  EXPECT_GE(peak - SlabPool::chunks_mapped(), 7);
  EXPECT_GT(Obj::destroyed.load(), destroyed);
}

// A thread_local made before the thread's first take is destroyed after its pools: a take
// and a give from its destructor go through the orphaned chunks.
TEST(SlabPool, WorksFromDestructorsAfterTheThreadsPoolsAreGone) {
  int64_t seen = -1;
  std::thread([&] {
    struct Late {
      int64_t* seen;
      ~Late() {
        Obj* o = take();
        o->value = 41;
        *seen = o->value + 1;
        give(o);
      }
    };
    thread_local Late late{&seen};
    (void)late;
    give(take());
  }).join();
  EXPECT_EQ(seen, 42);
}

TEST(SlabPool, IrNodesComeBackInAddressOrderAfterAScatteredFree) {
  std::vector<lazy::NodePtr> nodes;
  for (int i = 0; i < 2000; ++i) nodes.push_back(lazy::Node::scalar_leaf(i, DType::kFloat32));
  std::vector<uintptr_t> before;
  for (const auto& n : nodes) before.push_back(addr(n.get()));
  std::sort(before.begin(), before.end());
  const int64_t live = lazy::live_nodes();
  std::shuffle(nodes.begin(), nodes.end(), std::mt19937(3));
  nodes.clear();
  EXPECT_EQ(lazy::live_nodes(), live - 2000);
  for (int i = 0; i < 2000; ++i) nodes.push_back(lazy::Node::scalar_leaf(2.5, DType::kFloat32));
  std::vector<uintptr_t> after;
  for (const auto& n : nodes) {
    after.push_back(addr(n.get()));
    EXPECT_EQ(n->scalar, 2.5);
    EXPECT_TRUE(n->inputs.empty());
  }
  EXPECT_EQ(after, before);
}

// Small host buffers come from chunks of the allocator's own, carved in address order, and go
// back a chunk at a time when the cache is emptied. Blocks of 4 KiB and more are padded by an
// odd number of cache lines (17 for 16 KiB and more) so that consecutive blocks start at
// different offsets within a page (cache colouring).
TEST(HostAllocator, CarvesSmallBlocksFromChunksAndReturnsWholeFreeChunks) {
  if (kSanitizedHeap) GTEST_SKIP() << "sanitized builds take every block from the heap";
  constexpr size_t kBin = size_t{128} << 10;  // no other test uses this bin
  constexpr size_t kStride = kBin + 17 * 64;
  constexpr int kPerChunk = (size_t{2} << 20) / kStride;  // 15
  static_assert(kPerChunk == 15);
  const AllocatorStats before = cpu_allocator_stats();
  std::vector<StoragePtr> v;
  for (int i = 0; i < 100; ++i) v.push_back(make_ref<Storage>(cpu_allocator(), kBin - 100));
  for (size_t i = 1; i < v.size(); ++i) {
    const uintptr_t a = addr(v[i - 1]->data()), b = addr(v[i]->data());
    if (i % kPerChunk != 0) {
      EXPECT_EQ(b, a + kStride) << i;
      EXPECT_NE(b % 4096, a % 4096) << i;
    } else {
      EXPECT_EQ(b % (size_t{2} << 20), 0u) << i;  // the next chunk starts aligned
    }
  }
  const AllocatorStats made = cpu_allocator_stats();
  EXPECT_EQ(made.os_allocations - before.os_allocations, 7);  // ceil(100 / 15) chunks
  EXPECT_EQ(made.os_bytes - before.os_bytes, 7 * (int64_t{2} << 20));
  v.clear();
  EXPECT_EQ(cpu_allocator_stats().cached_bytes - before.cached_bytes, 100 * static_cast<int64_t>(kBin));
  // Six chunks are all free and go back; the seventh is still being carved (10 of 15 blocks)
  // and stays, its blocks cached.
  cpu_allocator_empty_cache();
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, 10 * static_cast<int64_t>(kBin));
  // The kept blocks are handed out again, then carving goes on where it stopped.
  std::vector<StoragePtr> w;
  for (int i = 0; i < 11; ++i) w.push_back(make_ref<Storage>(cpu_allocator(), kBin));
  EXPECT_EQ(cpu_allocator_stats().os_allocations, made.os_allocations);
  EXPECT_EQ(addr(w[10]->data()) % (size_t{2} << 20), 10 * kStride);
}

// Large blocks (past the carved bins) are coloured too: consecutive ones start 17 lines
// apart within their pages, and each is usable to its last byte.
TEST(HostAllocator, LargeBlocksStartAtDifferentPageOffsets) {
  if (kSanitizedHeap) GTEST_SKIP() << "sanitized builds hand out blocks uncoloured";
  constexpr size_t kBytes = size_t{3} << 20;  // a 3 MiB bin: huge-page aligned, no other test uses it
  cpu_allocator_empty_cache();
  const int64_t kept = cpu_allocator_stats().cached_bytes;  // blocks of chunks still carved
  std::vector<StoragePtr> v;
  for (int i = 0; i < 4; ++i) v.push_back(make_ref<Storage>(cpu_allocator(), kBytes));
  for (size_t i = 1; i < v.size(); ++i) {
    const size_t a = addr(v[i - 1]->data()) % 4096, b = addr(v[i]->data()) % 4096;
    EXPECT_EQ((b + 4096 - a) % 4096, 17 * 64u) << i;
  }
  for (auto& s : v) {
    auto* p = static_cast<unsigned char*>(s->data());
    p[0] = 1;
    p[kBytes - 1] = 2;
    EXPECT_EQ(p[0] + p[kBytes - 1], 3);
  }
  v.clear();
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, kept + 4 * static_cast<int64_t>(kBytes));
  cpu_allocator_empty_cache();  // frees them at their aligned starts (a wrong start aborts)
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, kept);
}

}  // namespace
}  // namespace sloth
