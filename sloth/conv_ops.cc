// Convolution and pooling: the public functions (LibTorch's signatures) and the
// decompositions of the Conv/Pool composites (core/ops.def). conv2d (and conv1d through it)
// without groups is one ConvForward kernel, conv_transpose2d without groups one
// ConvInputGrad (backends/cpu/conv.cc: per-sample columns in a cache-resident buffer); grouped
// and pointwise convolutions and the pooling ops are written with Unfold/Fold (im2col/col2im,
// one kernel each) plus matmul and reductions, so autograd differentiates through the parts.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "core/conv_rules.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth {
namespace {

using In = absl::Span<const Tensor>;

// ---- window geometry ----------------------------------------------------------------------

WindowAttrs window(int64_t kh, int64_t kw, int64_t dh, int64_t dw, int64_t ph, int64_t pw,
                   int64_t sh, int64_t sw, int64_t eh = 0, int64_t ew = 0, double pad = 0) {
  WindowAttrs a;
  a.geom = {kh, kw, dh, dw, ph, pw, sh, sw, eh, ew};
  a.pad_value = pad;
  return a;
}

Tensor unfold_op(const Tensor& x, const WindowAttrs& w) { return call_op(OpId::kUnfold, {x}, w); }
Tensor fold_op(const Tensor& x, WindowAttrs w, int64_t h, int64_t wd) {
  w.output_size = {h, wd};
  return call_op(OpId::kFold, {x}, w);
}

// ---- convolution ---------------------------------------------------------------------------

Tensor conv2d_impl(In in, const Attrs& attrs) {
  const ConvAttrs a = ConvAttrs::of(attrs);
  const bool batched = in[0].dim() == 4;
  Tensor x = batched ? in[0] : in[0].unsqueeze(0);
  const Tensor& w = in[1];
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t o = w.size(0), kh = w.size(2), kw = w.size(3), g = a.groups;
  int64_t ph = a.padding(0), pw = a.padding(1), eh = 0, ew = 0;
  if (a.same) {  // ATen: total padding d * (k - 1), the odd one on the bottom/right
    const int64_t th = a.dilation(0) * (kh - 1), tw = a.dilation(1) * (kw - 1);
    ph = th / 2, pw = tw / 2, eh = th - 2 * ph, ew = tw - 2 * pw;
  }
  const WindowAttrs win = window(kh, kw, a.dilation(0), a.dilation(1), ph, pw, a.stride(0),
                                 a.stride(1), eh, ew);
  const int64_t ho = win.out_h(h), wo = win.out_w(wd), l = ho * wo;
  const int64_t ckk = c / g * kh * kw;
  // A 1x1 kernel over the whole input needs no columns: x is [N, C, H*W] already.
  const bool pointwise = kh == 1 && kw == 1 && ph == 0 && pw == 0 && eh == 0 && ew == 0 &&
                         a.stride(0) == 1 && a.stride(1) == 1;
  if (g == 1 && !pointwise) {
    // One dedicated kernel (backends/cpu/conv.cc): per sample, im2col into a cache-resident
    // buffer, one GEMM and the bias; its gradients are kernels of the same kind.
    std::vector<Tensor> args{x, w};
    if (in.size() > 2) args.push_back(in[2]);
    Tensor y = call_op(OpId::kConvForward, args, win);
    return batched ? y : y.squeeze(0);
  }
  Tensor cols = pointwise ? x.reshape({n, c, h * wd}) : unfold_op(x, win);  // [N, C*kk, L]
  Tensor y;
  if (g == 1) {
    y = matmul(w.reshape({o, ckk}), cols);  // [N, O, L]
  } else {
    y = matmul(w.reshape({g, o / g, ckk}), cols.reshape({n, g, ckk, l})).reshape({n, o, l});
  }
  if (in.size() > 2) y = y + in[2].reshape({o, 1});
  y = y.reshape({n, o, ho, wo});
  return batched ? y : y.squeeze(0);
}

Tensor conv1d_impl(In in, const Attrs& attrs) {
  const ConvAttrs a = ConvAttrs::of(attrs);
  const int64_t sd = in[0].dim() - 1;  // where the unit height goes: before the length
  ConvAttrs c2{.params = {1, a.stride(0), 0, a.padding(0), 1, a.dilation(0), 0, 0},
               .groups = a.groups,
               .same = a.same};
  std::vector<Tensor> args{in[0].unsqueeze(sd), in[1].unsqueeze(2)};
  if (in.size() > 2) args.push_back(in[2]);
  return call_op(OpId::kConv2d, args, c2).squeeze(sd);
}

Tensor conv_transpose2d_impl(In in, const Attrs& attrs) {
  const ConvAttrs a = ConvAttrs::of(attrs);
  const bool batched = in[0].dim() == 4;
  Tensor x = batched ? in[0] : in[0].unsqueeze(0);
  const Tensor& w = in[1];  // [C, O/g, kh, kw]
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t g = a.groups, og = w.size(1), kh = w.size(2), kw = w.size(3), o = og * g;
  const int64_t kk = kh * kw, cg = c / g;
  // The adjoint of conv2d's input map: columns W^T x, folded back (overlaps sum).
  const WindowAttrs win0 = window(kh, kw, a.dilation(0), a.dilation(1), a.padding(0),
                                  a.padding(1), a.stride(0), a.stride(1));
  const int64_t oph = a.output_padding(0), opw = a.output_padding(1);
  if (g == 1 && oph < a.stride(0) && opw < a.stride(1)) {
    // conv_transpose2d is conv2d's input gradient with the weight [C, O, kh, kw] read as a
    // conv weight [O' = C, C' = O, kh, kw]: the same dedicated kernel (backends/cpu/conv.cc),
    // and its gradients are the conv kernels too.
    const int64_t ho = (h - 1) * a.stride(0) - 2 * a.padding(0) + a.dilation(0) * (kh - 1) + 1 + oph;
    const int64_t wo = (wd - 1) * a.stride(1) - 2 * a.padding(1) + a.dilation(1) * (kw - 1) + 1 + opw;
    WindowAttrs win = win0;
    win.output_size = {ho, wo};
    Tensor y = call_op(OpId::kConvInputGrad, {x, w}, win);
    if (in.size() > 2) y = y + in[2].reshape({o, 1, 1});
    return batched ? y : y.squeeze(0);
  }
  Tensor cols;
  if (g == 1) {
    cols = matmul(w.reshape({c, og * kk}).t(), x.reshape({n, c, h * wd}));  // [N, O*kk, HW]
  } else {
    cols = matmul(w.reshape({g, cg, og * kk}).transpose(1, 2), x.reshape({n, g, cg, h * wd}))
               .reshape({n, o * kk, h * wd});
  }
  const WindowAttrs& win = win0;
  const int64_t ho = (h - 1) * a.stride(0) - 2 * a.padding(0) + a.dilation(0) * (kh - 1) + 1;
  const int64_t wo = (wd - 1) * a.stride(1) - 2 * a.padding(1) + a.dilation(1) * (kw - 1) + 1;
  Tensor y;
  if (oph < a.stride(0) && opw < a.stride(1)) {
    // The output padding rows/cols still hold the same number of blocks: fold straight in.
    y = fold_op(cols, win, ho + oph, wo + opw);
  } else {
    // output_padding >= stride (allowed when dilation is larger): the extra rows/cols lie past
    // every window and stay zero.
    y = fold_op(cols, win, ho, wo);
    auto opts = TensorOptions().dtype(y.dtype()).device(y.device());
    if (oph > 0) y = cat({y, zeros({n, o, oph, wo}, opts)}, 2);
    if (opw > 0) y = cat({y, zeros({n, o, ho + oph, opw}, opts)}, 3);
  }
  if (in.size() > 2) y = y + in[2].reshape({o, 1, 1});
  return batched ? y : y.squeeze(0);
}

// ---- pooling -------------------------------------------------------------------------------

// The columns of a pooling window: [N, C, kh*kw, L], padded with `pad`; ceil_mode's last
// window may reach past the bottom/right padding (extra rows/cols, also `pad`).
struct PoolCols {
  Tensor cols;
  int64_t n, c, h, w, ho, wo;
};
PoolCols pool_cols(const Tensor& x4, const PoolAttrs& a, double pad) {
  PoolCols r{Tensor(), x4.size(0), x4.size(1), x4.size(2), x4.size(3), 0, 0};
  int64_t extra[2];
  int64_t outs[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t in = i == 0 ? r.h : r.w;
    outs[i] = pool_out_size(in, a.kernel(i), a.padding(i), a.stride(i), a.dilation(i), a.ceil_mode);
    const int64_t need = (outs[i] - 1) * a.stride(i) + a.dilation(i) * (a.kernel(i) - 1) + 1;
    extra[i] = std::max<int64_t>(0, need - (in + 2 * a.padding(i)));
  }
  r.ho = outs[0], r.wo = outs[1];
  const WindowAttrs win = window(a.kernel(0), a.kernel(1), a.dilation(0), a.dilation(1),
                                 a.padding(0), a.padding(1), a.stride(0), a.stride(1), extra[0],
                                 extra[1], pad);
  r.cols = unfold_op(x4, win).reshape({r.n, r.c, a.kernel(0) * a.kernel(1), r.ho * r.wo});
  return r;
}

// The values at the argmax positions (MaxPool2dIndices, one pass over the input): a plane-wise
// gather (MaxPool2dGather), whose gradient is the plane-wise scatter onto the first maximum of
// each window (PyTorch's max_pool2d backward); no window columns are ever written.
std::tuple<Tensor, Tensor> max_pool_values_indices(const Tensor& input, const Attrs& attrs) {
  // A rank other than 3 or 4 reaches the rule as it is (its error shows the caller's shape).
  const bool batched = input.dim() != 3;
  Tensor x = batched ? input : input.unsqueeze(0);
  Tensor idx = call_op(OpId::kMaxPool2dIndices, {x}, attrs);
  Tensor y = call_op(OpId::kMaxPool2dGather, {x, idx});
  if (!batched) return {y.squeeze(0), idx.squeeze(0)};
  return {y, idx};
}

Tensor max_pool2d_impl(In in, const Attrs& attrs) {
  return std::get<0>(max_pool_values_indices(in[0], attrs));
}

Tensor avg_pool2d_impl(In in, const Attrs& attrs) {
  const PoolAttrs a = PoolAttrs::of(attrs);
  const bool batched = in[0].dim() == 4;
  Tensor x = batched ? in[0] : in[0].unsqueeze(0);
  PoolCols p = pool_cols(x, a, 0.0);
  Tensor s = sum(p.cols, {2});  // [N, C, L]
  if (a.divisor_override > 0) {
    s = s / static_cast<double>(a.divisor_override);
  } else {
    // ATen's divisor per window: the window clipped to the padded input (count_include_pad)
    // or to the input itself. Uniform in the common case: one scalar division.
    std::vector<double> inv(p.ho * p.wo);
    bool uniform = true;
    for (int64_t oh = 0; oh < p.ho; ++oh)
      for (int64_t ow = 0; ow < p.wo; ++ow) {
        const int64_t h0 = oh * a.stride(0) - a.padding(0), w0 = ow * a.stride(1) - a.padding(1);
        const int64_t h1 = std::min(h0 + a.kernel(0), p.h + a.padding(0));
        const int64_t w1 = std::min(w0 + a.kernel(1), p.w + a.padding(1));
        int64_t div = (h1 - h0) * (w1 - w0);
        if (a.exclude_pad)
          div = (std::min(h1, p.h) - std::max<int64_t>(h0, 0)) *
                (std::min(w1, p.w) - std::max<int64_t>(w0, 0));
        inv[oh * p.wo + ow] = 1.0 / static_cast<double>(div);
        uniform = uniform && inv[oh * p.wo + ow] == inv[0];
      }
    if (uniform) s = s * inv[0];
    else s = s * tensor(inv, {p.ho * p.wo}, TensorOptions().dtype(s.dtype()).device(s.device()));
  }
  Tensor y = s.reshape({p.n, p.c, p.ho, p.wo});
  return batched ? y : y.squeeze(0);
}

// PyTorch's adaptive windows along one dim: [floor(i*in/out), ceil((i+1)*in/out)), as a
// pooling matrix [out, in] of 1/len entries.
Tensor pooling_matrix(int64_t in, int64_t out, const Tensor& like) {
  std::vector<double> m(out * in, 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = i * in / out, e = ((i + 1) * in + out - 1) / out;
    for (int64_t j = s; j < e; ++j) m[i * in + j] = 1.0 / static_cast<double>(e - s);
  }
  return tensor(m, {out, in}, TensorOptions().dtype(like.dtype()).device(like.device()));
}

Tensor adaptive_avg_pool2d_impl(In in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const int64_t oh = attrs.dims[0], ow = attrs.dims[1];
  const int64_t h = x.size(-2), w = x.size(-1);
  if (h % oh == 0 && w % ow == 0) {
    // Equal windows: a reshape and a mean (global pooling is just the mean over H, W).
    Shape s(x.shape().begin(), x.shape().end() - 2);
    const int64_t r = static_cast<int64_t>(s.size());
    s.insert(s.end(), {oh, h / oh, ow, w / ow});
    return mean(x.reshape(s), {r + 1, r + 3});
  }
  // Separable: P_h x P_w^T with constant pooling matrices.
  Tensor t = matmul(x, pooling_matrix(w, ow, x).t());  // [..., H, OW]
  return matmul(pooling_matrix(h, oh, x), t);          // [..., OH, OW]
}

struct Register {
  Register() {
    using internal::register_decomposition;
    register_decomposition(OpId::kConv1d, conv1d_impl);
    register_decomposition(OpId::kConv2d, conv2d_impl);
    register_decomposition(OpId::kConvTranspose2d, conv_transpose2d_impl);
    register_decomposition(OpId::kMaxPool2d, max_pool2d_impl);
    register_decomposition(OpId::kAvgPool2d, avg_pool2d_impl);
    register_decomposition(OpId::kAdaptiveAvgPool2d, adaptive_avg_pool2d_impl);
  }
} register_conv_composites;

// ---- public functions ----------------------------------------------------------------------

// LibTorch's ExpandingArray: one value stands for every spatial dim.
AttrDims expand(const char* op, const char* what, const Shape& v, size_t n) {
  if (v.size() == n) return AttrDims(v.begin(), v.end());
  if (v.size() == 1) return AttrDims(n, v[0]);
  throw Error(absl::StrFormat("%s: %s must have 1 or %d values, got %s", op, what, n,
                              shape_str(v)));
}

std::vector<Tensor> operands(const Tensor& x, const Tensor& w, const Tensor& b) {
  std::vector<Tensor> r{x, w};
  if (b.defined()) r.push_back(b);
  return r;
}

ConvAttrs conv_attrs(const char* op, size_t n, const Shape& stride, const Shape& padding,
                     const Shape& dilation, const Shape& output_padding, int64_t groups,
                     bool same) {
  ConvAttrs a;
  for (const auto& [v, what] : {std::pair{&stride, "stride"}, {&padding, "padding"},
                                {&dilation, "dilation"}, {&output_padding, "output_padding"}}) {
    AttrDims e = expand(op, what, *v, n);
    a.params.insert(a.params.end(), e.begin(), e.end());
  }
  a.groups = groups;
  a.same = same;
  return a;
}

// "same" / "valid" (LibTorch's padding modes).
bool padding_mode(const char* op, std::string_view mode) {
  if (mode == "same") return true;
  if (mode == "valid") return false;
  throw Error(absl::StrFormat("%s: invalid padding string '%s'; use \"same\" or \"valid\"", op,
                              std::string(mode)));
}

PoolAttrs pool_attrs(const char* op, const Shape& kernel, const Shape& stride,
                     const Shape& padding, const Shape& dilation, bool ceil_mode) {
  PoolAttrs a;
  AttrDims k = expand(op, "kernel_size", kernel, 2);
  AttrDims s = stride.empty() ? k : expand(op, "stride", stride, 2);
  AttrDims p = expand(op, "padding", padding, 2), d = expand(op, "dilation", dilation, 2);
  for (const AttrDims* v : {&k, &s, &p, &d}) a.params.insert(a.params.end(), v->begin(), v->end());
  a.ceil_mode = ceil_mode;
  return a;
}

}  // namespace

Tensor unfold(const Tensor& input, Shape kernel_size, Shape dilation, Shape padding,
              Shape stride) {
  AttrDims k = expand("unfold", "kernel_size", kernel_size, 2);
  AttrDims d = expand("unfold", "dilation", dilation, 2);
  AttrDims p = expand("unfold", "padding", padding, 2);
  AttrDims s = expand("unfold", "stride", stride, 2);
  return unfold_op(input, window(k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]));
}

Tensor fold(const Tensor& input, Shape output_size, Shape kernel_size, Shape dilation,
            Shape padding, Shape stride) {
  AttrDims o = expand("fold", "output_size", output_size, 2);
  AttrDims k = expand("fold", "kernel_size", kernel_size, 2);
  AttrDims d = expand("fold", "dilation", dilation, 2);
  AttrDims p = expand("fold", "padding", padding, 2);
  AttrDims s = expand("fold", "stride", stride, 2);
  return fold_op(input, window(k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]), o[0], o[1]);
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride,
              Shape padding, Shape dilation, int64_t groups) {
  return call_op(OpId::kConv1d, operands(input, weight, bias),
                 conv_attrs("conv1d", 1, stride, padding, dilation, {0}, groups, false));
}
Tensor conv1d_padding_mode(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           Shape stride, std::string_view padding, Shape dilation, int64_t groups) {
  return call_op(OpId::kConv1d, operands(input, weight, bias),
                 conv_attrs("conv1d", 1, stride, {0}, dilation, {0}, groups,
                            padding_mode("conv1d", padding)));
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride,
              Shape padding, Shape dilation, int64_t groups) {
  return call_op(OpId::kConv2d, operands(input, weight, bias),
                 conv_attrs("conv2d", 2, stride, padding, dilation, {0}, groups, false));
}
Tensor conv2d_padding_mode(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           Shape stride, std::string_view padding, Shape dilation, int64_t groups) {
  return call_op(OpId::kConv2d, operands(input, weight, bias),
                 conv_attrs("conv2d", 2, stride, {0}, dilation, {0}, groups,
                            padding_mode("conv2d", padding)));
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        Shape stride, Shape padding, Shape output_padding, int64_t groups,
                        Shape dilation) {
  return call_op(OpId::kConvTranspose2d, operands(input, weight, bias),
                 conv_attrs("conv_transpose2d", 2, stride, padding, dilation, output_padding,
                            groups, false));
}

Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return call_op(OpId::kMaxPool2d, {input},
                 pool_attrs("max_pool2d", kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  const PoolAttrs a = pool_attrs("max_pool2d_with_indices", kernel_size, stride, padding,
                                 dilation, ceil_mode);
  return max_pool_values_indices(input, a);
}
Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  if (divisor_override && *divisor_override == 0)
    throw Error("avg_pool2d: divisor must be not zero; pass std::nullopt for the window size");
  PoolAttrs a = pool_attrs("avg_pool2d", kernel_size, stride, padding, {1}, ceil_mode);
  a.exclude_pad = !count_include_pad;
  a.divisor_override = divisor_override.value_or(0);
  return call_op(OpId::kAvgPool2d, {input}, a);
}
Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size) {
  AttrDims o = expand("adaptive_avg_pool2d", "output_size", output_size, 2);
  Attrs a;
  a.dims = o;
  return call_op(OpId::kAdaptiveAvgPool2d, {input}, a);
}

}  // namespace sloth
