// Reference kernels of conv2d's dedicated kernels (ConvForward, ConvInputGrad,
// ConvWeightGrad): direct double loops over the definition y[n,o,oh,ow] = b[o] +
// sum_{c,i,j} x[n,c,ih,iw] w[o,c,i,j] (ih = oh*sh - ph + i*dh, iw likewise, zero outside the
// input), and the two adjoints of that sum.
#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {

absl::StatusOr<Values> eval_conv_kernel(const Ctx& c) {
  const WindowAttrs a = WindowAttrs::of(c.a);
  // The image [N, C, H, W], the output [N, O, Ho, Wo].
  const Shape& s0 = c.in[0].shape;
  const Shape& s1 = c.in[1].shape;
  int64_t n = s0[0], ch, h, w, o;
  switch (c.op) {
    case OpId::kConvForward: ch = s0[1], h = s0[2], w = s0[3], o = s1[0]; break;
    case OpId::kConvInputGrad: o = s0[1], ch = s1[1], h = c.out.shape[2], w = c.out.shape[3]; break;
    case OpId::kConvWeightGrad: o = s0[1], ch = s1[1], h = s1[2], w = s1[3]; break;
    default: return invalid("%s: not a convolution kernel", op_name(c.op));
  }
  const int64_t ho = a.out_h(h), wo = a.out_w(w), kh = a.kh(), kw = a.kw();
  auto xi = [&](int64_t b, int64_t k, int64_t y, int64_t x) { return ((b * ch + k) * h + y) * w + x; };
  auto yi = [&](int64_t b, int64_t k, int64_t y, int64_t x) { return ((b * o + k) * ho + y) * wo + x; };
  auto wi = [&](int64_t p, int64_t k, int64_t i, int64_t j) { return ((p * ch + k) * kh + i) * kw + j; };
  Values out(numel(c.out.shape), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < o; ++p)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          if (c.op == OpId::kConvForward && c.in.size() > 2) out[yi(b, p, oh, ow)] = c.in[2].v[p];
          for (int64_t k = 0; k < ch; ++k)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * a.sh() - a.ph() + i * a.dh();
                const int64_t iw = ow * a.sw() - a.pw() + j * a.dw();
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                switch (c.op) {
                  case OpId::kConvForward:
                    out[yi(b, p, oh, ow)] += c.in[0].v[xi(b, k, ih, iw)] * c.in[1].v[wi(p, k, i, j)];
                    break;
                  case OpId::kConvInputGrad:
                    out[xi(b, k, ih, iw)] += c.in[0].v[yi(b, p, oh, ow)] * c.in[1].v[wi(p, k, i, j)];
                    break;
                  default:
                    out[wi(p, k, i, j)] += c.in[0].v[yi(b, p, oh, ow)] * c.in[1].v[xi(b, k, ih, iw)];
                    break;
                }
              }
        }
  return out;
}

}  // namespace sloth::ref
