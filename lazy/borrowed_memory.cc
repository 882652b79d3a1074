#include "lazy/borrowed_memory.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "lazy/scheduler.h"

namespace sloth::lazy {
namespace {

std::mutex& borrowed_mu() {
  static std::mutex mu;
  return mu;
}
// Every group sharing caller memory, with the memory.
absl::flat_hash_map<AliasGroup*, StoragePtr>& borrowed() {
  static auto* m = new absl::flat_hash_map<AliasGroup*, StoragePtr>();
  return *m;
}
// Those of them written since they were made.
absl::flat_hash_set<AliasGroup*>& written() {
  static auto* s = new absl::flat_hash_set<AliasGroup*>();
  return *s;
}

// dst (contiguous) = src, element by element of `bytes` each (any strides).
void copy_to_contiguous(char* dst, const DeviceData& src) {
  const size_t es = dtype_size(src.dtype);
  const auto* from = static_cast<const char*>(src.raw());
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.is_contiguous()) {
    std::memcpy(dst, from, static_cast<size_t>(n) * es);
    return;
  }
  const Shape& shape = src.layout.shape;
  const Strides& strides = src.layout.strides;
  const int nd = static_cast<int>(shape.size());
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * es, from + off * static_cast<int64_t>(es), es);
    for (int d = nd - 1; d >= 0; --d) {  // the odometer: the next index in row-major order
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Copies g's value, when a sync computed it and it is not the memory itself, into the memory,
// and makes the value read from there (its own buffer goes).
void write_back(AliasGroup& g, const StoragePtr& memory) {
  Node* v = g.value.get();
  if (v == nullptr || !v->materialized() || !v->data->storage) return;
  if (v->data->storage.get() == memory.get() && v->data->is_contiguous() &&
      v->data->layout.offset == 0)
    return;
  if (static_cast<size_t>(v->data->numel()) * dtype_size(v->data->dtype) > memory->bytes()) return;
  copy_to_contiguous(static_cast<char*>(memory->data()), *v->data);
  v->data->storage = memory;
  v->data->layout.strides = contiguous_strides(v->data->layout.shape);
  v->data->layout.offset = 0;
}

}  // namespace

void borrow_memory(AliasGroup& g, StoragePtr memory) {
  std::lock_guard lock(borrowed_mu());
  g.borrowed = true;
  borrowed().emplace(&g, std::move(memory));
}

void note_borrowed_write(AliasGroup& g) {
  std::lock_guard lock(borrowed_mu());
  if (written().insert(&g).second) borrowed_written_count.fetch_add(1, std::memory_order_relaxed);
}

void write_back_borrowed() {
  std::lock_guard lock(borrowed_mu());
  for (AliasGroup* g : written()) {
    auto it = borrowed().find(g);
    if (it != borrowed().end()) write_back(*g, it->second);
  }
}

void borrowed_group_released(AliasGroup& g) {
  StoragePtr memory;
  {
    std::lock_guard lock(borrowed_mu());
    auto it = borrowed().find(&g);
    if (it == borrowed().end()) return;
    memory = std::move(it->second);
    borrowed().erase(it);
    if (written().erase(&g) != 0) borrowed_written_count.fetch_sub(1, std::memory_order_relaxed);
    g.borrowed = false;
  }
  // A write not yet run: run it now (LibTorch's in-place op has written the memory by the
  // time the tensor goes). Not from inside a sync or on a data loader worker, which do not
  // sync; a sync in progress computes every listed group's value anyway.
  // This runs in a destructor: a failing run (an index out of range found by the kernel)
  // cannot throw from here, so it is reported and the memory keeps its old values.
  if (g.value && !g.value->materialized() && can_sync_here()) {
    NodePtr v = g.value;
    try {
      sync_nodes({&v, 1}, g.device);
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "[sloth] from_blob: the write into the caller's memory, run when its last "
                   "tensor went, failed; the memory keeps its old values: %s\n",
                   e.what());
    }
  }
  write_back(g, memory);
  g.value.reset();
  // Recorded ops (or anything else) still read the memory: give them a copy of it.
  if (memory->use_count() > 1) memory->take_ownership_of_copy();
}

}  // namespace sloth::lazy
