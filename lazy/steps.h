// How a backend walks a plan: each kernel cut into steps (a run of same-shape elementwise
// instructions, an elementwise prologue fused into a reduction, or one instruction), what each
// step reads from outside and must write to memory, and after which kernel each slot is dead.
// The rules are the same for every backend, so they live here; each backend compiles the
// steps its own way (the CPU into tile programs, CUDA into generated kernels).
#pragma once

#include <cstdint>
#include <vector>

#include "core/op_table.h"
#include "lazy/plan.h"

namespace sloth::lazy {

enum class StepKind : uint8_t {
  kElementwise,  // instrs: a run of same-shape elementwise instructions
  kFusedReduce,  // instrs: an elementwise prologue; instr: the reduction it feeds
  kReduce, kMatmul, kView, kScatter, kIndex, kFactory, kKernel,  // instr: one instruction
};
// The step kind of a single instruction of `op` (kElementwise for elementwise ops).
StepKind step_kind(OpId op);

struct PlanStep {
  StepKind kind = StepKind::kIndex;
  int32_t instr = -1;
  std::vector<int32_t> instrs;
  std::vector<int32_t> materialize;  // kElementwise/kFusedReduce: outputs needed outside
  std::vector<int32_t> reads;        // slots the step reads that it does not produce
};

struct StepPlan {
  std::vector<std::vector<PlanStep>> kernels;  // [k]: the steps of plan kernel k, in order
  std::vector<std::vector<int32_t>> release;   // [k]: slots dead after kernel k
  // [slot]: the execution position (kernels in order, each kernel's instructions in order)
  // of the last instruction reading it; -1: none. Found in the same walk as `release`.
  std::vector<int32_t> last_read;
};

// A backend's answer to "can this kernel's prologue run inside its reduction loop": the index
// in kernel.instrs of the reduction (every instruction before it is the prologue), or 0.
using FusedReduceRule = int (*)(const Plan& plan, const Kernel& kernel);

StepPlan split_steps(const Plan& plan, FusedReduceRule fused_reduce = nullptr);

}  // namespace sloth::lazy
