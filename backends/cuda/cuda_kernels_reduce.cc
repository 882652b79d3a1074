// Reductions (sum/prod/amax/amin over dims, argmax/argmin over one dim).
#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"

namespace sloth::cuda {

using lazy::Instr;

absl::Status run_reduce(RunEnv& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  DeviceData out = env.alloc(in.shape, in.dtype);
  const bool arg = in.op == OpId::kArgmax || in.op == OpId::kArgmin;
  const std::vector<int64_t> dims = lazy::reduced_dims(in, x.layout.shape.size());
  Shape ks, rs;
  Strides kin, rin;
  const Shape& s = x.layout.shape;
  for (size_t d = 0; d < s.size(); ++d) {
    bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (red ? rs : ks).push_back(s[d]);
    (red ? rin : kin).push_back(x.layout.strides[d]);
  }
  const int64_t kn = numel(ks), rn = numel(rs);
  if (kn == 0) {
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  coalesce(ks, {&kin});
  SLOTH_RETURN_IF_ERROR(check_rank("reduction", ks.size()));
  DeviceContext& c = DeviceContext::get();
  if (arg) {
    if (rn == 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: cannot reduce over an empty dim", op_name(in.op)));
    KernelSource src = arg_reduce_source(in.op, x.dtype);
    ParamWords w;
    w.p(x.raw());
    w.p(out.raw());
    w.i(kn);
    w.i(rn);
    w.i(rin.empty() ? 0 : rin[0]);
    w.i(static_cast<int64_t>(ks.size()));
    w.arr(ks);
    w.arr(kin);
    launch(src, w, kn * 256, std::min<int64_t>(kn, 65535));
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  if (rn == 0 && (in.op == OpId::kAmax || in.op == OpId::kAmin))
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot reduce over an empty dim (no identity)", op_name(in.op)));
  coalesce(rs, {&rin});
  SLOTH_RETURN_IF_ERROR(check_rank("reduction", rs.size()));
  // Few outputs over long rows: split each row over several blocks, then merge.
  int64_t splits = 1;
  if (kn < 2 * c.sm_count && rn >= 8192)
    splits = std::clamp<int64_t>(std::min<int64_t>(rn / 4096, (4 * c.sm_count + kn - 1) / kn), 1, 1024);
  DeviceData tmp;
  if (splits > 1) tmp = env.alloc({kn * splits}, DType::kInt64);  // 8 bytes per accumulator
  KernelSource src = reduce_source(in.op, x.dtype, in.dtype);
  ParamWords w;
  w.p(x.raw());
  w.p(out.raw());
  w.p(splits > 1 ? tmp.raw() : nullptr);
  w.i(kn);
  w.i(rn);
  w.i(splits);
  w.i(static_cast<int64_t>(ks.size()));
  w.i(static_cast<int64_t>(rs.size()));
  w.arr(ks);
  w.arr(kin);
  w.arr(rs);
  w.arr(rin);
  launch(src, w, 0, std::min<int64_t>(kn * splits, static_cast<int64_t>(c.sm_count) * 32));
  if (splits > 1) {
    KernelSource m = reduce_merge_source(in.op, x.dtype, in.dtype);
    ParamWords mw;
    mw.p(tmp.raw());
    mw.p(out.raw());
    mw.i(kn);
    mw.i(splits);
    launch(m, mw, kn);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace sloth::cuda
