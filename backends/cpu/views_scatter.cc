// Views (zero-copy: a new layout over the same Storage) and their inverses, the scatter ops
// (a copy of base with the view's window overwritten). Both use apply_view from
// core/view_layout.h, so a window here is exactly the view the shape rule described.
#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "core/view_layout.h"

namespace sloth::cpu {

DeviceData make_contiguous(Env& env, const DeviceData& x, DType dtype) {
  DeviceData out = env.alloc(x.layout.shape, dtype);
  copy_strided(out.raw(), dtype, out.layout.strides, x.raw(), x.dtype, x.layout.strides,
               x.layout.shape);
  return out;
}

absl::Status run_view(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  if (in.op == OpId::kSplit || in.op == OpId::kChunk)
    return absl::InternalError(absl::StrFormat(
        "cpu backend: %s returns several tensors and must be lowered before planning",
        op_name(in.op)));
  PrimitiveView pv = lower_view(in.op, x.layout.shape, in.attrs);
  std::optional<Layout> l = apply_view(pv.op, pv.attrs, x.layout);
  if (l) {
    env.set(in.out, with_layout(x, std::move(*l)));
    return absl::OkStatus();
  }
  // No strides express this view of x's layout: view a contiguous copy instead.
  DeviceData c = make_contiguous(env, x, x.dtype);
  l = apply_view(pv.op, pv.attrs, c.layout);
  if (!l)
    return absl::InternalError(absl::StrFormat("cpu backend: %s cannot view %s", op_name(in.op),
                                               shape_str(x.layout.shape)));
  env.set(in.out, with_layout(c, std::move(*l)));
  return absl::OkStatus();
}

absl::Status run_scatter(Env& env, const Instr& in) {
  const std::optional<OpId> view_op = view_of_scatter(in.op);
  if (!view_op)
    return absl::InternalError(
        absl::StrFormat("cpu backend: %s is not a scatter op", op_name(in.op)));
  const OpId view = *view_op;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& src = env.get(in.in[1]);
  DeviceData out = make_contiguous(env, base, in.dtype);
  std::optional<Layout> window = apply_view(view, in.attrs, out.layout);
  if (!window)
    return absl::InternalError(
        absl::StrFormat("cpu backend: %s: no window in %s", op_name(in.op),
                        shape_str(out.layout.shape)));
  copy_into(with_layout(out, std::move(*window)), src);
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace sloth::cpu
