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

// Errors of a kernel (a bad index in the data, an instruction it cannot run) come back as a
// Status, as in the CPU backend. Failures of the CUDA runtime itself (SLOTH_CU, SLOTH_CUBLAS,
// NVRTC, a kernel over kMaxDims in a copy helper) throw sloth::Error from below the kernels;
// CudaExecutable::run turns both into the run's Status.
absl::Status run_elementwise(RunEnv& env, const ElementwiseStep& st);  // cuda_kernels_elementwise.cc
absl::Status run_reduce(RunEnv& env, const lazy::Instr& in);           // cuda_kernels_reduce.cc
absl::Status run_matmul(RunEnv& env, const lazy::Instr& in);           // cuda_kernels_matmul.cc
// View, Scatter, Index and Shape categories: lazy/structural.h's rules (cuda_kernels_structural.cc)
// with the index kernels of cuda_kernels_index.cc.
absl::Status run_structural(RunEnv& env, const lazy::Instr& in);
extern const lazy::IndexKernels<RunEnv> kIndexKernels;
absl::Status run_factory(RunEnv& env, const lazy::Instr& in);          // cuda_kernels_factory.cc

}  // namespace sloth::cuda
