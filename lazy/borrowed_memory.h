// Caller-owned memory behind from_blob tensors, with LibTorch's results under lazy recording.
//
// LibTorch runs each op when it is written, so the memory a from_blob tensor shares is read
// then and written then: `from_blob(p, ...).clone()` owns its values once the line ends, and
// `from_blob(out, ...).copy_(y)` has filled `out` when it returns. sloth records both and runs
// them at a sync, so two rules give the same results:
// - when the last tensor over the memory (the from_blob tensor and its views) goes while
//   recorded ops still read it, they are given a copy (the caller may free or refill it from
//   then on, as with LibTorch);
// - a value written into such a tensor is copied into the memory by every sync that computes
//   it, and when the last tensor over the memory goes with a write not yet run, that write is
//   run and copied then.
// What stays lazy: between syncs the memory lags the tensor's writes, and a refill of the
// memory while the from_blob tensor lives is seen by ops recorded before it (keep the tensor
// only as long as the memory holds its values, or clone it).
#pragma once

#include <atomic>

#include "core/storage.h"
#include "lazy/tensor_impl.h"

namespace sloth::lazy {

// `g` (a new group whose value is a data leaf over `memory`, contiguous) shares caller memory.
void borrow_memory(AliasGroup& g, StoragePtr memory);

// `g` (borrowed) was given a new value: a write the memory must receive. Only such groups are
// visited at syncs, so many live from_blob tensors that are only read cost a sync nothing.
void note_borrowed_write(AliasGroup& g);

// The number of written groups that share caller memory: the sync's check is one load.
inline std::atomic<int> borrowed_written_count{0};

// Copies the value of every written group sharing caller memory that a sync (or a jit
// replay) just computed into the memory (end of sync_nodes).
void write_back_borrowed();

// The last reference to `g` went (AliasGroup::release, before it drops its value).
void borrowed_group_released(AliasGroup& g);

}  // namespace sloth::lazy
