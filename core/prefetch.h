// Prefetching recycled objects. A per-thread pool hands back objects in the reverse order they
// were freed; with many live tensors (1e5 pending results) the memory of the next object to
// be handed out was last touched a whole program ago and is in DRAM. Recording then stalls on
// a miss per cache line it writes, and every locked instruction (a reference count, the
// registry's lock) waits for those writes to complete. The pools prefetch the objects the next
// op will take, so their lines arrive while the current op runs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sloth {

// Prefetches the cache lines of [p, p + bytes) for writing (no-op for null).
inline void prefetch_for_write(const void* p, size_t bytes) {
  if (p == nullptr) return;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
}

}  // namespace sloth
