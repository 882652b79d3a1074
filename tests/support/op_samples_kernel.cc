// Sample inputs of the Kernel-category ops (core/ops.def).
#include "tests/support/op_samples_util.h"

namespace sloth::samples {

void kernel_samples(Builder& b, OpId op) {
  switch (op) {
    default: return;
  }
}

}  // namespace sloth::samples
