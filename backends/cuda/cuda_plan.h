// Compiling a Plan into steps: each run of same-shape elementwise instructions becomes one
// fused kernel, every other instruction one step of its kernel family. Needs no GPU (the
// fused sources are generated, not compiled, here).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "lazy/plan.h"
#include "lazy/steps.h"

namespace sloth::cuda {

using lazy::StepKind;  // the step rules are shared with the CPU backend (lazy/steps.h)

struct Step {
  StepKind kind;
  int32_t instr = -1;                  // the instruction (all kinds but kElementwise)
  std::unique_ptr<ElementwiseStep> ew;  // the fused kernel (kElementwise)
  std::vector<int32_t> reads;          // slots the step reads that it does not produce
};

// Splits a plan's kernels into steps ((*steps)[k]: the steps of plan kernel k) and computes
// when each slot can be released ((*release)[k]: slots dead after kernel k), by
// lazy::split_steps.
void build_steps(const lazy::Plan& plan, std::vector<std::vector<Step>>* steps,
                 std::vector<std::vector<int32_t>>* release);

}  // namespace sloth::cuda
