// Fused elementwise steps: one generated grid-stride kernel per run of instructions.
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kernel_launch.h"

namespace sloth::cuda {

absl::Status run_elementwise(RunEnv& env, const ElementwiseStep& st) {
  const ElementwiseKernel& k = st.k;
  if (!k.error.empty()) return absl::InternalError(k.error);
  const int64_t n = numel(k.shape);
  std::vector<DeviceData> outs;
  for (const auto& o : k.outs) outs.push_back(env.alloc(k.shape, o.dtype));
  if (n > 0) {
    ParamWords w;
    w.i(n);
    w.i(0);  // lin, decided below
    // With every operand walked like the contiguous output the kernel skips index math.
    const Strides lin_st = contiguous_strides(k.shape);
    bool lin = true;
    std::vector<DeviceData> keep;  // converted operands live until the launch is queued
    for (const auto& e : k.exts) {
      DeviceData d = env.get(e.slot);
      if (!d.storage)
        return absl::InternalError(
            absl::StrFormat("cuda backend: slot %d is read before it is computed", e.slot));
      if (d.dtype != e.slot_dtype) {
        d = make_contiguous(env, d, e.slot_dtype);
        keep.push_back(d);
      }
      Strides s = broadcast_strides(d.layout.shape, d.layout.strides, k.shape);
      for (size_t i = 0; i < s.size(); ++i)
        if (k.shape[i] != 1 && s[i] != lin_st[i]) lin = false;
      w.p(d.raw());
      for (int64_t x : s) w.i(x);
    }
    w.w[1] = lin ? 1 : 0;
    for (const auto& o : outs) w.p(o.raw());
    for (const auto& c : k.consts) w.d(env.scalar(c.slot));
    launch(st.fn, k.src, w, n);
  }
  for (size_t o = 0; o < k.outs.size(); ++o) env.set(k.outs[o].slot, std::move(outs[o]));
  return absl::OkStatus();
}

}  // namespace sloth::cuda
