// Fusion: groups a Plan's instructions into kernels (Plan::kernels), XLA-style: every decision
// that says "no" carries a reason (FusionDecision), printed with SLOTH_LOG=fusion.
//
// Rules (DESIGN.md, "Scheduler, fusion, plans"):
//  - elementwise instructions over the same loop shape form one kElementwise kernel; operands
//    of smaller shapes are broadcast by indexing (they are read, never copied);
//  - a reduction absorbs the elementwise group that produces its operand (its prologue, over
//    the reduction's input shape) and then elementwise consumers of its output shape (its
//    epilogue); one reduction per kernel;
//  - a matmul takes elementwise consumers of its output shape (bias, activation) as an
//    epilogue; its operands are always materialized (BLAS reads memory);
//  - a kernel breaks at matmul inputs, at a value feeding an instruction of a different loop
//    shape (notably a reduction's result broadcast back over the reduced dims), at views and
//    at every other op (index, scatter, concatenation, factories: one kernel each).
// Nothing is ever computed twice: a value needed outside its kernel (another kernel reads it,
// or it is a graph output) is listed in Kernel::outputs and written to memory by the kernel
// that computes it, while its in-kernel consumers still read it from registers.
//
// Kernels are ordered by creation. An instruction joins the producer group with the highest
// index (if compatible), so every operand of every member comes from an earlier kernel or
// from the kernel itself: running kernels in list order is always valid.
#pragma once

#include <string>
#include <vector>

#include "lazy/plan.h"

namespace sloth::lazy {

struct FusionDecision {
  bool ok = true;
  std::string reason;  // why not, when !ok
  static FusionDecision yes() { return {}; }
  static FusionDecision no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

// Replaces p.kernels with fused kernels (and their outputs). Appends one line per "no"
// decision to `reasons` when it is not null. Does not touch p.free_after.
// With outputs false, Kernel::outputs is left to a later compute_kernel_outputs.
void fuse_kernels(Plan& p, std::vector<std::string>* reasons = nullptr, bool outputs = true);

// One kernel per instruction (SLOTH_FUSION=0).
void unfused_kernels(Plan& p);

// Fills Kernel::outputs: every slot a kernel computes that is a graph output or is read by
// another kernel. Kernels of kind kView/kOther write all their results. With `liveness`, the
// same walk fills p.free_after (per kernel: the value slots, not graph outputs, whose last
// reader it is).
void compute_kernel_outputs(Plan& p, bool liveness = false);

}  // namespace sloth::lazy
