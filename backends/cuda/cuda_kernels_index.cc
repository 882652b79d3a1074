// Index ops (index_select, gather, scatter_add, index_add, index_put, one_hot), cat and
// clone.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"

namespace sloth::cuda {

using lazy::Instr;

namespace {

// Checks every index on the device; only when one is bad are the indices copied to the host
// to name the first one (the CPU backend's message).
void check_indices(RunEnv& env, const Instr& in, const DeviceData& idx, int64_t dim, int64_t size,
                   bool allow_negative, const char* what) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  Shape shape = idx.layout.shape;
  Strides st = idx.layout.strides;
  coalesce(shape, {&st});
  check_rank("index check", shape.size());
  DeviceData err = env.alloc({1}, DType::kInt64);
  DeviceContext& c = DeviceContext::get();
  SLOTH_CU(cudaMemsetAsync(err.raw(), 0, 8, c.stream));
  ParamWords w;
  w.p(idx.raw());
  w.i(n);
  w.i(static_cast<int64_t>(shape.size()));
  w.arr(shape);
  w.arr(st);
  w.i(size);
  w.i(allow_negative ? 1 : 0);
  w.p(err.raw());
  launch(check_index_source(idx.dtype), w, n);
  int64_t bad = 0;
  host_staging().to_host(err.raw(), &bad, 8);
  if (!bad) return;
  DeviceData flat = make_contiguous(env, idx, DType::kInt64);
  std::vector<int64_t> v(n);
  host_staging().to_host(flat.raw(), v.data(), n * 8);
  for (int64_t i : v) {
    if (allow_negative ? (i < -size || i >= size) : (i < 0 || i >= size)) {
      if (std::string(what) == "one_hot")
        throw Error(absl::StrFormat("one_hot: index %d is out of range for num_classes %d (valid: 0 to %d)",
                                    i, size, size - 1));
      if (allow_negative)
        throw Error(absl::StrFormat(
            "%s: index %d is out of range for dim 0 of size %d (valid: %d to %d)", op_name(in.op), i,
            size, -size, size - 1));
      throw Error(absl::StrFormat("%s: index %d is out of range for dim %d of size %d (valid: 0 to %d)",
                                  op_name(in.op), i, dim, size, size - 1));
    }
  }
}

int64_t dim_size(const DeviceData& x, int64_t dim) {
  return x.layout.shape.empty() ? 1 : x.layout.shape[dim];
}

// A 0-dim index is walked as a one-element 1-D one (the kernels take nd >= 1).
void at_least_1d(Shape& shape, Strides& strides) {
  if (shape.empty()) {
    shape = {1};
    strides = {0};
  }
}

// The parameters of one index_source kernel (see codegen.h for the modes).
struct IndexLaunch {
  int mode;
  DType dtype;
  const DeviceData* target;
  const DeviceData* other;
  const DeviceData* idx;
  const void* winner = nullptr;
  int64_t dim = 0, dstride = 0, size = 0;
  Shape shape;
  Strides ts, os, is;

  // The target is addressed along `d` by the index value, not by the position: its stride
  // there moves to dstride and the position's coordinate in `d` contributes nothing.
  void index_target_along(Strides target_strides, int64_t d) {
    dim = d;
    ts = std::move(target_strides);
    dstride = ts[d];
    ts[d] = 0;
  }
};

void launch_index(const IndexLaunch& l) {
  const int64_t n = numel(l.shape);
  if (n == 0) return;
  check_rank("index op", l.shape.size());
  ParamWords w;
  w.p(l.target->raw());
  w.p(l.other->raw());
  w.p(l.idx->raw());
  w.p(l.winner);
  w.i(n);
  w.i(static_cast<int64_t>(l.shape.size()));
  w.i(l.dim);
  w.i(l.dstride);
  w.i(l.size);
  w.arr(l.shape);
  w.arr(l.ts);
  w.arr(l.os);
  w.arr(l.is);
  launch(index_source(l.mode, l.dtype, l.idx->dtype), w, n);
}

// Modes 2 and 3 (index_select, index_add): walks `other`'s positions; position pos takes
// the index idx[pos[dim]] of the 1-D (or 0-dim) `idx`.
void launch_along_dim(int mode, DType dtype, const DeviceData& target, const DeviceData& other,
                      const DeviceData& idx, int64_t dim) {
  IndexLaunch l{mode, dtype, &target, &other, &idx};
  l.shape = other.layout.shape;
  l.index_target_along(target.layout.strides, dim);
  l.os = other.layout.strides;
  l.is.assign(l.shape.size(), 0);
  l.is[dim] = idx.layout.shape.empty() ? 0 : idx.layout.strides[0];
  launch_index(l);
}

void index_select(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData x = operand_as(env, in.in[0], in.dtype);
  const DeviceData& idx = env.get(in.in[1]);
  check_indices(env, in, idx, dim, dim_size(x, dim), false, "");
  DeviceData out = env.alloc(in.shape, in.dtype);
  if (x.layout.shape.empty()) {
    copy_into(out, x);
  } else {
    launch_along_dim(2, in.dtype, x, out, idx, dim);
  }
  env.set(in.out, std::move(out));
}

template <bool kScatter>
void gather_scatter(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData x = env.get(in.in[0]);
  const DeviceData& index = env.get(in.in[1]);
  check_indices(env, in, index, dim, dim_size(x, dim), false, "");
  if (!kScatter && x.dtype != in.dtype) x = make_contiguous(env, x, in.dtype);
  DeviceData out = kScatter ? make_contiguous(env, x, in.dtype) : env.alloc(in.shape, in.dtype);
  if (index.numel() == 0) {
    env.set(in.out, std::move(out));
    return;
  }
  DeviceData src;
  if (kScatter) src = operand_as(env, in.in[2], in.dtype);
  const DeviceData& target = kScatter ? out : x;
  const DeviceData& other = kScatter ? src : out;
  IndexLaunch l{kScatter ? 1 : 0, in.dtype, &target, &other, &index};
  l.shape = index.layout.shape;
  l.is = index.layout.strides;
  at_least_1d(l.shape, l.is);
  l.os = other.layout.strides;
  if (l.os.empty()) l.os = {0};
  Strides ts = target.layout.strides;
  if (ts.empty()) ts = {0};
  l.index_target_along(std::move(ts), dim);
  launch_index(l);
  env.set(in.out, std::move(out));
}

void index_add(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& idx = env.get(in.in[1]);
  check_indices(env, in, idx, dim, dim_size(base, dim), false, "");
  DeviceData src = operand_as(env, in.in[2], in.dtype);
  DeviceData out = make_contiguous(env, base, in.dtype);
  if (base.layout.shape.empty()) {
    if (idx.numel() > 0) copy_into(out, src, /*accumulate=*/true);
  } else if (idx.numel() > 0) {
    launch_along_dim(3, in.dtype, out, src, idx, dim);
  }
  env.set(in.out, std::move(out));
}

void index_put(RunEnv& env, const Instr& in) {
  const DeviceData& base = env.get(in.in[0]);
  DeviceData values = operand_as(env, in.in[2], in.dtype);
  const int64_t size = base.layout.shape[0];
  check_indices(env, in, env.get(in.in[1]), 0, size, true, "");
  DeviceData idx = make_contiguous(env, env.get(in.in[1]), DType::kInt64);
  DeviceData out = make_contiguous(env, base, in.dtype);
  const int64_t len = idx.numel();
  if (len > 0) {
    // Last write wins with duplicate indices: winner[row] = the last i with idx[i] == row.
    DeviceContext& c = DeviceContext::get();
    DeviceData winner = env.alloc({std::max<int64_t>(size, 1)}, DType::kInt64);
    SLOTH_CU(cudaMemsetAsync(winner.raw(), 0xff, std::max<int64_t>(size, 1) * 8, c.stream));
    ParamWords w;
    w.p(idx.raw());
    w.i(len);
    w.i(1);
    w.i(size);
    w.p(winner.raw());
    launch(winner_source(DType::kInt64), w, len);
    Shape target = base.layout.shape;
    target[0] = len;
    IndexLaunch l{4, in.dtype, &out, &values, &idx};
    l.winner = winner.raw();
    l.size = size;
    l.shape = target;
    l.index_target_along(out.layout.strides, 0);
    l.os = broadcast_strides(values.layout.shape, values.layout.strides, target);
    l.is.assign(target.size(), 0);
    l.is[0] = 1;
    launch_index(l);
  }
  env.set(in.out, std::move(out));
}

void one_hot(RunEnv& env, const Instr& in) {
  const int64_t classes = OneHotAttrs::of(in.attrs).num_classes;
  const DeviceData& idx = env.get(in.in[0]);
  check_indices(env, in, idx, 0, classes, false, "one_hot");
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  DeviceContext& c = DeviceContext::get();
  SLOTH_CU(cudaMemsetAsync(out.raw(), 0, std::max<int64_t>(out.numel(), 0) * 8, c.stream));
  const int64_t n = idx.numel();
  if (n > 0) {
    Shape shape = idx.layout.shape;
    Strides st = idx.layout.strides;
    at_least_1d(shape, st);
    check_rank("one_hot", shape.size());
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
}

void cat(RunEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData out = env.alloc(in.shape, in.dtype);
  int64_t at = 0;
  for (int32_t slot : in.in) {
    const DeviceData& x = env.get(slot);
    const int64_t len = x.layout.shape[dim];
    if (len > 0 && x.numel() > 0) {
      Layout w = out.layout;
      w.offset += at * w.strides[dim];
      w.shape[dim] = len;
      copy_into(with_layout(out, w), x);
    }
    at += len;
  }
  env.set(in.out, std::move(out));
}

}  // namespace

void run_index(RunEnv& env, const Instr& in) {
  switch (in.op) {
    case OpId::kIndexSelect: return index_select(env, in);
    case OpId::kGather: return gather_scatter<false>(env, in);
    case OpId::kScatterAdd: return gather_scatter<true>(env, in);
    case OpId::kIndexAdd: return index_add(env, in);
    case OpId::kIndexPut: return index_put(env, in);
    case OpId::kOneHot: return one_hot(env, in);
    case OpId::kCat: return cat(env, in);
    case OpId::kClone:
      env.set(in.out, make_contiguous(env, env.get(in.in[0]), in.dtype));
      return;
    default:
      throw Error(absl::StrFormat("cuda backend: %s is not an index or shape op", op_name(in.op)));
  }
}

}  // namespace sloth::cuda
