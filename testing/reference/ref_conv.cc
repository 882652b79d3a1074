// Reference kernels of convolution and pooling: unfold, fold (Kernel ops) and the conv/pool
// composites, as direct double loops written from PyTorch's definitions (not from the
// decompositions, which they check).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/conv_rules.h"
#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {
namespace {

// A tensor read as [N, C, H, W] (a missing batch dim is N = 1; conv1d's [N, C, L] is H = 1).
struct Nchw {
  int64_t n, c, h, w;
};
Nchw nchw(const Shape& s, size_t spatial) {
  Nchw r{1, 1, 1, 1};
  const size_t lead = s.size() - spatial;  // dims before the spatial ones
  r.c = s[lead - 1];
  if (lead == 2) r.n = s[0];
  r.w = s.back();
  if (spatial == 2) r.h = s[s.size() - 2];
  return r;
}

Values unfold(const Ctx& c) {
  const WindowAttrs a = WindowAttrs::of(c.a);
  const Nchw x = nchw(c.in[0].shape, 2);
  const int64_t ho = a.out_h(x.h), wo = a.out_w(x.w), l = ho * wo, kk = a.kh() * a.kw();
  Values out(numel(c.out.shape));
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t i = 0; i < a.kh(); ++i)
        for (int64_t j = 0; j < a.kw(); ++j)
          for (int64_t oh = 0; oh < ho; ++oh)
            for (int64_t ow = 0; ow < wo; ++ow) {
              const int64_t ih = oh * a.sh() - a.ph() + i * a.dh();
              const int64_t iw = ow * a.sw() - a.pw() + j * a.dw();
              const bool in = ih >= 0 && ih < x.h && iw >= 0 && iw < x.w;
              const int64_t row = ch * kk + i * a.kw() + j, col = oh * wo + ow;
              const int64_t at = a.batch_inner ? row * (x.n * l) + n * l + col
                                               : (n * (x.c * kk + a.extra_rows()) + row) * l + col;
              out[at] = in ? c.in[0].v[((n * x.c + ch) * x.h + ih) * x.w + iw] : a.pad_value;
            }
  const double extra = a.extra_row == WindowAttrs::kOnesRow ? 1.0 : 0.0;
  if (a.extra_row && a.batch_inner)  // the last row
    for (int64_t k = x.c * kk * x.n * l; k < static_cast<int64_t>(out.size()); ++k) out[k] = extra;
  if (a.extra_row && !a.batch_inner)  // each sample's last row
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t col = 0; col < l; ++col) out[(n * (x.c * kk + 1) + x.c * kk) * l + col] = extra;
  return out;
}

Values fold(const Ctx& c) {
  const WindowAttrs a = WindowAttrs::of(c.a);
  const Nchw o = nchw(c.out.shape, 2);
  const int64_t ho = a.out_h(o.h), wo = a.out_w(o.w), l = ho * wo, kk = a.kh() * a.kw();
  Values out(numel(c.out.shape), 0.0);
  for (int64_t n = 0; n < o.n; ++n)
    for (int64_t ch = 0; ch < o.c; ++ch)
      for (int64_t i = 0; i < a.kh(); ++i)
        for (int64_t j = 0; j < a.kw(); ++j)
          for (int64_t oh = 0; oh < ho; ++oh)
            for (int64_t ow = 0; ow < wo; ++ow) {
              const int64_t ih = oh * a.sh() - a.ph() + i * a.dh();
              const int64_t iw = ow * a.sw() - a.pw() + j * a.dw();
              const int64_t row = ch * kk + i * a.kw() + j, col = oh * wo + ow;
              const int64_t k = a.batch_inner ? row * (o.n * l) + n * l + col
                                              : (n * (o.c * kk + a.extra_rows()) + row) * l + col;
              if (ih >= 0 && ih < o.h && iw >= 0 && iw < o.w)
                out[((n * o.c + ch) * o.h + ih) * o.w + iw] += c.in[0].v[k];
            }
  return out;
}

Values conv(const Ctx& c) {
  const size_t s = c.op == OpId::kConv1d ? 1 : 2;
  const ConvAttrs a = ConvAttrs::of(c.a);
  const Nchw x = nchw(c.in[0].shape, s), o = nchw(c.out.shape, s);
  const Shape& ws = c.in[1].shape;
  const int64_t kh = s == 2 ? ws[2] : 1, kw = ws.back();
  const int64_t sh = s == 2 ? a.stride(0) : 1, sw = a.stride(s - 1);
  const int64_t dh = s == 2 ? a.dilation(0) : 1, dw = a.dilation(s - 1);
  int64_t ph = s == 2 ? a.padding(0) : 0, pw = a.padding(s - 1);
  if (a.same) {  // left = total / 2 (the extra one goes right), as ATen
    ph = s == 2 ? dh * (kh - 1) / 2 : 0;
    pw = dw * (kw - 1) / 2;
  }
  const int64_t g = a.groups;
  const auto& xv = c.in[0].v;
  const auto& wv = c.in[1].v;
  Values out(numel(c.out.shape), 0.0);
  auto at = [&](int64_t n, int64_t ch, int64_t h, int64_t w) -> double& {
    return out[((n * o.c + ch) * o.h + h) * o.w + w];
  };
  if (c.op != OpId::kConvTranspose2d) {
    const int64_t cg = x.c / g, og = o.c / g;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t oc = 0; oc < o.c; ++oc)
        for (int64_t oh = 0; oh < o.h; ++oh)
          for (int64_t ow = 0; ow < o.w; ++ow) {
            double acc = c.in.size() > 2 ? c.in[2].v[oc] : 0.0;
            const int64_t grp = oc / og;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  const int64_t ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw;
                  if (ih < 0 || ih >= x.h || iw < 0 || iw >= x.w) continue;
                  acc += xv[((n * x.c + grp * cg + ci) * x.h + ih) * x.w + iw] *
                         wv[((oc * cg + ci) * kh + i) * kw + j];
                }
            at(n, oc, oh, ow) = acc;
          }
    return out;
  }
  const int64_t cg = x.c / g, og = o.c / g;  // weight [C, O/g, kh, kw]
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t ci = 0; ci < x.c; ++ci)
      for (int64_t ih = 0; ih < x.h; ++ih)
        for (int64_t iw = 0; iw < x.w; ++iw) {
          const double v = xv[((n * x.c + ci) * x.h + ih) * x.w + iw];
          const int64_t grp = ci / cg;
          for (int64_t oc = 0; oc < og; ++oc)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t oh = ih * sh - ph + i * dh, ow = iw * sw - pw + j * dw;
                if (oh < 0 || oh >= o.h || ow < 0 || ow >= o.w) continue;
                at(n, grp * og + oc, oh, ow) += v * wv[((ci * og + oc) * kh + i) * kw + j];
              }
        }
  if (c.in.size() > 2)
    for (int64_t n = 0; n < o.n; ++n)
      for (int64_t oc = 0; oc < o.c; ++oc)
        for (int64_t p = 0; p < o.h * o.w; ++p) out[(n * o.c + oc) * o.h * o.w + p] += c.in[2].v[oc];
  return out;
}

// ---- pooling: max_pool2d's argmax (PyTorch's bounds and comparison, written again) ----
// The flat in-plane index of window (oh, ow)'s maximum: the first in window order; a NaN
// always takes over; a window with nothing above -inf answers its first in-bounds position.
int64_t max_pool_argmax(const double* v, const PoolAttrs& a, int64_t h, int64_t w, int64_t oh,
                        int64_t ow) {
  int64_t best = -1;
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < a.kernel(0); ++i)
    for (int64_t j = 0; j < a.kernel(1); ++j) {
      const int64_t ih = oh * a.stride(0) - a.padding(0) + i * a.dilation(0);
      const int64_t iw = ow * a.stride(1) - a.padding(1) + j * a.dilation(1);
      if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
      const double x = v[ih * w + iw];
      if (best < 0 || x > m || std::isnan(x)) best = ih * w + iw, m = x;
    }
  return best;
}

Values max_pool_indices(const Ctx& c) {
  const PoolAttrs a = PoolAttrs::of(c.a);
  const Nchw x = nchw(c.in[0].shape, 2), o = nchw(c.out.shape, 2);
  Values out;
  out.reserve(numel(c.out.shape));
  for (int64_t nc = 0; nc < x.n * x.c; ++nc)
    for (int64_t oh = 0; oh < o.h; ++oh)
      for (int64_t ow = 0; ow < o.w; ++ow)
        out.push_back(static_cast<double>(
            max_pool_argmax(c.in[0].v.data() + nc * x.h * x.w, a, x.h, x.w, oh, ow)));
  return out;
}

// out[p, j] = x[p, idx[p, j]] (gather), or zeros [N, C, H, W] with g[p, j] added at idx[p, j].
Values max_pool_plane_index(const Ctx& c) {
  const bool scatter = c.op == OpId::kMaxPool2dScatter;
  const Shape& big = scatter ? c.out.shape : c.in[0].shape;
  const int64_t planes = big[0] * big[1], hw = big[2] * big[3];
  const int64_t l = numel(c.in[1].shape) / std::max<int64_t>(planes, 1);
  Values out(static_cast<size_t>(numel(c.out.shape)), 0.0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t j = 0; j < l; ++j) {
      const int64_t k = static_cast<int64_t>(c.in[1].v[p * l + j]);
      if (scatter) out[p * hw + k] += c.in[0].v[p * l + j];
      else out[p * l + j] = c.in[0].v[p * hw + k];
    }
  return out;
}

Values pool(const Ctx& c) {
  const PoolAttrs a = PoolAttrs::of(c.a);
  const Nchw x = nchw(c.in[0].shape, 2), o = nchw(c.out.shape, 2);
  Values out;
  out.reserve(numel(c.out.shape));
  for (int64_t nc = 0; nc < x.n * x.c; ++nc)
    for (int64_t oh = 0; oh < o.h; ++oh)
      for (int64_t ow = 0; ow < o.w; ++ow) {
        const double* v = c.in[0].v.data() + nc * x.h * x.w;
        const int64_t h0 = oh * a.stride(0) - a.padding(0), w0 = ow * a.stride(1) - a.padding(1);
        if (c.op == OpId::kMaxPool2d) {  // NaN propagates, as PyTorch's
          out.push_back(v[max_pool_argmax(v, a, x.h, x.w, oh, ow)]);
          continue;
        }
        // ATen's avg_pool2d: the window clipped to the padded input counts with
        // count_include_pad, the window clipped to the input without it.
        const int64_t h1 = std::min(h0 + a.kernel(0), x.h + a.padding(0));
        const int64_t w1 = std::min(w0 + a.kernel(1), x.w + a.padding(1));
        const int64_t padded = (h1 - h0) * (w1 - w0);
        const int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
        const int64_t he = std::min(h1, x.h), we = std::min(w1, x.w);
        double sum = 0;
        for (int64_t ih = hs; ih < he; ++ih)
          for (int64_t iw = ws; iw < we; ++iw) sum += v[ih * x.w + iw];
        const int64_t div = a.divisor_override ? a.divisor_override
                            : a.exclude_pad    ? (he - hs) * (we - ws)
                                               : padded;
        out.push_back(sum / static_cast<double>(div));
      }
  return out;
}

Values adaptive(const Ctx& c) {
  const Nchw x = nchw(c.in[0].shape, 2), o = nchw(c.out.shape, 2);
  Values out;
  out.reserve(numel(c.out.shape));
  for (int64_t nc = 0; nc < x.n * x.c; ++nc)
    for (int64_t oh = 0; oh < o.h; ++oh)
      for (int64_t ow = 0; ow < o.w; ++ow) {
        const int64_t hs = oh * x.h / o.h, he = ((oh + 1) * x.h + o.h - 1) / o.h;
        const int64_t ws = ow * x.w / o.w, we = ((ow + 1) * x.w + o.w - 1) / o.w;
        double sum = 0;
        for (int64_t ih = hs; ih < he; ++ih)
          for (int64_t iw = ws; iw < we; ++iw) sum += c.in[0].v[(nc * x.h + ih) * x.w + iw];
        out.push_back(sum / static_cast<double>((he - hs) * (we - ws)));
      }
  return out;
}

}  // namespace

absl::StatusOr<Values> eval_conv(const Ctx& c) {
  switch (c.op) {
    case OpId::kUnfold: return unfold(c);
    case OpId::kFold: return fold(c);
    case OpId::kConv1d: case OpId::kConv2d: case OpId::kConvTranspose2d: return conv(c);
    case OpId::kMaxPool2d: case OpId::kAvgPool2d: return pool(c);
    case OpId::kAdaptiveAvgPool2d: return adaptive(c);
    case OpId::kMaxPool2dIndices: return max_pool_indices(c);
    case OpId::kMaxPool2dGather: case OpId::kMaxPool2dScatter: return max_pool_plane_index(c);
    default: return invalid("%s: not a convolution or pooling op", op_name(c.op));
  }
}

}  // namespace sloth::ref
