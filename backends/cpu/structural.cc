// Views, scatters, concatenation, clone and the index ops: the shared structural rules
// (lazy/structural.h) over the CPU's strided copies, with the index primitives of index.cc.
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "lazy/structural.h"

namespace sloth::cpu {

DeviceData make_contiguous(Env& env, const DeviceData& x, DType dtype) {
  DeviceData out = env.alloc(x.layout.shape, dtype);
  copy_strided(out.raw(), dtype, out.layout.strides, x.raw(), x.dtype, x.layout.strides,
               x.layout.shape);
  return out;
}

absl::Status run_structural(Env& env, const Instr& in) {
  lazy::StructuralOf<Env, make_contiguous, cpu::copy_into> s(env, "cpu backend",
                                                             kIndexPrimitives);
  return lazy::run_structural(s, in);
}

}  // namespace sloth::cpu
