#include "core/conv_rules.h"

#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/rule_helpers.h"

namespace sloth {
namespace {

using rules::Metas;
using rules::rank;
using rules::sh;
absl::Status need_float(OpId op, const TensorMeta& m, const char* what) {
  return rules::need_floating(op, m, what);
}

std::string pair(int64_t a, int64_t b) { return absl::StrFormat("(%d, %d)", a, b); }

absl::Status check_geom(OpId op, const WindowAttrs& w) {
  if (w.geom.size() != 10)
    return invalid("%s: internal window attributes hold %d values, expected 10", op_name(op),
                   w.geom.size());
  if (w.kh() <= 0 || w.kw() <= 0 || w.dh() <= 0 || w.dw() <= 0 || w.sh() <= 0 || w.sw() <= 0)
    return invalid("%s: kernel_size %s, dilation %s and stride %s must be positive", op_name(op),
                   pair(w.kh(), w.kw()), pair(w.dh(), w.dw()), pair(w.sh(), w.sw()));
  if (w.extra_row < 0 || w.extra_row > 2)
    return invalid("%s: extra_row must be 0, 1 or 2, got %d", op_name(op), w.extra_row);
  if (w.ph() < 0 || w.pw() < 0 || w.eh() < 0 || w.ew() < 0)
    return invalid("%s: padding %s must be non-negative", op_name(op), pair(w.ph(), w.pw()));
  return absl::OkStatus();
}

}  // namespace

int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                      bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (span may be negative for too-small inputs).
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

absl::Status rule_unfold(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.size() != 1) return invalid("unfold: expects one tensor operand, got %d", in.size());
  const WindowAttrs w = WindowAttrs::of(a);
  SLOTH_RETURN_IF_ERROR(check_geom(op, w));
  SLOTH_RETURN_IF_ERROR(need_float(op, in[0], "input"));
  const Shape& x = *in[0].shape;
  if (x.size() != 3 && x.size() != 4)
    return invalid("unfold: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got %s; add a "
                   "batch dim with unsqueeze(0)",
                   sh(in[0]));
  if (w.batch_inner && x.size() != 4)
    return invalid("unfold: the [C*kh*kw, N*L] column layout takes a 4-D input, got %s", sh(in[0]));
  const bool batched = x.size() == 4;
  const int64_t c = x[x.size() - 3], h = x[x.size() - 2], wd = x.back();
  const int64_t bh = w.out_h(h), bw = w.out_w(wd);
  if (bh < 1 || bw < 1)
    return invalid("unfold: given input with spatial size %s, kernel_size=%s, dilation=%s, "
                   "padding=%s, calculated shape of the array of sliding blocks as %s, but its "
                   "components must be at least one; use a smaller kernel or more padding",
                   pair(h, wd), pair(w.kh(), w.kw()), pair(w.dh(), w.dw()), pair(w.ph(), w.pw()),
                   pair(bh, bw));
  out->shape = w.batch_inner ? Shape{c * w.kh() * w.kw() + w.extra_rows(), x[0] * bh * bw}
               : batched     ? Shape{x[0], c * w.kh() * w.kw() + w.extra_rows(), bh * bw}
                             : Shape{c * w.kh() * w.kw() + w.extra_rows(), bh * bw};
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

absl::Status rule_fold(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.size() != 1) return invalid("fold: expects one tensor operand, got %d", in.size());
  const WindowAttrs w = WindowAttrs::of(a);
  SLOTH_RETURN_IF_ERROR(check_geom(op, w));
  SLOTH_RETURN_IF_ERROR(need_float(op, in[0], "input"));
  if (w.output_size.size() != 2)
    return invalid("fold: output_size must have 2 values (H, W), got %d", w.output_size.size());
  const Shape& x = *in[0].shape;
  if (x.size() != 2 && x.size() != 3)
    return invalid("fold: expected a 2-D [C*kh*kw, L] or 3-D [N, C*kh*kw, L] input, got %s",
                   sh(in[0]));
  if (w.batch_inner && x.size() != 2)
    return invalid("fold: the [C*kh*kw, N*L] column layout takes a 2-D input, got %s", sh(in[0]));
  const bool batched = x.size() == 3;
  const int64_t ckk = x[x.size() - 2] - w.extra_rows(), kk = w.kh() * w.kw();
  int64_t l = x.back();
  const int64_t oh = w.output_size[0], ow = w.output_size[1];
  if (ckk % kk != 0)
    return invalid("fold: expected size of input's dimension %d to be divisible by the product "
                   "of kernel_size, but got input.size(%d)=%d and kernel_size=%s",
                   batched ? 1 : 0, batched ? 1 : 0, ckk, pair(w.kh(), w.kw()));
  const int64_t bh = w.out_h(oh), bw = w.out_w(ow);
  int64_t n = 1;
  if (w.batch_inner && bh > 0 && bw > 0 && l % (bh * bw) == 0) {
    n = l / (bh * bw);
    l = bh * bw;
  }
  if (oh < 1 || ow < 1 || bh < 1 || bw < 1 || l != bh * bw)
    return invalid("fold: given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, "
                   "stride=%s, expected size of input's dimension %d to match the calculated "
                   "number of sliding blocks %d * %d = %d, but got input.size(%d)=%d",
                   pair(oh, ow), pair(w.kh(), w.kw()), pair(w.dh(), w.dw()), pair(w.ph(), w.pw()),
                   pair(w.sh(), w.sw()), batched ? 2 : 1, bh, bw, bh * bw, batched ? 2 : 1, l);
  out->shape = w.batch_inner ? Shape{n, ckk / kk, oh, ow}
               : batched     ? Shape{x[0], ckk / kk, oh, ow}
                             : Shape{ckk / kk, oh, ow};
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

absl::Status rule_conv(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  const std::string_view name = op_name(op);
  const size_t s = op == OpId::kConv1d ? 1 : 2;
  const bool transposed = op == OpId::kConvTranspose2d;
  if (in.size() < 2 || in.size() > 3)
    return invalid("%s: expects (input, weight) or (input, weight, bias), got %d tensors", name,
                   in.size());
  const ConvAttrs c = ConvAttrs::of(a);
  if (c.params.size() != 4 * s)
    return invalid("%s: stride, padding, dilation and output_padding must each have %d values",
                   name, s);
  for (size_t i = 0; i < s; ++i) {
    if (c.stride(i) <= 0)
      return invalid("%s: non-positive stride %s is not supported", name,
                     shape_str(Shape(c.params.begin(), c.params.begin() + s)));
    if (c.dilation(i) <= 0)
      return invalid("%s: dilation must be positive, got %s", name,
                     shape_str(Shape(c.params.begin() + 2 * s, c.params.begin() + 3 * s)));
    if (c.padding(i) < 0)
      return invalid("%s: negative padding %s is not supported", name,
                     shape_str(Shape(c.params.begin() + s, c.params.begin() + 2 * s)));
    if (c.output_padding(i) < 0 ||
        (transposed && c.output_padding(i) >= std::max(c.stride(i), c.dilation(i))))
      return invalid("%s: output padding must be smaller than either stride or dilation, but got "
                     "output_padding %s, stride %s, dilation %s",
                     name, shape_str(Shape(c.params.begin() + 3 * s, c.params.end())),
                     shape_str(Shape(c.params.begin(), c.params.begin() + s)),
                     shape_str(Shape(c.params.begin() + 2 * s, c.params.begin() + 3 * s)));
  }
  if (c.groups <= 0) return invalid("%s: non-positive groups (%d) is not supported", name, c.groups);
  if (c.same && transposed) return invalid("%s: padding=\"same\" is not supported", name);
  if (c.same)
    for (size_t i = 0; i < s; ++i)
      if (c.stride(i) != 1)
        return invalid("%s: padding=\"same\" is not supported for strided convolutions; use "
                       "explicit padding or stride 1",
                       name);
  const TensorMeta &xm = in[0], &wm = in[1];
  SLOTH_RETURN_IF_ERROR(need_float(op, xm, "input"));
  const Shape &x = *xm.shape, &w = *wm.shape;
  if (rank(wm) != static_cast<int64_t>(s + 2))
    return invalid("%s: expected %d-D weight [%s, kernel...], got %s", name, s + 2,
                   transposed ? "in_channels, out_channels/groups" : "out_channels, in_channels/groups",
                   sh(wm));
  if (rank(xm) != static_cast<int64_t>(s + 1) && rank(xm) != static_cast<int64_t>(s + 2))
    return invalid("%s: expected %d-D (unbatched) or %d-D (batched) input to %s, but got input of "
                   "size: %s",
                   name, s + 1, s + 2, name, sh(xm));
  if (wm.dtype != xm.dtype || (in.size() == 3 && in[2].dtype != xm.dtype))
    return invalid("%s: input, weight and bias must have the same dtype, got %s and %s", name,
                   dtype_name(xm.dtype), dtype_name(wm.dtype));
  const bool batched = rank(xm) == static_cast<int64_t>(s + 2);
  const int64_t ch = x[batched ? 1 : 0];
  int64_t out_ch;
  if (!transposed) {
    if (w[0] % c.groups != 0)
      return invalid("%s: given groups=%d, expected weight to be divisible by %d at dimension 0, "
                     "but got weight of size %s instead",
                     name, c.groups, c.groups, sh(wm));
    if (ch != w[1] * c.groups)
      return invalid("%s: given groups=%d, weight of size %s, expected input%s to have %d "
                     "channels, but got %d channels instead",
                     name, c.groups, sh(wm), sh(xm), w[1] * c.groups, ch);
    out_ch = w[0];
  } else {
    if (ch != w[0])
      return invalid("%s: given transposed=1, weight of size %s, expected input%s to have %d "
                     "channels, but got %d channels instead",
                     name, sh(wm), sh(xm), w[0], ch);
    if (w[0] % c.groups != 0)
      return invalid("%s: given groups=%d, expected weight to be divisible by %d at dimension 0, "
                     "but got weight of size %s instead",
                     name, c.groups, c.groups, sh(wm));
    out_ch = w[1] * c.groups;
  }
  if (in.size() == 3 && *in[2].shape != Shape{out_ch})
    return invalid("%s: bias %s must have shape [%d] (one value per output channel)", name,
                   sh(in[2]), out_ch);
  Shape o;
  if (batched) o.push_back(x[0]);
  o.push_back(out_ch);
  const size_t off = batched ? 2 : 1;
  for (size_t i = 0; i < s; ++i) {
    const int64_t n = x[off + i], k = w[2 + i], d = c.dilation(i), st = c.stride(i);
    const int64_t p = c.same ? 0 : c.padding(i);
    int64_t size;
    if (transposed) {
      size = (n - 1) * st - 2 * p + d * (k - 1) + c.output_padding(i) + 1;
    } else if (c.same) {
      size = n;
      if (n <= 0 && numel(x) != 0) size = 0;
    } else {
      const int64_t padded = n + 2 * p, eff = d * (k - 1) + 1;
      if (padded < eff)
        return invalid("%s: calculated padded input size per channel: %s. Kernel size: %s. "
                       "Kernel size can't be greater than actual input size; pad the input or "
                       "use a smaller kernel",
                       name, shape_str(Shape(x.begin() + off, x.end())),
                       shape_str(Shape(w.begin() + 2, w.end())));
      size = (padded - eff) / st + 1;
    }
    if (size <= 0)
      return invalid("%s: given input size %s, the calculated output size is %d, which is too "
                     "small",
                     name, sh(xm), size);
    o.push_back(size);
  }
  out->shape = std::move(o);
  out->dtype = xm.dtype;
  return absl::OkStatus();
}

absl::Status rule_pool(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  const std::string_view name = op_name(op);
  if (in.size() != 1) return invalid("%s: expects one tensor operand, got %d", name, in.size());
  const PoolAttrs p = PoolAttrs::of(a);
  if (p.params.size() != 8)
    return invalid("%s: kernel_size, stride, padding and dilation must have 2 values each", name);
  SLOTH_RETURN_IF_ERROR(need_float(op, in[0], "input"));
  const Shape& x = *in[0].shape;
  if (x.size() != 3 && x.size() != 4)
    return invalid("%s: expected 3D [C, H, W] or 4D [N, C, H, W] input, got %s", name, sh(in[0]));
  Shape o(x.begin(), x.end() - 2);
  for (int i = 0; i < 2; ++i) {
    const int64_t k = p.kernel(i), st = p.stride(i), pad = p.padding(i), d = p.dilation(i);
    if (k <= 0) return invalid("%s: kernel_size must be greater than zero, got %s", name, pair(p.kernel(0), p.kernel(1)));
    if (st <= 0) return invalid("%s: stride must be greater than zero, got %s", name, pair(p.stride(0), p.stride(1)));
    if (d <= 0) return invalid("%s: dilation must be greater than zero, got %s", name, pair(p.dilation(0), p.dilation(1)));
    if (pad < 0 || pad > k / 2)
      return invalid("%s: pad should be at most half of kernel size, but got pad=%d and "
                     "kernel_size=%d; use padding <= kernel_size / 2",
                     name, pad, k);
    const int64_t size = pool_out_size(x[x.size() - 2 + i], k, pad, st, d, p.ceil_mode);
    if (size < 1)
      return invalid("%s: given input size %s, calculated output size %s is too small; use a "
                     "smaller kernel or more padding",
                     name, sh(in[0]),
                     pair(pool_out_size(x[x.size() - 2], p.kernel(0), p.padding(0), p.stride(0), p.dilation(0), p.ceil_mode),
                          pool_out_size(x.back(), p.kernel(1), p.padding(1), p.stride(1), p.dilation(1), p.ceil_mode)));
    o.push_back(size);
  }
  if (p.divisor_override < 0)
    return invalid("%s: divisor must be not zero, got %d", name, p.divisor_override);
  out->shape = std::move(o);
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

absl::Status rule_adaptive_pool(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  const std::string_view name = op_name(op);
  if (in.size() != 1) return invalid("%s: expects one tensor operand, got %d", name, in.size());
  SLOTH_RETURN_IF_ERROR(need_float(op, in[0], "input"));
  const Shape& x = *in[0].shape;
  if (x.size() != 3 && x.size() != 4)
    return invalid("%s: expected 3D [C, H, W] or 4D [N, C, H, W] input, got %s", name, sh(in[0]));
  if (a.dims.size() != 2 || a.dims[0] <= 0 || a.dims[1] <= 0)
    return invalid("%s: output_size must be 2 positive values, got %s", name, shape_str(a.dims));
  if (x[x.size() - 2] <= 0 || x.back() <= 0)
    return invalid("%s: expected input with non-zero spatial size, got %s", name, sh(in[0]));
  Shape o(x.begin(), x.end() - 2);
  o.push_back(a.dims[0]);
  o.push_back(a.dims[1]);
  out->shape = std::move(o);
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

// ---- pooling (Kernel) ----
absl::Status rule_max_pool_indices(OpId, Metas in, Attrs& a, OutputMeta* out) {
  // Reached through max_pool2d (and max_pool2d_with_indices): its errors, its name.
  SLOTH_RETURN_IF_ERROR(rule_pool(OpId::kMaxPool2d, in, a, out));
  out->dtype = DType::kInt64;
  return absl::OkStatus();
}

namespace {
// (values [N, C, *, *], idx int64 [N, C, *, *]) with the same N and C.
absl::Status check_plane_operands(OpId op, Metas in) {
  if (in.size() != 2) return invalid("%s: expects (values, indices), got %d tensors", op_name(op), in.size());
  SLOTH_RETURN_IF_ERROR(need_float(op, in[0], "input"));
  const Shape &x = *in[0].shape, &i = *in[1].shape;
  if (in[1].dtype != DType::kInt64)
    return invalid("%s: indices must be int64, got %s", op_name(op), dtype_name(in[1].dtype));
  if (x.size() != 4 || i.size() != 4 || x[0] != i[0] || x[1] != i[1])
    return invalid("%s: expected 4-D input and indices with the same N and C, got %s and %s",
                   op_name(op), sh(in[0]), sh(in[1]));
  return absl::OkStatus();
}
}  // namespace

absl::Status rule_max_pool_gather(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_plane_operands(op, in));
  out->shape = *in[1].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

absl::Status rule_max_pool_scatter(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_plane_operands(op, in));
  if (*in[0].shape != *in[1].shape)
    return invalid("%s: gradient %s and indices %s must have one shape", op_name(op), sh(in[0]),
                   sh(in[1]));
  if (a.dims.size() != 2 || a.dims[0] <= 0 || a.dims[1] <= 0)
    return invalid("%s: the input size must be 2 positive values, got %s", op_name(op),
                   shape_str(a.dims));
  const Shape& g = *in[0].shape;
  out->shape = {g[0], g[1], a.dims[0], a.dims[1]};
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

}  // namespace sloth
