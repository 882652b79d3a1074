// Derivatives of the Kernel-category ops (core/ops.def), written with sloth ops so that they
// are differentiable again. derivatives.cc registers them through kernel_op_formula.
#include "core/op_attrs.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

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

}  // namespace

autograd::Formula kernel_op_formula(OpId op) {
  switch (op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: return unfold_grad;
    case OpId::kFold: return fold_grad;
    default: return nullptr;
  }
}

}  // namespace sloth::internal
