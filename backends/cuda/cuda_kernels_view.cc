// Views (zero-copy when the layout allows, else over a contiguous copy) and the
// scatters that write a view window of a copy of their base.
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_kernels.h"
#include "core/error.h"
#include "core/view_layout.h"

namespace sloth::cuda {

using lazy::Instr;

void run_view(RunEnv& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  if (in.op == OpId::kSplit || in.op == OpId::kChunk)
    throw Error(absl::StrFormat(
        "cuda backend: %s returns several tensors and must be lowered before planning", op_name(in.op)));
  PrimitiveView pv = lower_view(in.op, x.layout.shape, in.attrs);
  std::optional<Layout> l = apply_view(pv.op, pv.attrs, x.layout);
  if (l) {
    env.set(in.out, with_layout(x, std::move(*l)));
    return;
  }
  DeviceData cc = make_contiguous(env, x, x.dtype);
  l = apply_view(pv.op, pv.attrs, cc.layout);
  if (!l)
    throw Error(absl::StrFormat("cuda backend: %s cannot view %s", op_name(in.op), shape_str(x.layout.shape)));
  env.set(in.out, with_layout(cc, std::move(*l)));
}

void run_scatter(RunEnv& env, const Instr& in) {
  const std::optional<OpId> view_op = view_of_scatter(in.op);
  if (!view_op) throw Error(absl::StrFormat("cuda backend: %s is not a scatter op", op_name(in.op)));
  const OpId view = *view_op;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& src = env.get(in.in[1]);
  DeviceData out = make_contiguous(env, base, in.dtype);
  std::optional<Layout> window = apply_view(view, in.attrs, out.layout);
  if (!window)
    throw Error(absl::StrFormat("cuda backend: %s: no window in %s", op_name(in.op), shape_str(out.layout.shape)));
  copy_into(with_layout(out, std::move(*window)), src);
  env.set(in.out, std::move(out));
}

}  // namespace sloth::cuda
