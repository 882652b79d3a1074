// Views, scatters, cat and clone: the shared structural rules (lazy/structural.h) over the
// CUDA backend's copy kernel.
#include "backends/cuda/cuda_kernels.h"
#include "lazy/structural.h"

namespace sloth::cuda {

using lazy::Instr;

namespace {

using Structural = lazy::StructuralOf<RunEnv, make_contiguous, cuda::copy_into>;

}  // namespace

absl::Status run_view(RunEnv& env, const Instr& in) {
  Structural s(env, "cuda backend");
  return lazy::run_view(s, in);
}

absl::Status run_scatter(RunEnv& env, const Instr& in) {
  Structural s(env, "cuda backend");
  return lazy::run_scatter(s, in);
}

absl::Status run_shape_op(RunEnv& env, const Instr& in) {
  Structural s(env, "cuda backend");
  return lazy::run_shape_op(s, in);
}

}  // namespace sloth::cuda
