// The launch code of each kernel family: each run_* reads its operands from the run's slots,
// allocates its output and queues the kernels (generated, cuBLAS or int_matmul) on the
// stream. One file per family: cuda_kernels_<family>.cc.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"

#include "backends/cuda/codegen.h"
#include "backends/cuda/run_env.h"
#include "lazy/plan.h"
#include "lazy/structural.h"

namespace sloth::cuda {

// A run of fused elementwise instructions; `fn` is compiled when the plan is compiled, so
// a replay launches without touching NVRTC.
struct ElementwiseStep {
  ElementwiseKernel k;
  cudaKernel_t fn = nullptr;
};

// Every kernel returns its errors as a Status, as in the CPU backend: a bad index in the
// data, an instruction it cannot run, a failed CUDA or cuBLAS call (SLOTH_CU_OK). The shared
// runtime helpers below them (allocation, copies, fills, launches, NVRTC) have no Status to
// return and throw sloth::Error; CudaExecutable::run turns those into the run's Status too.
// One file per family: cuda_kernels_elementwise.cc, _reduce.cc, _matmul.cc, _factory.cc.
absl::Status run_elementwise(RunEnv& env, const ElementwiseStep& st);
absl::Status run_reduce(RunEnv& env, const lazy::Instr& in);
absl::Status run_matmul(RunEnv& env, const lazy::Instr& in);
absl::Status run_factory(RunEnv& env, const lazy::Instr& in);
// View, Scatter, Index and Shape categories: lazy/structural.h's rules
// (cuda_kernels_structural.cc) with the index primitives of cuda_kernels_index.cc.
absl::Status run_structural(RunEnv& env, const lazy::Instr& in);
extern const lazy::IndexPrimitives<RunEnv> kIndexPrimitives;

}  // namespace sloth::cuda
