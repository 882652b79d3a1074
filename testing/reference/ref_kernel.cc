// Reference kernels of the Kernel-category ops (core/ops.def): plain double loops.
#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {

absl::StatusOr<Values> eval_kernel(const Ctx& c) {
  switch (c.op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: case OpId::kFold: return eval_conv(c);
    default: return invalid("%s: no reference kernel", op_name(c.op));
  }
}

}  // namespace sloth::ref
