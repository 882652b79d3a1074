// Views, scatters, concatenation, clone and the index ops: the shared structural rules
// (lazy/structural.h) over the CUDA backend's copy kernel, with the index primitives of
// cuda_kernels_index.cc.
#include "backends/cuda/cuda_kernels.h"
#include "lazy/structural.h"

namespace sloth::cuda {

using lazy::Instr;

absl::Status run_structural(RunEnv& env, const Instr& in) {
  lazy::StructuralOf<RunEnv, make_contiguous, cuda::copy_into> s(env, "cuda backend",
                                                                 kIndexPrimitives);
  return lazy::run_structural(s, in);
}

}  // namespace sloth::cuda
