// Which reduce kernels the CPU backend runs as one fused tile program (the elementwise
// prologue computed inside the reduction loop) rather than step by step: a rule over the
// plan, passed to lazy::split_steps when an executable is compiled.
#pragma once

#include "lazy/plan.h"

namespace sloth::cpu {

// Index in kern.instrs of a reduction whose elementwise prologue (every instruction before
// it, all over the reduction's input shape, computing its operand) can run inside the
// reduction loop; 0 when the kernel takes the unfused path. The reduced dims must be the
// trailing ones so that each output reduces one contiguous stretch of the row-major order.
int fusable_reduce(const lazy::Plan& plan, const lazy::Kernel& kern);

}  // namespace sloth::cpu
