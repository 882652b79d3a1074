// Derivatives of the Kernel-category ops (core/ops.def), written with sloth ops so that they
// are differentiable again. derivatives.cc registers them through kernel_op_formula.
#include "core/op_attrs.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"
#include "sloth/view_autograd.h"

namespace sloth::internal {
namespace {

using autograd::FormulaArgs;
using Grads = std::vector<lazy::TensorImplPtr>;

// ---- convolution and pooling ----
// Unfold and Fold are linear and each other's adjoint: unfold's gradient folds the columns
// back (summing overlaps; padding, whatever its fill value, gets none), fold's gradient
// unfolds with zero padding. The same window geometry (including the extra bottom/right
// padding) serves both.
Grads unfold_grad(const FormulaArgs& a) {
  Tensor g(a.grad);
  WindowAttrs w = WindowAttrs::of(a.attrs);
  const Shape& xs = a.input_info[0].shape;
  w.output_size = {xs[xs.size() - 2], xs.back()};
  w.pad_value = 0;
  return {call_op(OpId::kFold, {g}, w).impl()};
}
Grads fold_grad(const FormulaArgs& a) {
  Tensor g(a.grad);
  WindowAttrs w = WindowAttrs::of(a.attrs);
  w.output_size.clear();
  w.pad_value = 0;
  if (w.extra_row) w.extra_row = WindowAttrs::kZerosRow;  // fold ignores that row: no gradient
  return {call_op(OpId::kUnfold, {g}, w).impl()};
}

// ---- attention and sequence ops ----
lazy::TensorImplPtr ptr(const Tensor& t) { return t.defined() ? t.impl() : nullptr; }

// The fused attention's derivative recomputes the probabilities P (nothing of size [L, S]
// is kept from the forward pass); with dS = P * (dP - rowsum(dP * P)):
// dq = dS k * scale, dk = dS^T q * scale, dv = P^T g, and a float mask gets dS.
Grads sdpa_grad(const FormulaArgs& a) {
  const Tensor q(a.inputs[0]), k(a.inputs[1]), v(a.inputs[2]), g(a.grad);
  const Tensor mask = a.inputs.size() > 3 ? Tensor(a.inputs[3]) : Tensor();
  const SdpaAttrs at = SdpaAttrs::of(a.attrs);
  const Tensor p = softmax(attention_scores(q, k, mask, at.scale, at.is_causal), -1);
  Grads r(a.inputs.size());
  if (a.needs[2]) r[2] = ptr(matmul(p.transpose(-1, -2), g));
  const bool mask_grad = a.inputs.size() > 3 && a.needs[3];
  if (!a.needs[0] && !a.needs[1] && !mask_grad) return r;
  const Tensor dp = matmul(g, v.transpose(-1, -2));
  const Tensor ds = p * (dp - sum(dp * p, {-1}, true));
  if (a.needs[0]) r[0] = ptr(matmul(ds, k) * at.scale);
  if (a.needs[1]) r[1] = ptr(matmul(ds.transpose(-1, -2), q) * at.scale);
  if (mask_grad) r[3] = ptr(sum_to(ds, a.input_info[3].shape));
  return r;
}

// The gradient of a running sum is the reversed running sum: sum - cumsum + g.
Grads cumsum_grad(const FormulaArgs& a) {
  const Tensor g(a.grad);
  const int64_t dim = DimAttrs::of(a.attrs).dim;
  if (g.dim() == 0) return {ptr(g)};
  return {ptr(sum(g, {dim}, true) - cumsum(g, dim) + g)};
}

// ---- distributed ----
// The collectives are linear in each rank's input (kSum, kAvg), so each gradient is the
// adjoint collective of the output's gradient, issued on every rank (a collective must be
// reached by all of them): all_reduce <-> all_reduce, all_gather <-> reduce_scatter(kSum),
// broadcast -> the sum of every rank's gradient, kept on the root. kMax/kMin are not
// differentiated (as torch.distributed.nn); their rows' formula throws.
Tensor collective(OpId op, const Tensor& g, CollectiveAttrs c) { return call_op(op, {g}, c); }
void need_linear(OpId op, const CollectiveAttrs& c) {
  if (c.reduce == CollectiveAttrs::kMax || c.reduce == CollectiveAttrs::kMin)
    throw Error(std::string(op_name(op)) +
                ": ReduceOp::kMax and kMin have no derivative; all_reduce a detached tensor, or "
                "use kSum / kAvg");
}
Grads all_reduce_grad(const FormulaArgs& a) {
  const CollectiveAttrs c = CollectiveAttrs::of(a.attrs);
  need_linear(a.op, c);
  return {collective(OpId::kAllReduce, Tensor(a.grad), c).impl()};
}
Grads broadcast_grad(const FormulaArgs& a) {
  CollectiveAttrs c = CollectiveAttrs::of(a.attrs);
  c.reduce = CollectiveAttrs::kSum;
  const Tensor s = collective(OpId::kAllReduce, Tensor(a.grad), c);
  return {(c.rank == c.root ? s : s * 0).impl()};
}
Grads all_gather_grad(const FormulaArgs& a) {
  CollectiveAttrs c = CollectiveAttrs::of(a.attrs);
  c.reduce = CollectiveAttrs::kSum;
  Tensor g(a.grad);
  const Shape& xs = a.input_info[0].shape;
  if (xs.empty()) return {collective(OpId::kReduceScatter, g, c).reshape({}).impl()};
  return {collective(OpId::kReduceScatter, g, c).impl()};
}
Grads reduce_scatter_grad(const FormulaArgs& a) {
  const CollectiveAttrs c = CollectiveAttrs::of(a.attrs);
  need_linear(a.op, c);
  const Tensor g = collective(OpId::kAllGather, Tensor(a.grad), c);
  return {(c.reduce == CollectiveAttrs::kAvg ? g / static_cast<double>(c.world) : g).impl()};
}

}  // namespace

autograd::Formula kernel_op_formula(OpId op) {
  switch (op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: return unfold_grad;
    case OpId::kFold: return fold_grad;
    // ---- attention and sequence ops ----
    case OpId::kSdpa: return sdpa_grad;
    case OpId::kCumsum: return cumsum_grad;
    // ---- distributed ----
    case OpId::kAllReduce: return all_reduce_grad;
    case OpId::kBroadcast: return broadcast_grad;
    case OpId::kAllGather: return all_gather_grad;
    case OpId::kReduceScatter: return reduce_scatter_grad;
    default: return nullptr;
  }
}

}  // namespace sloth::internal
