// Storage: a reference-counted, 64-byte aligned block of device memory, and the allocator
// interface behind it. Views share a Storage; Fresh results get their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/device.h"
#include "core/ref.h"

namespace sloth {

inline constexpr size_t kAlignment = 64;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual Device device() const = 0;
};

class Storage final : public RefCounted {
 public:
  // Memory from `alloc`, returned to it when the last reference goes.
  Storage(Allocator* alloc, size_t bytes);
  // Memory the caller owns (from_blob); `deleter` runs when the last reference goes.
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> deleter);
  ~Storage() override;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  uint64_t id() const { return id_; }  // unique per Storage ever created
  // Caller-owned memory (from_blob): never donated to a kernel as its output buffer, since
  // the caller may read or reuse it (a dataset's pixels viewed by from_blob).
  bool external() const { return alloc_ == nullptr; }
  // Caller memory without a deleter: copies it into memory of its own (from the CPU
  // allocator), so the caller may free it while this Storage is still read
  // (lazy/borrowed_memory.h). Anything else: nothing to do.
  void take_ownership_of_copy();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* alloc_ = nullptr;
  std::function<void(void*)> deleter_;
  uint64_t id_;
};
using StoragePtr = Ref<Storage>;

// The host allocator: size-binned free lists over 64-byte aligned blocks. Blocks are kept
// when freed, so a training loop in steady state takes no new memory from the OS (on the
// machines we target a first touch of fresh 4 KiB pages runs at ~0.3 GB/s). Blocks of up to
// 256 KiB are carved from 2 MiB chunks outside malloc's heap (see storage.cc); the cache
// returns such a chunk when all of its blocks are free.
Allocator* cpu_allocator();

struct AllocatorStats {
  int64_t os_allocations = 0;   // blocks taken from the OS
  int64_t os_bytes = 0;         // bytes taken from the OS, ever
  int64_t allocations = 0;      // allocate() calls, cache hits included
  int64_t cached_bytes = 0;     // bytes in free lists now
  int64_t live_bytes = 0;       // bytes handed out and not yet returned
};
AllocatorStats cpu_allocator_stats();
void cpu_allocator_empty_cache();

}  // namespace sloth
