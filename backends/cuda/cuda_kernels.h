// The launch code of each kernel family: each run_* reads its operands from the run's slots,
// allocates its output and queues the kernels (generated, cuBLAS or int_matmul) on the
// stream. One file per family: cuda_kernels_<family>.cc.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/codegen.h"
#include "backends/cuda/run_env.h"
#include "lazy/plan.h"

namespace sloth::cuda {

// A run of fused elementwise instructions; `fn` is compiled when the plan is compiled, so
// a replay launches without touching NVRTC.
struct ElementwiseStep {
  ElementwiseKernel k;
  cudaKernel_t fn = nullptr;
};

void run_elementwise(RunEnv& env, const ElementwiseStep& st);  // cuda_kernels_elementwise.cc
void run_reduce(RunEnv& env, const lazy::Instr& in);           // cuda_kernels_reduce.cc
void run_matmul(RunEnv& env, const lazy::Instr& in);           // cuda_kernels_matmul.cc
void run_view(RunEnv& env, const lazy::Instr& in);             // cuda_kernels_view.cc
void run_scatter(RunEnv& env, const lazy::Instr& in);          // cuda_kernels_view.cc
void run_index(RunEnv& env, const lazy::Instr& in);            // cuda_kernels_index.cc
void run_factory(RunEnv& env, const lazy::Instr& in);          // cuda_kernels_factory.cc

}  // namespace sloth::cuda
