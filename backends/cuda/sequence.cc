// The sequence Kernel ops on CUDA (cumsum, argsort, topk): codegen_sequence.h's kernels on a
// contiguous copy of the input. topk's ties come out in stable order (PyTorch's CUDA topk
// has its own order; the CPU backend reproduces PyTorch's CPU order).
// scaled_dot_product_attention on CUDA takes the composite path (sloth/attention_ops.cc), so
// kSdpa has no CUDA kernel.
#include "backends/cuda/codegen_sequence.h"
#include "backends/cuda/kernel_launch.h"
#include "backends/cuda/op_kernels.h"
#include "core/op_attrs.h"

namespace sloth::cuda {
namespace {

struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
};
Rows rows_of(const Shape& s, int64_t dim) {
  Rows r;
  if (s.empty()) return r;
  for (int64_t d = 0; d < dim; ++d) r.outer *= s[d];
  r.n = s[dim];
  for (size_t d = dim + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

DeviceData contiguous_input(RunEnv& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  return x.is_contiguous() ? x : make_contiguous(env, x, x.dtype);
}

absl::Status run_cumsum(RunEnv& env, const Instr& in) {
  const DeviceData x = contiguous_input(env, in);
  const Rows r = rows_of(x.layout.shape, DimAttrs::of(in.attrs).dim);
  DeviceData out = env.alloc(x.layout.shape, in.dtype);
  const int64_t rows = r.outer * r.inner;
  if (rows > 0 && r.n > 0) {
    ParamWords w;
    w.p(x.raw());
    w.p(out.raw());
    w.i(rows);
    w.i(r.n);
    w.i(r.inner);
    launch(cumsum_source(x.dtype, in.dtype), w, rows);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status sort_rows(RunEnv& env, const Instr& in, int64_t dim, bool descending, int64_t k) {
  const DeviceData x = contiguous_input(env, in);
  const Rows r = rows_of(x.layout.shape, dim);
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  const int64_t rows = r.outer * r.inner;
  if (rows > 0 && r.n > 0 && k > 0) {
    DeviceData scratch = env.alloc({rows, r.n}, DType::kInt64);
    ParamWords w;
    w.p(x.raw());
    w.p(out.raw());
    w.i(rows);
    w.i(r.n);
    w.i(r.inner);
    w.i(descending ? 1 : 0);
    w.i(k);
    w.p(scratch.raw());
    launch(sort_rows_source(x.dtype), w, rows);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status run_argsort(RunEnv& env, const Instr& in) {
  const SortAttrs at = SortAttrs::of(in.attrs);
  const Shape& s = env.get(in.in[0]).layout.shape;
  return sort_rows(env, in, at.dim, at.descending, s.empty() ? 1 : s[at.dim]);
}

absl::Status run_topk(RunEnv& env, const Instr& in) {
  const TopkAttrs at = TopkAttrs::of(in.attrs);
  return sort_rows(env, in, at.dim, at.largest, at.k);
}

}  // namespace

SLOTH_CUDA_OP_KERNEL(kCumsum, run_cumsum);
SLOTH_CUDA_OP_KERNEL(kArgsort, run_argsort);
SLOTH_CUDA_OP_KERNEL(kTopk, run_topk);

}  // namespace sloth::cuda
