// Factories (full, eye, arange-like, random): one generated kernel per op and dtype.
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"
#include "core/op_attrs.h"

namespace sloth::cuda {

using lazy::Instr;

absl::Status run_factory(RunEnv& env, const Instr& in) {
  DeviceData out = env.alloc(in.shape, in.dtype);
  const int64_t n = out.numel();
  KernelSource ks = factory_source(in.op, in.dtype);
  if (ks.name.empty())
    return absl::InternalError(
        absl::StrFormat("cuda backend: %s is not a factory", op_name(in.op)));
  double a = 0, b = 0;
  int64_t i0 = 0, i1 = 0;
  switch (in.op) {
    case OpId::kFull: a = env.scalar(in.in[0]); break;
    case OpId::kEye:
      i0 = in.shape.size() > 0 ? in.shape[0] : 0;
      i1 = in.shape.size() > 1 ? in.shape[1] : i0;
      break;
    case OpId::kRandint:
      i0 = RandintAttrs::of(in.attrs).low;
      i1 = RandintAttrs::of(in.attrs).high;
      [[fallthrough]];
    default:
      a = env.scalar(in.in[0]);
      b = env.scalar(in.in[1]);
  }
  if (n > 0) {
    ParamWords w;
    w.p(out.raw());
    w.i(n);
    w.d(a);
    w.d(b);
    w.i(i0);
    w.i(i1);
    launch(ks, w, n);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace sloth::cuda
