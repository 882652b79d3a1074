#include "core/conv_kernel_rules.h"

#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/rule_helpers.h"

namespace sloth {
namespace {

using rules::Metas;
using rules::sh;

absl::Status need_4d(OpId op, const TensorMeta& m, const char* what) {
  SLOTH_RETURN_IF_ERROR(rules::need_floating(op, m, what));
  if (m.shape->size() != 4)
    return invalid("%s: %s must be 4-D [N, C, H, W], got %s", op_name(op), what, sh(m));
  return absl::OkStatus();
}

}  // namespace

absl::Status rule_conv_kernel(OpId op, Metas in, Attrs& attrs, OutputMeta* out) {
  const std::string_view name = op_name(op);
  const WindowAttrs w = WindowAttrs::of(attrs);
  if (w.geom.size() != 10)
    return invalid("%s: internal window attributes hold %d values, expected 10", name,
                   w.geom.size());
  if (w.kh() <= 0 || w.kw() <= 0 || w.dh() <= 0 || w.dw() <= 0 || w.sh() <= 0 || w.sw() <= 0 ||
      w.ph() < 0 || w.pw() < 0 || w.eh() < 0 || w.ew() < 0 || w.extra_row != 0 || w.batch_inner)
    return invalid("%s: invalid window (kernel, dilation, stride must be positive, padding "
                   "non-negative, no extra rows)",
                   name);
  const bool fwd = op == OpId::kConvForward;
  if (fwd ? in.size() < 2 || in.size() > 3 : in.size() != 2)
    return invalid("%s: expects %s tensors, got %d", name, fwd ? "2 or 3" : "2", in.size());
  const char* names[3][2] = {{"input", "weight"}, {"grad_output", "weight"}, {"grad_output", "input"}};
  const int k = fwd ? 0 : op == OpId::kConvInputGrad ? 1 : 2;
  SLOTH_RETURN_IF_ERROR(need_4d(op, in[0], names[k][0]));
  SLOTH_RETURN_IF_ERROR(need_4d(op, in[1], names[k][1]));
  for (const TensorMeta& m : in)
    if (m.dtype != in[0].dtype)
      return invalid("%s: operands must share one dtype, got %s and %s", name,
                     dtype_name(in[0].dtype), dtype_name(m.dtype));
  const Shape& a = *in[0].shape;
  const Shape& b = *in[1].shape;
  // The image [N, C, H, W], the gradient/output [N, O, Ho, Wo] and the weight [O, C, kh, kw].
  int64_t n = a[0], c, h, wd, o;
  Shape y;
  if (k == 0) {
    c = a[1], h = a[2], wd = a[3], o = b[0];
    if (b[1] != c || b[2] != w.kh() || b[3] != w.kw())
      return invalid("%s: weight %s does not match input %s and kernel (%d, %d)", name, sh(in[1]),
                     sh(in[0]), w.kh(), w.kw());
    if (in.size() == 3 && (in[2].shape->size() != 1 || (*in[2].shape)[0] != o))
      return invalid("%s: bias must be [%d], got %s", name, o, sh(in[2]));
  } else if (k == 1) {
    if (w.output_size.size() != 2)
      return invalid("%s: output_size must hold (H, W), got %d values", name, w.output_size.size());
    o = a[1], c = b[1], h = w.output_size[0], wd = w.output_size[1];
    if (b[0] != o || b[2] != w.kh() || b[3] != w.kw())
      return invalid("%s: weight %s does not match grad_output %s and kernel (%d, %d)", name,
                     sh(in[1]), sh(in[0]), w.kh(), w.kw());
  } else {
    o = a[1], c = b[1], h = b[2], wd = b[3];
    if (b[0] != n)
      return invalid("%s: input %s and grad_output %s differ in batch size", name, sh(in[1]),
                     sh(in[0]));
  }
  const int64_t ho = w.out_h(h), wo = w.out_w(wd);
  if (ho < 1 || wo < 1)
    return invalid("%s: input of spatial size (%d, %d) is smaller than the kernel's span", name,
                   h, wd);
  if (k != 0 && (a[2] != ho || a[3] != wo))
    return invalid("%s: grad_output %s does not match the output size (%d, %d) of the window",
                   name, sh(in[0]), ho, wo);
  out->shape = k == 0 ? Shape{n, o, ho, wo} : k == 1 ? Shape{n, c, h, wd} : Shape{o, c, w.kh(), w.kw()};
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

}  // namespace sloth
