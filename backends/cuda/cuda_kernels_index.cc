// The index primitives on the device (lazy/structural.h: IndexPrimitives); which op runs
// which primitive over which walk, and the range messages, are lazy/structural.cc's.
#include <algorithm>

#include "backends/cuda/host_staging.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"
#include "lazy/structural.h"

namespace sloth::cuda {

using lazy::Instr;
using lazy::IndexRange;

namespace {

// Checks every index on the device; only when one is bad are the indices copied to the host
// to name the first one (the CPU backend's message).
absl::Status check_indices(RunEnv& env, const Instr& in, const DeviceData& idx, int64_t dim,
                           int64_t size, IndexRange range) {
  const int64_t n = idx.numel();
  if (n == 0) return absl::OkStatus();
  Shape shape = idx.layout.shape;
  Strides st = idx.layout.strides;
  coalesce(shape, {&st});
  SLOTH_RETURN_IF_ERROR(check_rank("index check", shape.size()));
  DeviceData err = env.alloc({1}, DType::kInt64);
  DeviceContext& c = DeviceContext::get();
  SLOTH_CU_OK(cudaMemsetAsync(err.raw(), 0, 8, c.stream));
  ParamWords w;
  w.p(idx.raw());
  w.i(n);
  w.i(static_cast<int64_t>(shape.size()));
  w.arr(shape);
  w.arr(st);
  w.i(size);
  w.i(range == IndexRange::kWrapping ? 1 : 0);
  w.p(err.raw());
  launch(check_index_source(idx.dtype), w, n);
  int64_t bad = 0;
  host_staging().to_host(err.raw(), &bad, 8);
  if (!bad) return absl::OkStatus();
  DeviceData flat = make_contiguous(env, idx, DType::kInt64);
  std::vector<int64_t> v(n);
  host_staging().to_host(flat.raw(), v.data(), n * 8);
  return lazy::check_index_range(in, v, dim, size, range);
}

// The index primitive over walk `w` (see index_source for the modes). kWrite's last write
// wins: a first kernel records, per target index, the last position along dim that writes
// it (winner), and the walk writes only from that position.
absl::Status walk(RunEnv& env, lazy::IndexMode mode, const DeviceData& target,
                  const DeviceData& other, const DeviceData& idx, const lazy::IndexWalk& w) {
  const int64_t n = numel(w.shape);
  if (n == 0) return absl::OkStatus();
  SLOTH_RETURN_IF_ERROR(check_rank("index op", w.shape.size()));
  DeviceData winner;
  if (mode == lazy::IndexMode::kWrite) {
    // The index of a put varies along dim alone (an along-dim walk): its i-th value is at
    // i * index[dim].
    const int64_t slots = std::max<int64_t>(w.size, 1);
    winner = env.alloc({slots}, DType::kInt64);
    DeviceContext& c = DeviceContext::get();
    SLOTH_CU_OK(cudaMemsetAsync(winner.raw(), 0xff, slots * 8, c.stream));
    const int64_t len = w.shape[w.dim];
    ParamWords pw;
    pw.p(idx.raw());
    pw.i(len);
    pw.i(w.index[w.dim]);
    pw.i(w.size);
    pw.p(winner.raw());
    launch(winner_source(idx.dtype), pw, len);
  }
  ParamWords pw;
  pw.p(target.raw());
  pw.p(other.raw());
  pw.p(idx.raw());
  pw.p(mode == lazy::IndexMode::kWrite ? winner.raw() : nullptr);
  pw.i(n);
  pw.i(static_cast<int64_t>(w.shape.size()));
  pw.i(w.dim);
  pw.i(w.dstride);
  pw.i(w.size);
  pw.arr(w.shape);
  pw.arr(w.target);
  pw.arr(w.other);
  pw.arr(w.index);
  launch(index_source(static_cast<int>(mode), target.dtype, idx.dtype), pw, n);
  return absl::OkStatus();
}

absl::Status mark_classes(RunEnv&, const DeviceData& out, const DeviceData& idx,
                          int64_t classes) {
  DeviceContext& c = DeviceContext::get();
  SLOTH_CU_OK(cudaMemsetAsync(out.raw(), 0, std::max<int64_t>(out.numel(), 0) * 8, c.stream));
  const int64_t n = idx.numel();
  if (n == 0) return absl::OkStatus();
  Shape shape = idx.layout.shape;
  Strides st = idx.layout.strides;
  if (shape.empty()) shape = {1}, st = {0};  // the kernel takes nd >= 1
  SLOTH_RETURN_IF_ERROR(check_rank("index op", shape.size()));
  ParamWords pw;
  pw.p(idx.raw());
  pw.p(out.raw());
  pw.i(n);
  pw.i(static_cast<int64_t>(shape.size()));
  pw.i(classes);
  pw.arr(shape);
  pw.arr(st);
  launch(one_hot_source(idx.dtype), pw, n);
  return absl::OkStatus();
}

}  // namespace

const lazy::IndexPrimitives<RunEnv> kIndexPrimitives{check_indices, walk, mark_classes};

}  // namespace sloth::cuda
