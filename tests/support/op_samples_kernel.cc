// Sample inputs of the Kernel-category ops (core/ops.def).
#include "tests/support/op_samples_util.h"

namespace sloth::samples {

void kernel_samples(Builder& b, OpId op) {
  switch (op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: case OpId::kFold: conv_samples(b, op); return;
    default: return;
  }
}

}  // namespace sloth::samples
