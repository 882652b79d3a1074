// A fusion refinement: a matmul's epilogue takes every same-shape elementwise consumer of its
// output, even values whose only reader is a later elementwise kernel. Each such value is then
// written by the GEMM kernel and read back by the later one, although the later kernel could
// compute it from the GEMM's result, which is in memory anyway. Autograd and optimizers make
// this pattern for every weight: dW feeds the gradient's own output and, in the same step,
// g*(1-beta1) and g*g*(1-beta2) of Adam's update, so the W-sized moments went through memory
// twice more than needed. The pass moves such epilogue instructions into their reader.
#pragma once

#include "lazy/plan.h"

namespace sloth::lazy {

// Moves epilogue instructions of matmul kernels into the one elementwise kernel that reads
// them, where that saves memory traffic (see above); returns how many it moved. Run after
// fusion (it recomputes Kernel::outputs) and before liveness.
int sink_matmul_epilogues(Plan& plan);

}  // namespace sloth::lazy
