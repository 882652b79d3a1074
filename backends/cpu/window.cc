// Unfold (im2col) and Fold (col2im) on the CPU: the Kernel-category ops under convolution and
// pooling (core/ops.def). Both walk, per (n, c) plane, each kernel offset (i, j) and each
// output row: the in-bounds part of a row is one contiguous copy (stride 1) or a strided
// gather, the padded ends a fill. Planes are independent, so the thread pool splits N*C.
#include <algorithm>
#include <cstring>

#include "backends/cpu/op_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

// The output columns [lo, hi) of a row whose input column iw0 + ow * s lies in [0, w).
struct Span1 {
  int64_t lo, hi;
};
inline Span1 valid_cols(int64_t iw0, int64_t s, int64_t w, int64_t wo) {
  int64_t lo = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
  int64_t hi = w - 1 - iw0 < 0 ? 0 : (w - 1 - iw0) / s + 1;
  lo = std::min(lo, wo);
  hi = std::clamp(hi, lo, wo);
  return {lo, hi};
}

// planes = N*C; a plane p = n*C + c has its row (c, i, j) of columns at
// n * sn + (c*kh*kw + i*kw + j) * sr: [N, C*kk, L] (sn = C*kk*L, sr = L) or, with batch_inner,
// [C*kk, N*L] (sn = L, sr = N*L).
struct Geometry {
  int64_t planes, c, h, w, ho, wo;
  WindowAttrs a;
  int64_t sn = 0, sr = 0;
  void finish() {
    ho = a.out_h(h);
    wo = a.out_w(w);
    const int64_t l = ho * wo, kk = a.kh() * a.kw();
    sn = a.batch_inner ? l : (c * kk + a.extra_rows()) * l;
    sr = a.batch_inner ? (planes / c) * l : l;
  }
  int64_t row(int64_t p, int64_t ij) const {
    return (p / c) * sn + ((p % c) * a.kh() * a.kw() + ij) * sr;
  }
};

// Work per parallel chunk: about 64K elements.
int64_t grain(const Geometry& g) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, g.a.kh() * g.a.kw() * g.ho * g.wo));
}

template <typename T>
void unfold_planes(const T* x, T* out, const Geometry& g, int64_t p0, int64_t p1) {
  const WindowAttrs& a = g.a;
  const T pad = static_cast<T>(a.pad_value);
  for (int64_t p = p0; p < p1; ++p) {
    const T* src = x + p * g.h * g.w;
    for (int64_t i = 0; i < a.kh(); ++i)
      for (int64_t j = 0; j < a.kw(); ++j) {
        T* row = out + g.row(p, i * a.kw() + j);
        const int64_t iw0 = j * a.dw() - a.pw();
        const Span1 c = valid_cols(iw0, a.sw(), g.w, g.wo);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          T* r = row + oh * g.wo;
          const int64_t ih = oh * a.sh() - a.ph() + i * a.dh();
          if (ih < 0 || ih >= g.h) {
            std::fill(r, r + g.wo, pad);
            continue;
          }
          const T* s = src + ih * g.w + iw0;
          std::fill(r, r + c.lo, pad);
          if (a.sw() == 1) {
            std::memcpy(r + c.lo, s + c.lo, (c.hi - c.lo) * sizeof(T));
          } else {
            const int64_t st = a.sw();
            for (int64_t ow = c.lo; ow < c.hi; ++ow) r[ow] = s[ow * st];
          }
          std::fill(r + c.hi, r + g.wo, pad);
        }
      }
  }
}

template <typename T>
void fold_planes(const T* cols, T* out, const Geometry& g, int64_t p0, int64_t p1) {
  const WindowAttrs& a = g.a;
  for (int64_t p = p0; p < p1; ++p) {
    T* dst = out + p * g.h * g.w;
    std::fill(dst, dst + g.h * g.w, T(0));
    for (int64_t i = 0; i < a.kh(); ++i)
      for (int64_t j = 0; j < a.kw(); ++j) {
        const T* row = cols + g.row(p, i * a.kw() + j);
        const int64_t iw0 = j * a.dw() - a.pw();
        const Span1 c = valid_cols(iw0, a.sw(), g.w, g.wo);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const int64_t ih = oh * a.sh() - a.ph() + i * a.dh();
          if (ih < 0 || ih >= g.h) continue;
          const T* r = row + oh * g.wo;
          T* d = dst + ih * g.w + iw0;
          if (a.sw() == 1) {
            for (int64_t ow = c.lo; ow < c.hi; ++ow) d[ow] += r[ow];
          } else {
            const int64_t st = a.sw();
            for (int64_t ow = c.lo; ow < c.hi; ++ow) d[ow * st] += r[ow];
          }
        }
      }
  }
}

template <typename T, typename F>
void run_planes(const Geometry& g, F f) {
  parallel_for(g.planes, grain(g), [&](int64_t p0, int64_t p1) { f(p0, p1); });
}

absl::Status run_unfold(Env& env, const Instr& in) {
  DeviceData x = env.get(in.in[0]);
  if (!x.is_contiguous()) x = make_contiguous(env, x, x.dtype);
  const Shape& xs = x.layout.shape;
  Geometry g{1, xs[xs.size() - 3], xs[xs.size() - 2], xs.back(), 0, 0, WindowAttrs::of(in.attrs)};
  for (size_t d = 0; d + 2 < xs.size(); ++d) g.planes *= xs[d];
  g.finish();
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  // The extra row follows the C*kk column rows (of each sample, or once with batch_inner):
  // ones or zeros.
  const int64_t n_extra = g.a.extra_rows() == 0 ? 0 : g.a.batch_inner ? 1 : g.planes / g.c;
  const int64_t extra_len = g.a.batch_inner ? g.sr : g.ho * g.wo;
  const double extra = g.a.extra_row == WindowAttrs::kOnesRow ? 1.0 : 0.0;
  auto extra_at = [&](int64_t b) { return b * g.sn + g.c * g.a.kh() * g.a.kw() * g.sr; };
  if (in.dtype == DType::kFloat32) {
    const float* px = x.data<float>();
    float* po = out.data<float>();
    run_planes<float>(g, [&](int64_t a, int64_t b) { unfold_planes(px, po, g, a, b); });
    for (int64_t b = 0; b < n_extra; ++b)
      std::fill(po + extra_at(b), po + extra_at(b) + extra_len, static_cast<float>(extra));
  } else if (in.dtype == DType::kFloat64) {
    const double* px = x.data<double>();
    double* po = out.data<double>();
    run_planes<double>(g, [&](int64_t a, int64_t b) { unfold_planes(px, po, g, a, b); });
    for (int64_t b = 0; b < n_extra; ++b)
      std::fill(po + extra_at(b), po + extra_at(b) + extra_len, extra);
  } else {
    return absl::InternalError("cpu backend: unfold takes float32 or float64");
  }
  return absl::OkStatus();
}

absl::Status run_fold(Env& env, const Instr& in) {
  DeviceData x = env.get(in.in[0]);
  if (!x.is_contiguous()) x = make_contiguous(env, x, x.dtype);
  const Dims& os = in.shape;
  Geometry g{1, os[os.size() - 3], os[os.size() - 2], os.back(), 0, 0, WindowAttrs::of(in.attrs)};
  for (size_t d = 0; d + 2 < os.size(); ++d) g.planes *= os[d];
  g.finish();
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  if (in.dtype == DType::kFloat32) {
    const float* px = x.data<float>();
    float* po = out.data<float>();
    run_planes<float>(g, [&](int64_t a, int64_t b) { fold_planes(px, po, g, a, b); });
  } else if (in.dtype == DType::kFloat64) {
    const double* px = x.data<double>();
    double* po = out.data<double>();
    run_planes<double>(g, [&](int64_t a, int64_t b) { fold_planes(px, po, g, a, b); });
  } else {
    return absl::InternalError("cpu backend: fold takes float32 or float64");
  }
  return absl::OkStatus();
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kUnfold, run_unfold);
SLOTH_CPU_OP_KERNEL(kFold, run_fold);

}  // namespace sloth::cpu
