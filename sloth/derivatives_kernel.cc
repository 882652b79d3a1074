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
  // The scale is applied to dS inside its elementwise step, not to each product afterwards
  // (two fewer passes over [..., L, E]).
  const Tensor dss = (a.needs[0] || a.needs[1]) ? ds * at.scale : Tensor();
  if (a.needs[0]) r[0] = ptr(matmul(dss, k));
  if (a.needs[1]) r[1] = ptr(matmul(dss.transpose(-1, -2), q));
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

// ---- convolution kernels ----
// conv_forward is bilinear in (x, w); its two gradient kernels are the adjoints of its two
// linear maps, so each op's derivative is written with the three ops (and is differentiable
// again): y = conv(x, w): dx = input_grad(dy, w), dw = weight_grad(dy, x);
// dx = input_grad(dy, w): d/ddy = conv(u, w), d/dw = weight_grad(dy, u);
// dw = weight_grad(dy, x): d/ddy = conv(x, u), d/dx = input_grad(dy, u).
Tensor conv_input_grad_op(const Tensor& dy, const Tensor& w, WindowAttrs a, const Shape& img) {
  a.output_size = {img[2], img[3]};
  return call_op(OpId::kConvInputGrad, {dy, w}, a);
}
Tensor conv_weight_grad_op(const Tensor& dy, const Tensor& x, WindowAttrs a) {
  a.output_size.clear();
  return call_op(OpId::kConvWeightGrad, {dy, x}, a);
}
Tensor conv_forward_op(const Tensor& x, const Tensor& w, WindowAttrs a) {
  a.output_size.clear();
  return call_op(OpId::kConvForward, {x, w}, a);
}
Grads conv_forward_grad(const FormulaArgs& a) {
  const Tensor g(a.grad);
  const WindowAttrs w = WindowAttrs::of(a.attrs);
  Grads r(a.inputs.size());
  if (a.needs[0]) r[0] = conv_input_grad_op(g, Tensor(a.inputs[1]), w, a.input_info[0].shape).impl();
  if (a.needs[1]) r[1] = conv_weight_grad_op(g, Tensor(a.inputs[0]), w).impl();
  // Over the contiguous H*W first, then the batch: one reduction over {0, 2, 3} walks the
  // gradient with a stride and took longer than the convolution's GEMMs (layer 1 of the CNN).
  if (a.inputs.size() > 2 && a.needs[2]) r[2] = sum(sum(g, {2, 3}), {0}).impl();
  return r;
}
Grads conv_input_grad_grad(const FormulaArgs& a) {
  const Tensor u(a.grad);
  const WindowAttrs w = WindowAttrs::of(a.attrs);
  Grads r(2);
  if (a.needs[0]) r[0] = conv_forward_op(u, Tensor(a.inputs[1]), w).impl();
  if (a.needs[1]) r[1] = conv_weight_grad_op(Tensor(a.inputs[0]), u, w).impl();
  return r;
}
Grads conv_weight_grad_grad(const FormulaArgs& a) {
  const Tensor u(a.grad);
  const WindowAttrs w = WindowAttrs::of(a.attrs);
  Grads r(2);
  if (a.needs[0]) r[0] = conv_forward_op(Tensor(a.inputs[1]), u, w).impl();
  if (a.needs[1]) r[1] = conv_input_grad_op(Tensor(a.inputs[0]), u, w, a.input_info[1].shape).impl();
  return r;
}

// ---- pooling (Kernel) ----
// max_pool2d's plane-wise gather and scatter are each other's adjoint (linear in the values;
// the indices get no gradient).
Grads max_pool_gather_grad(const FormulaArgs& a) {
  const Shape& xs = a.input_info[0].shape;
  Attrs hw;
  hw.dims = {xs[2], xs[3]};
  return {call_op(OpId::kMaxPool2dScatter, {Tensor(a.grad), Tensor(a.inputs[1])}, hw).impl(),
          nullptr};
}
Grads max_pool_scatter_grad(const FormulaArgs& a) {
  return {call_op(OpId::kMaxPool2dGather, {Tensor(a.grad), Tensor(a.inputs[1])}).impl(), nullptr};
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
    // ---- convolution kernels ----
    case OpId::kConvForward: return conv_forward_grad;
    case OpId::kConvInputGrad: return conv_input_grad_grad;
    case OpId::kConvWeightGrad: return conv_weight_grad_grad;
    // ---- pooling (Kernel) ----
    case OpId::kMaxPool2dGather: return max_pool_gather_grad;
    case OpId::kMaxPool2dScatter: return max_pool_scatter_grad;
    // ---- distributed ----
    case OpId::kAllReduce: return all_reduce_grad;
    case OpId::kBroadcast: return broadcast_grad;
    case OpId::kAllGather: return all_gather_grad;
    case OpId::kReduceScatter: return reduce_scatter_grad;
    default: return nullptr;
  }
}

}  // namespace sloth::internal
