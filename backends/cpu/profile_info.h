// What the profiler shows for a CPU step: its name (the op or the fused ops), output shapes,
// dtype, bytes moved and FLOPs, worked out from the plan once per step (not per run).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "lazy/plan.h"
#include "lazy/profiler.h"
#include "lazy/steps.h"

namespace sloth::cpu {

// `instr`: the step's own instruction (-1 for a pure elementwise run), `instrs` its fused run
// (an elementwise program, or a reduction's prologue), `reads` the slots it reads from outside,
// `materialized` the slots some other step (or the caller) reads: only those are written out.
std::shared_ptr<const lazy::profiling::KernelInfo> describe_step(
    const lazy::Plan& plan, lazy::StepKind kind, int32_t instr, const std::vector<int32_t>& instrs,
    const std::vector<int32_t>& reads, const absl::flat_hash_set<int32_t>& materialized);

// A row group: its steps' names joined, their bytes and FLOPs summed.
std::shared_ptr<const lazy::profiling::KernelInfo> describe_group(
    const std::vector<std::shared_ptr<const lazy::profiling::KernelInfo>>& steps);

}  // namespace sloth::cpu
