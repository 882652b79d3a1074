// Views, scatters, cat and clone: the shared structural rules (lazy/structural.h) over the
// CPU's strided copies.
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

namespace {

using Structural = lazy::StructuralOf<Env, make_contiguous, cpu::copy_into>;

}  // namespace

absl::Status run_view(Env& env, const Instr& in) {
  Structural s(env, "cpu backend");
  return lazy::run_view(s, in);
}

absl::Status run_scatter(Env& env, const Instr& in) {
  Structural s(env, "cpu backend");
  return lazy::run_scatter(s, in);
}

absl::Status run_shape_op(Env& env, const Instr& in) {
  Structural s(env, "cpu backend");
  return lazy::run_shape_op(s, in);
}

}  // namespace sloth::cpu
