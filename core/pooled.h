// Class-specific allocation from a per-thread free list, for objects made and dropped once per
// traced op (autograd nodes and their per-tensor state): recording then costs no malloc/free.
#pragma once

#include <cstddef>
#include <new>

#include "core/prefetch.h"

namespace sloth {

// struct X : Pooled<X> { ... };  `new X` / `delete x` recycle up to kCap blocks per thread
// (1<<17 by default: recording with 1e5 live tensors under autograd then costs no malloc).
// The list is trivially destructible, so objects freed during exit (static tensors) still
// find it; blocks cached by a thread that exits are not returned (at most kCap per thread).
template <typename T, size_t kCap = size_t{1} << 17>
struct Pooled {
  static void* operator new(size_t n) {
    FreeList& f = list_;
    if (n == sizeof(T) && f.head != nullptr) {
      void* p = f.head;
      f.head = *static_cast<void**>(p);
      --f.count;
      // The block the next op takes: its lines arrive while this one is filled in (with many
      // live objects the list's blocks are cold; see core/prefetch.h).
      prefetch_for_write(f.head, sizeof(T));
      return p;
    }
    // Cache-line aligned: an object then touches ceil(size / 64) lines, not one more (with
    // 1e5 live results every line an op writes is a miss; see core/prefetch.h).
    return ::operator new(n, std::align_val_t{kAlign});
  }
  static void operator delete(void* p, size_t n) {
    FreeList& f = list_;
    if (n == sizeof(T) && f.count < kCap) {
      *static_cast<void**>(p) = f.head;
      f.head = p;
      ++f.count;
      return;
    }
    ::operator delete(p, std::align_val_t{kAlign});
  }

 private:
  static constexpr size_t kAlign = 64;
  struct FreeList {
    void* head;
    size_t count;
  };
  static inline thread_local FreeList list_{nullptr, 0};
};

}  // namespace sloth
