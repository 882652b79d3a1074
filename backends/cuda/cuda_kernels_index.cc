// The index ops (index_select, gather, scatter_add, index_add, index_put, one_hot) on the
// device; their checks, messages and walk geometry are the shared rules of lazy/structural.h.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"
#include "lazy/structural.h"

namespace sloth::cuda {

using lazy::Instr;
using lazy::IndexRange;
using lazy::indexed_size;

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

// The parameters of one index_source kernel (see codegen.h for the modes).
struct IndexLaunch {
  int mode;
  DType dtype;
  const DeviceData* target;
  const DeviceData* other;
  const DeviceData* idx;
  lazy::IndexWalk walk;
  const void* winner = nullptr;
  int64_t size = 0;
};

absl::Status launch_index(const IndexLaunch& l) {
  const lazy::IndexWalk& k = l.walk;
  const int64_t n = numel(k.shape);
  if (n == 0) return absl::OkStatus();
  SLOTH_RETURN_IF_ERROR(check_rank("index op", k.shape.size()));
  ParamWords w;
  w.p(l.target->raw());
  w.p(l.other->raw());
  w.p(l.idx->raw());
  w.p(l.winner);
  w.i(n);
  w.i(static_cast<int64_t>(k.shape.size()));
  w.i(k.dim);
  w.i(k.dstride);
  w.i(l.size);
  w.arr(k.shape);
  w.arr(k.target);
  w.arr(k.other);
  w.arr(k.index);
  launch(index_source(l.mode, l.dtype, l.idx->dtype), w, n);
  return absl::OkStatus();
}

// Modes 2 and 3 (index_select, index_add).
absl::Status launch_along_dim(int mode, DType dtype, const DeviceData& target,
                              const DeviceData& other, const DeviceData& idx, int64_t dim) {
  return launch_index({mode, dtype, &target, &other, &idx,
                       lazy::along_dim_walk(target, other, idx, dim)});
}

absl::Status index_select(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData x = operand_as(env, in.in[0], in.dtype);
  const DeviceData& idx = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(
      check_indices(env, in, idx, dim, indexed_size(x, dim), IndexRange::kNonNegative));
  DeviceData out = env.alloc(in.shape, in.dtype);
  if (x.layout.shape.empty()) {
    copy_into(out, x);
  } else {
    SLOTH_RETURN_IF_ERROR(launch_along_dim(2, in.dtype, x, out, idx, dim));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

template <bool kScatter>
absl::Status gather_scatter(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData x = env.get(in.in[0]);
  const DeviceData& index = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(
      check_indices(env, in, index, dim, indexed_size(x, dim), IndexRange::kNonNegative));
  if (!kScatter && x.dtype != in.dtype) x = make_contiguous(env, x, in.dtype);
  DeviceData out = kScatter ? make_contiguous(env, x, in.dtype) : env.alloc(in.shape, in.dtype);
  if (index.numel() > 0) {
    DeviceData src;
    if (kScatter) src = operand_as(env, in.in[2], in.dtype);
    const DeviceData& target = kScatter ? out : x;
    const DeviceData& other = kScatter ? src : out;
    SLOTH_RETURN_IF_ERROR(launch_index({kScatter ? 1 : 0, in.dtype, &target, &other, &index,
                                        lazy::gather_walk(target, other, index, dim)}));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status index_add(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& idx = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(
      check_indices(env, in, idx, dim, indexed_size(base, dim), IndexRange::kNonNegative));
  DeviceData src = operand_as(env, in.in[2], in.dtype);
  DeviceData out = make_contiguous(env, base, in.dtype);
  if (base.layout.shape.empty()) {
    if (idx.numel() > 0) copy_into(out, src, /*accumulate=*/true);
  } else if (idx.numel() > 0) {
    SLOTH_RETURN_IF_ERROR(launch_along_dim(3, in.dtype, out, src, idx, dim));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status index_put(RunEnv& env, const Instr& in) {
  const DeviceData& base = env.get(in.in[0]);
  DeviceData values = operand_as(env, in.in[2], in.dtype);
  const int64_t size = base.layout.shape[0];
  SLOTH_RETURN_IF_ERROR(check_indices(env, in, env.get(in.in[1]), 0, size, IndexRange::kWrapping));
  DeviceData idx = make_contiguous(env, env.get(in.in[1]), DType::kInt64);
  DeviceData out = make_contiguous(env, base, in.dtype);
  const int64_t len = idx.numel();
  if (len > 0) {
    // Last write wins with duplicate indices: winner[row] = the last i with idx[i] == row.
    DeviceContext& c = DeviceContext::get();
    DeviceData winner = env.alloc({std::max<int64_t>(size, 1)}, DType::kInt64);
    SLOTH_CU_OK(cudaMemsetAsync(winner.raw(), 0xff, std::max<int64_t>(size, 1) * 8, c.stream));
    ParamWords w;
    w.p(idx.raw());
    w.i(len);
    w.i(1);
    w.i(size);
    w.p(winner.raw());
    launch(winner_source(DType::kInt64), w, len);
    const Layout vl = lazy::index_put_values(base, values, len);
    // Row i of the values goes to row idx[i] of out: the index's stride is 1 along dim 0.
    lazy::IndexWalk walk;
    walk.shape = vl.shape;
    walk.target = out.layout.strides;
    walk.dstride = walk.target[0];
    walk.target[0] = 0;
    walk.other = vl.strides;
    walk.index.assign(vl.shape.size(), 0);
    walk.index[0] = 1;
    IndexLaunch l{4, in.dtype, &out, &values, &idx, std::move(walk)};
    l.winner = winner.raw();
    l.size = size;
    SLOTH_RETURN_IF_ERROR(launch_index(l));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status one_hot(RunEnv& env, const Instr& in) {
  const int64_t classes = OneHotAttrs::of(in.attrs).num_classes;
  const DeviceData& idx = env.get(in.in[0]);
  SLOTH_RETURN_IF_ERROR(check_indices(env, in, idx, 0, classes, IndexRange::kClasses));
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  DeviceContext& c = DeviceContext::get();
  SLOTH_CU_OK(cudaMemsetAsync(out.raw(), 0, std::max<int64_t>(out.numel(), 0) * 8, c.stream));
  const int64_t n = idx.numel();
  if (n > 0) {
    Shape shape = idx.layout.shape;
    Strides st = idx.layout.strides;
    if (shape.empty()) shape = {1}, st = {0};  // the kernel takes nd >= 1
    SLOTH_RETURN_IF_ERROR(check_rank("one_hot", shape.size()));
    ParamWords w;
    w.p(idx.raw());
    w.p(out.raw());
    w.i(n);
    w.i(static_cast<int64_t>(shape.size()));
    w.i(classes);
    w.arr(shape);
    w.arr(st);
    launch(one_hot_source(idx.dtype), w, n);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

const lazy::IndexKernels<RunEnv> kIndexKernels{index_select,         gather_scatter<false>,
                                               gather_scatter<true>, index_add,
                                               index_put,            one_hot};

}  // namespace sloth::cuda
