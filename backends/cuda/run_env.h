// The state of one run of a compiled plan (slot values, bound scalars, stats) and the data
// helpers every kernel family uses on it: allocation, fills, scalar reads, strided copies.
#pragma once

#include <vector>

#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/view_layout.h"
#include "lazy/backend.h"
#include "lazy/device_data.h"
#include "lazy/plan.h"

namespace sloth::cuda {

using lazy::DeviceData;

struct RunEnv {
  const lazy::Plan* plan = nullptr;
  absl::Span<const double> scalars;
  std::vector<DeviceData> vals;  // by slot; empty until computed (or after release)
  lazy::RunStats* stats = nullptr;

  bool has(int slot) const { return vals[slot].storage != nullptr; }
  // A new contiguous tensor from the caching allocator, counted in stats.
  DeviceData alloc(IntSpan shape, DType dtype);
  // The slot's value; a kScalar slot is materialized as a 0-dim device tensor on first read.
  const DeviceData& get(int slot);
  // The slot's value as a host double (a device read for tensor slots).
  double scalar(int slot);
  void set(int slot, DeviceData d) { vals[slot] = std::move(d); }
};

using lazy::with_layout;
// `v` rounded through `dtype` (what storing it in that dtype and reading it back gives).
double cast_scalar(double v, DType dtype);
// Every element of `d` (contiguous) := v.
void fill(const DeviceData& d, double v);
// The single element of `d`, copied to the host.
double read_double(const DeviceData& d);
// dst (+)= src over dst's shape; src broadcasts; dtype converts.
void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate = false);
// A contiguous copy of `x` in `dtype`.
DeviceData make_contiguous(RunEnv& env, const DeviceData& x, DType dtype);
// Operand `slot` in dtype `t` (converted copy when it differs).
DeviceData operand_as(RunEnv& env, int slot, DType t);

}  // namespace sloth::cuda
