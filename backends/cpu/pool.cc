// max_pool2d's argmax on the CPU (MaxPool2dIndices, core/ops.def): one read of the input,
// one int64 per output window: the flat in-plane index h*W+w of its maximum, exactly as
// PyTorch 1.13's cpu_max_pool (the first maximum in window order; a NaN always takes over,
// so the last NaN of a window wins; a window of -inf answers its first in-bounds position).
// Planes (N*C of them) run in the thread pool. Also the plane-wise gather and scatter that
// turn those indices into max_pool2d's values and gradient (MaxPool2dGather/Scatter).
//
// Where a window lies inside the input (every output but the border ones), the loop over
// output columns is branch-free (selects, no data-dependent jumps): random data would
// mispredict half of the comparisons otherwise, and GCC vectorizes it for the common kernel
// sizes (2x2, 3x3 with stride 1 or 2).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <immintrin.h>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/conv_rules.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

struct Geom {
  int64_t h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw;
};

// One output window through PyTorch's bounds: [ih0, ih1) x [iw0, iw1) stepped by dilation.
template <class T>
inline int64_t window_argmax(const T* x, const Geom& g, int64_t oh, int64_t ow) {
  int64_t ih0 = oh * g.sh - g.ph, iw0 = ow * g.sw - g.pw;
  const int64_t ih1 = std::min(ih0 + (g.kh - 1) * g.dh + 1, g.h);
  const int64_t iw1 = std::min(iw0 + (g.kw - 1) * g.dw + 1, g.w);
  while (ih0 < 0) ih0 += g.dh;
  while (iw0 < 0) iw0 += g.dw;
  int64_t best = ih0 * g.w + iw0;
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t ih = ih0; ih < ih1; ih += g.dh)
    for (int64_t iw = iw0; iw < iw1; iw += g.dw) {
      const int64_t i = ih * g.w + iw;
      const T v = x[i];
      if (v > m || std::isnan(v)) m = v, best = i;
    }
  return best;
}

// Output columns [ow0, ow1) of row oh whose windows lie inside the input: the same answer
// as window_argmax, without branches (selects GCC vectorizes). KH, KW, SW > 0 fix the kernel
// size and column stride at compile time, with dilation 1 (contiguous window rows: the loads
// are plain vector loads and shuffles); 0 takes them from g.
template <int KH, int KW, int SW, class T>
inline void interior_row(const T* __restrict x, int64_t* __restrict out, const Geom& g,
                         int64_t oh, int64_t ow0, int64_t ow1) {
  constexpr bool kFixed = KH > 0;
  const int64_t kh = kFixed ? KH : g.kh, kw = kFixed ? KW : g.kw, sw = kFixed ? SW : g.sw;
  const int64_t dh = kFixed ? 1 : g.dh, dw = kFixed ? 1 : g.dw;
  const int64_t ih0 = oh * g.sh - g.ph, w = g.w;
  const int64_t base = ih0 * w - g.pw;  // flat index of window (oh, 0)'s first element
  for (int64_t ow = ow0; ow < ow1; ++ow) {
    const T* p = x + base + ow * sw;
    // The first element starts the window (as max(-inf, v) with PyTorch's comparison would).
    T m = p[0];
    int32_t k = 0;
#pragma GCC unroll 16
    for (int64_t i = 0; i < kh; ++i)
#pragma GCC unroll 16
      for (int64_t j = 0; j < kw; ++j) {
        if (i == 0 && j == 0) continue;
        const T v = p[i * dh * w + j * dw];
        const bool take = v > m || v != v;
        m = take ? v : m;
        k = take ? static_cast<int32_t>(i * kw + j) : k;
      }
    out[ow] = base + ow * sw + (k / kw) * dh * w + (k % kw) * dw;
  }
}

// float 2x2 windows, stride 2, dilation 1 (the CNN's pooling), 8 output columns per step in
// AVX2 registers; the last partial step reads through masked loads, so rows of 7 or 14
// outputs (28x28 and 14x14 inputs) are vector code too. Same comparison as above.
inline __m256 take_if(__m256 v, __m256 m) {  // v > m, or v is NaN
  return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
inline void row_2x2s2(const float* __restrict x, int64_t* __restrict out, const Geom& g,
                      int64_t oh, int64_t ow0, int64_t ow1) {
  const int64_t w = g.w, base = (oh * g.sh - g.ph) * w - g.pw;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t ow = ow0; ow < ow1; ow += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, ow1 - ow));
    const float* r0 = x + base + ow * 2;
    const float* r1 = r0 + w;
    __m256 a0, a1, b0, b1;
    if (n == 8) {
      a0 = _mm256_loadu_ps(r0), a1 = _mm256_loadu_ps(r0 + 8);
      b0 = _mm256_loadu_ps(r1), b1 = _mm256_loadu_ps(r1 + 8);
    } else {  // elements [0, 2n) of each window row pair
      const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * n), lane);
      const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * n - 8), lane);
      a0 = _mm256_maskload_ps(r0, m0), a1 = _mm256_maskload_ps(r0 + 8, m1);
      b0 = _mm256_maskload_ps(r1, m0), b1 = _mm256_maskload_ps(r1 + 8, m1);
    }
    // Even/odd columns in output order: shuffle within 128-bit lanes, then fix the lane order.
    auto even = [](__m256 lo, __m256 hi) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
    };
    auto odd = [](__m256 lo, __m256 hi) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
    };
    const __m256 v00 = even(a0, a1), v01 = odd(a0, a1), v10 = even(b0, b1), v11 = odd(b0, b1);
    // The flat offset of the chosen element from the window's first, as float bits.
    const __m256 o1 = _mm256_castsi256_ps(_mm256_set1_epi32(1));
    const __m256 ow_ = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(w)));
    const __m256 ow1_ = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(w + 1)));
    __m256 m = v00, k = _mm256_setzero_ps(), t;
    t = take_if(v01, m), m = _mm256_blendv_ps(m, v01, t), k = _mm256_blendv_ps(k, o1, t);
    t = take_if(v10, m), m = _mm256_blendv_ps(m, v10, t), k = _mm256_blendv_ps(k, ow_, t);
    t = take_if(v11, m), m = _mm256_blendv_ps(m, v11, t), k = _mm256_blendv_ps(k, ow1_, t);
    // out = base + 2 * (ow + b) + k, widened to int64.
    const __m256i off = _mm256_add_epi32(_mm256_castps_si256(k), _mm256_add_epi32(lane, lane));
    const __m256i start = _mm256_set1_epi64x(base + 2 * ow);
    const __m256i lo = _mm256_add_epi64(start, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(off)));
    const __m256i hi = _mm256_add_epi64(start, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(off, 1)));
    if (n == 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ow), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ow + 4), hi);
    } else {
      alignas(32) int64_t tmp[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 4), hi);
      std::copy_n(tmp, n, out + ow);
    }
  }
}

template <int KH, int KW, int SW, class T>
void plane(const T* x, int64_t* out, const Geom& g, int64_t ow_lo, int64_t ow_hi) {
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    int64_t* o = out + oh * g.wo;
    const int64_t ih0 = oh * g.sh - g.ph;
    const bool rows_inside = ih0 >= 0 && ih0 + (g.kh - 1) * g.dh < g.h;
    if (!rows_inside || ow_lo >= ow_hi) {
      for (int64_t ow = 0; ow < g.wo; ++ow) o[ow] = window_argmax(x, g, oh, ow);
      continue;
    }
    for (int64_t ow = 0; ow < ow_lo; ++ow) o[ow] = window_argmax(x, g, oh, ow);
    if constexpr (std::is_same_v<T, float> && KH == 2 && KW == 2 && SW == 2)
      row_2x2s2(x, o, g, oh, ow_lo, ow_hi);
    else
      interior_row<KH, KW, SW>(x, o, g, oh, ow_lo, ow_hi);
    for (int64_t ow = ow_hi; ow < g.wo; ++ow) o[ow] = window_argmax(x, g, oh, ow);
  }
}

absl::Status run_max_pool_indices(Env& env, const Instr& in) {
  const DeviceData& x0 = env.get(in.in[0]);
  DeviceData keep;
  const DeviceData& x = x0.is_contiguous() ? x0 : (keep = make_contiguous(env, x0, x0.dtype));
  const PoolAttrs a = PoolAttrs::of(in.attrs);
  const Shape& s = x.layout.shape;
  const size_t r = s.size();
  Geom g{s[r - 2], s[r - 1], 0, 0, a.kernel(0), a.kernel(1), a.stride(0), a.stride(1),
         a.padding(0), a.padding(1), a.dilation(0), a.dilation(1)};
  g.ho = pool_out_size(g.h, g.kh, g.ph, g.sh, g.dh, a.ceil_mode);
  g.wo = pool_out_size(g.w, g.kw, g.pw, g.sw, g.dw, a.ceil_mode);
  DeviceData& out = env.alloc_to(in.out, in.shape, DType::kInt64);
  const int64_t planes = g.h * g.w > 0 ? x.numel() / (g.h * g.w) : 0;
  if (planes == 0 || g.ho * g.wo == 0) return absl::OkStatus();
  // Output columns whose whole window lies inside the input.
  const int64_t ow_lo = std::min(g.wo, (g.pw + g.sw - 1) / g.sw);
  const int64_t span = (g.kw - 1) * g.dw;  // iw0 + span < w
  const int64_t ow_hi = std::max(ow_lo, std::min(g.wo, g.w - span + g.pw > 0
                                                           ? (g.w - 1 - span + g.pw) / g.sw + 1
                                                           : int64_t{0}));
  int64_t* po = out.data<int64_t>();
  const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
  visit_dtype(x.dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* px = x.data<T>();
      auto run = [&](auto fn) {
        parallel_for(planes, std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(in_plane, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t p = b; p < e; ++p)
                         fn(px + p * in_plane, po + p * out_plane, g, ow_lo, ow_hi);
                     });
      };
      // The common pooling shapes get compile-time windows; the rest the general loop.
      const bool d1 = g.dh == 1 && g.dw == 1;
      if (d1 && g.kh == 2 && g.kw == 2 && g.sw == 2) run(plane<2, 2, 2, T>);
      else if (d1 && g.kh == 2 && g.kw == 2 && g.sw == 1) run(plane<2, 2, 1, T>);
      else if (d1 && g.kh == 3 && g.kw == 3 && g.sw == 2) run(plane<3, 3, 2, T>);
      else if (d1 && g.kh == 3 && g.kw == 3 && g.sw == 1) run(plane<3, 3, 1, T>);
      else run(plane<0, 0, 0, T>);
    }
  });
  return absl::OkStatus();
}

// ---- the values at the indices and their adjoint, plane by plane -------------------------
// MaxPool2dGather: out[p, j] = x[p, idx[p, j]]; MaxPool2dScatter: out[p] = 0, then
// out[p, idx[p, j]] += g[p, j] in j order. Planes (N*C) run in the pool. An index outside its
// plane is never followed: it is reported (after the pass) as the op's error.
const DeviceData& contiguous(Env& env, const DeviceData& x, DeviceData& keep) {
  return x.is_contiguous() ? x : (keep = make_contiguous(env, x, x.dtype));
}

absl::Status bad_index(const Instr& in, const int64_t* idx, int64_t n, int64_t plane) {
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<uint64_t>(idx[i]) >= static_cast<uint64_t>(plane))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d is out of range for a plane of %d elements (valid: 0 to %d)",
          op_name(in.op), idx[i], plane, plane - 1));
  return absl::OkStatus();
}

template <bool kScatter>
absl::Status run_plane_index(Env& env, const Instr& in) {
  DeviceData kv, ki;
  const DeviceData& v = contiguous(env, env.get(in.in[0]), kv);  // x (gather) or g (scatter)
  const DeviceData& ix = contiguous(env, env.get(in.in[1]), ki);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const IntSpan big = kScatter ? in.shape.span() : IntSpan(v.layout.shape);  // the [N, C, H, W] side
  const int64_t planes = big[0] * big[1], hw = big[2] * big[3];
  const int64_t l = planes > 0 ? ix.numel() / planes : 0;
  if (planes == 0) return absl::OkStatus();
  const int64_t* pi = ix.data<int64_t>();
  std::atomic<bool> bad{false};
  visit_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* pv = v.data<T>();
      T* po = out.data<T>();
      const int64_t grain = std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(hw + l, 1));
      parallel_for(planes, grain, [&](int64_t b, int64_t e) {
        bool local = false;
        for (int64_t p = b; p < e; ++p) {
          const int64_t* ip = pi + p * l;
          if constexpr (kScatter) {
            T* o = po + p * hw;
            const T* g = pv + p * l;
            std::fill_n(o, hw, T(0));
            for (int64_t j = 0; j < l; ++j) {
              const bool ok = static_cast<uint64_t>(ip[j]) < static_cast<uint64_t>(hw);
              local |= !ok;
              o[ok ? ip[j] : 0] += ok ? g[j] : T(0);
            }
          } else {
            const T* x = pv + p * hw;
            T* o = po + p * l;
            for (int64_t j = 0; j < l; ++j) {
              const bool ok = static_cast<uint64_t>(ip[j]) < static_cast<uint64_t>(hw);
              local |= !ok;
              o[j] = x[ok ? ip[j] : 0];
            }
          }
        }
        if (local) bad.store(true, std::memory_order_relaxed);
      });
    }
  });
  if (bad.load()) return bad_index(in, pi, ix.numel(), hw);
  return absl::OkStatus();
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kMaxPool2dIndices, run_max_pool_indices);
SLOTH_CPU_OP_KERNEL(kMaxPool2dGather, run_plane_index<false>);
SLOTH_CPU_OP_KERNEL(kMaxPool2dScatter, run_plane_index<true>);

}  // namespace sloth::cpu
