// Derivatives of the Kernel-category ops (core/ops.def), written with sloth ops so that they
// are differentiable again. derivatives.cc registers them through kernel_op_formula.
#include "core/op_attrs.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth::internal {
namespace {

using autograd::FormulaArgs;
using Grads = std::vector<lazy::TensorImplPtr>;

}  // namespace

autograd::Formula kernel_op_formula(OpId op) {
  switch (op) {
    default: return nullptr;
  }
}

}  // namespace sloth::internal
