// conv2d's dedicated kernels on the CPU (core/ops.def: ConvForward, ConvInputGrad,
// ConvWeightGrad). The batch is split across the pool by samples; each task im2cols one
// sample at a time into a thread-local buffer ([C*kh*kw, L], a few hundred KB: it stays in
// L2) and runs one single-threaded GEMM on it:
//   forward       y_n = W [O, CKK] cols_n (+ bias: y_n is prefilled with it, GEMM beta = 1)
//   input grad    dcols = W^T dy_n in the buffer, then col2im into dx_n
//   weight grad   dW_q += dy_n cols_n^T, one accumulator per task q (fixed sample ranges),
//                 summed in task order at the end: deterministic for a given thread count.
// The composite (matmul over the unfolded batch) wrote and read the whole batch's columns
// (29 MB for the CNN's second conv) outside the caches, twice per step.
// A 1x1 window with stride 1 and no padding reads x_n / writes dx_n as the columns directly.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/blas_core.h"
#include "backends/cpu/conv_gemm.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

// One convolution's sizes: image [N, C, H, W], output [N, O, Ho, Wo], weight [O, C, kh, kw].
struct Conv {
  int64_t n, c, h, w, o, ho, wo;
  WindowAttrs a;
  int64_t l() const { return ho * wo; }
  int64_t ckk() const { return c * a.kh() * a.kw(); }
  int64_t image() const { return c * h * w; }
  // The columns of a sample are the sample itself.
  bool direct() const {
    return a.kh() == 1 && a.kw() == 1 && a.ph() == 0 && a.pw() == 0 && a.sh() == 1 &&
           a.sw() == 1 && a.eh() == 0 && a.ew() == 0;
  }
  // Samples per pool chunk: at least ~4 MFLOP of GEMM, so small convolutions stay inline.
  int64_t grain() const {
    return std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(1, 2 * o * ckk() * l()));
  }
};

// The image zero-padded to exactly what the windows read: [C, Hp, Wp] with
// Hp = (Ho-1)*sh + (kh-1)*dh + 1 (input rows past it are read by no window). Every column row
// is then a plain copy of Wo elements (stride 1) with no edge tests, which short rows (the
// CNN's 14-wide images) need: per-row memcpy calls and fills cost more than the copies.
struct Padded {
  int64_t hp, wp;
  explicit Padded(const Conv& g)
      : hp((g.ho - 1) * g.a.sh() + (g.a.kh() - 1) * g.a.dh() + 1),
        wp((g.wo - 1) * g.a.sw() + (g.a.kw() - 1) * g.a.dw() + 1) {}
  int64_t size(const Conv& g) const { return g.c * hp * wp; }
};

// Rows of n elements: dst = src, dst += src; 8-wide AVX2 with a scalar tail for float
// (vmaskmovps is microcoded on AMD: masked tails made im2col half as slow as the GEMM).
inline void copy_row(float* __restrict d, const float* __restrict s, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(d + k, _mm256_loadu_ps(s + k));
  for (; k < n; ++k) d[k] = s[k];
}
// The same, but whole 8-wide vectors: it reads and writes up to 7 elements past the row.
// For column rows written in increasing order (the next row overwrites the overrun) into a
// buffer with kSlack elements to spare, from a source with as many readable.
constexpr int64_t kSlack = 8;
inline void copy_row_over(float* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t k = 0; k < n; k += 8) _mm256_storeu_ps(d + k, _mm256_loadu_ps(s + k));
}
inline void add_row(float* __restrict d, const float* __restrict s, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(d + k, _mm256_add_ps(_mm256_loadu_ps(d + k), _mm256_loadu_ps(s + k)));
  for (; k < n; ++k) d[k] += s[k];
}
inline void copy_row(double* __restrict d, const double* __restrict s, int64_t n) {
  for (int64_t k = 0; k < n; ++k) d[k] = s[k];
}
inline void copy_row_over(double* __restrict d, const double* __restrict s, int64_t n) {
  copy_row(d, s, n);
}
inline void add_row(double* __restrict d, const double* __restrict s, int64_t n) {
  for (int64_t k = 0; k < n; ++k) d[k] += s[k];
}

// cols [C*kh*kw, L] of one sample x [C, H, W] (zero padding), through xp [C, Hp, Wp].
template <typename T>
void im2col(const Conv& g, const Padded& p, const T* x, T* xp, T* cols) {
  const WindowAttrs& a = g.a;
  const int64_t l = g.l();
  const int64_t rows = std::clamp<int64_t>(p.hp - a.ph(), 0, g.h);
  const int64_t width = std::clamp<int64_t>(p.wp - a.pw(), 0, g.w);
  std::fill(xp, xp + p.size(g), T(0));
  for (int64_t ch = 0; ch < g.c; ++ch)
    for (int64_t y = 0; y < rows; ++y)
      copy_row(xp + (ch * p.hp + y + a.ph()) * p.wp + a.pw(), x + (ch * g.h + y) * g.w, width);
  for (int64_t ch = 0; ch < g.c; ++ch)
    for (int64_t i = 0; i < a.kh(); ++i)
      for (int64_t j = 0; j < a.kw(); ++j) {
        T* row = cols + ((ch * a.kh() + i) * a.kw() + j) * l;
        const T* src = xp + (ch * p.hp + i * a.dh()) * p.wp + j * a.dw();
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const T* s = src + oh * a.sh() * p.wp;
          T* r = row + oh * g.wo;
          if (a.sw() == 1) {
            copy_row_over(r, s, g.wo);
          } else {
            for (int64_t ow = 0; ow < g.wo; ++ow) r[ow] = s[ow * a.sw()];
          }
        }
      }
}

// dx [C, H, W] of one sample = the sum of its columns' entries (padding gets none), summed
// in xp [C, Hp, Wp] and copied out (input positions no window reads get 0).
template <typename T>
void col2im(const Conv& g, const Padded& p, const T* cols, T* xp, T* dx) {
  const WindowAttrs& a = g.a;
  const int64_t l = g.l();
  std::fill(xp, xp + p.size(g), T(0));
  for (int64_t ch = 0; ch < g.c; ++ch)
    for (int64_t i = 0; i < a.kh(); ++i)
      for (int64_t j = 0; j < a.kw(); ++j) {
        const T* row = cols + ((ch * a.kh() + i) * a.kw() + j) * l;
        T* dst = xp + (ch * p.hp + i * a.dh()) * p.wp + j * a.dw();
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          T* d = dst + oh * a.sh() * p.wp;
          const T* r = row + oh * g.wo;
          if (a.sw() == 1) {
            add_row(d, r, g.wo);
          } else {
            for (int64_t ow = 0; ow < g.wo; ++ow) d[ow * a.sw()] += r[ow];
          }
        }
      }
  const int64_t rows = std::clamp<int64_t>(p.hp - a.ph(), 0, g.h);
  const int64_t width = std::clamp<int64_t>(p.wp - a.pw(), 0, g.w);
  for (int64_t ch = 0; ch < g.c; ++ch)
    for (int64_t y = 0; y < g.h; ++y) {
      T* d = dx + (ch * g.h + y) * g.w;
      if (y >= rows) {
        std::fill(d, d + g.w, T(0));
        continue;
      }
      copy_row(d, xp + (ch * p.hp + y + a.ph()) * p.wp + a.pw(), width);
      std::fill(d + width, d + g.w, T(0));
    }
}

// Row-major C[m, n] = A[m, k] B[k, n] (+ beta C), single-threaded (inside a pool task).
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  auto t = [](bool x) { return x ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// This thread's buffers (the columns, then the padded image), grown to `n` elements and
// kept: no allocation per call once the largest convolution has run.
template <typename T>
T* scratch_buffer(int64_t n) {
  thread_local std::vector<T> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}
template <typename T>
struct Buffers {
  T* cols = nullptr;
  T* xp = nullptr;
  Buffers(const Conv& g, const Padded& p) {
    if (g.direct()) return;
    cols = scratch_buffer<T>(g.ckk() * g.l() + p.size(g) + 2 * kSlack);
    xp = cols + g.ckk() * g.l() + kSlack;
  }
};

DeviceData contiguous(Env& env, int slot) {
  DeviceData d = env.get(slot);
  return d.is_contiguous() ? d : make_contiguous(env, d, d.dtype);
}

void prepare_blas() {
  ensure_blas_core();
  blas_single_threaded();
}

// wt: W^T [CKK, O] for conv_gemm (float on AVX-512), else null (OpenBLAS).
template <typename T>
void forward(const Conv& g, const T* x, const T* w, const T* wt, const T* b, T* y) {
  const int64_t l = g.l(), ckk = g.ckk();
  const Padded p(g);
  parallel_for(g.n, g.grain(), [&](int64_t n0, int64_t n1) {
    const Buffers<T> buf(g, p);
    T* cols = buf.cols;
    for (int64_t s = n0; s < n1; ++s) {
      const T* xs = x + s * g.image();
      T* ys = y + s * g.o * l;
      if (!g.direct()) im2col(g, p, xs, buf.xp, cols);
      const T* bs = g.direct() ? xs : cols;
      if constexpr (std::is_same_v<T, float>) {
        if (wt != nullptr) {
          conv_gemm(g.o, l, ckk, wt, g.o, bs, l, ys, l, b);
          continue;
        }
      }
      if (b != nullptr)
        for (int64_t oc = 0; oc < g.o; ++oc) std::fill(ys + oc * l, ys + (oc + 1) * l, b[oc]);
      gemm<T>(false, false, g.o, l, ckk, w, ckk, bs, l, b != nullptr ? T(1) : T(0), ys, l);
    }
  });
}

template <typename T>
void input_grad(const Conv& g, const T* dy, const T* w, T* dx) {
  const int64_t l = g.l(), ckk = g.ckk();
  const Padded p(g);
  parallel_for(g.n, g.grain(), [&](int64_t n0, int64_t n1) {
    const Buffers<T> buf(g, p);
    T* cols = buf.cols;
    for (int64_t s = n0; s < n1; ++s) {
      const T* dys = dy + s * g.o * l;
      T* dxs = dx + s * g.image();
      T* dc = g.direct() ? dxs : cols;
      bool done = false;
      if constexpr (std::is_same_v<T, float>) {
        if (conv_gemm_available()) {  // W [O, CKK] is already the transposed left operand
          conv_gemm(ckk, l, g.o, w, ckk, dys, l, dc, l, nullptr);
          done = true;
        }
      }
      if (!done) gemm<T>(true, false, ckk, l, g.o, w, ckk, dys, l, T(0), dc, l);
      if (!g.direct()) col2im(g, p, cols, buf.xp, dxs);
    }
  });
}

template <typename T>
void weight_grad(Env& env, const Conv& g, const T* dy, const T* x, T* dw) {
  const int64_t l = g.l(), ckk = g.ckk(), size = g.o * ckk;
  const Padded p(g);
  // Fixed sample ranges, one accumulator each: range 0 writes dw, the others scratch.
  const int64_t parts =
      std::clamp<int64_t>(std::min<int64_t>(num_threads(), g.n / g.grain()), 1, g.n);
  DeviceData scratch;
  if (parts > 1) scratch = env.alloc({parts - 1, size}, std::is_same_v<T, float> ? kFloat32 : kFloat64);
  T* acc0 = parts > 1 ? scratch.data<T>() : nullptr;
  parallel_for(parts, 1, [&](int64_t q0, int64_t q1) {
    const Buffers<T> buf(g, p);
    T* cols = buf.cols;
    for (int64_t q = q0; q < q1; ++q) {
      T* acc = q == 0 ? dw : acc0 + (q - 1) * size;
      const int64_t s0 = g.n * q / parts, s1 = g.n * (q + 1) / parts;
      for (int64_t s = s0; s < s1; ++s) {
        const T* xs = x + s * g.image();
        if (!g.direct()) im2col(g, p, xs, buf.xp, cols);
        gemm<T>(false, true, g.o, ckk, l, dy + s * g.o * l, l, g.direct() ? xs : cols, l,
                s == s0 ? T(0) : T(1), acc, ckk);
      }
    }
  });
  for (int64_t q = 1; q < parts; ++q) {
    const T* src = acc0 + (q - 1) * size;
    for (int64_t i = 0; i < size; ++i) dw[i] += src[i];
  }
}

template <typename F>
absl::Status by_dtype(DType t, F f) {
  if (t == DType::kFloat32) {
    f(float{});
  } else if (t == DType::kFloat64) {
    f(double{});
  } else {
    return absl::InternalError("cpu backend: conv kernels take float32 or float64");
  }
  return absl::OkStatus();
}

absl::Status run_conv_forward(Env& env, const Instr& in) {
  DeviceData x = contiguous(env, in.in[0]), w = contiguous(env, in.in[1]);
  DeviceData b;
  if (in.in.size() > 2) b = contiguous(env, in.in[2]);
  const Shape& xs = x.layout.shape;
  const Conv g{xs[0], xs[1], xs[2], xs[3], in.shape[1], in.shape[2], in.shape[3],
               WindowAttrs::of(in.attrs)};
  DeviceData& y = env.alloc_to(in.out, in.shape, in.dtype);
  if (numel(in.shape) == 0) return absl::OkStatus();
  prepare_blas();
  // conv_gemm reads W transposed: [CKK, O], once per call (shared by the tasks).
  DeviceData wt;
  if (in.dtype == DType::kFloat32 && conv_gemm_available()) {
    wt = env.alloc({g.ckk(), g.o}, in.dtype);
    const float* src = w.data<float>();
    float* dst = wt.data<float>();
    for (int64_t oc = 0; oc < g.o; ++oc)
      for (int64_t k = 0; k < g.ckk(); ++k) dst[k * g.o + oc] = src[oc * g.ckk() + k];
  }
  return by_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    forward<T>(g, x.data<T>(), w.data<T>(), wt.storage ? wt.data<T>() : nullptr,
               b.storage ? b.data<T>() : nullptr, y.data<T>());
  });
}

absl::Status run_conv_input_grad(Env& env, const Instr& in) {
  DeviceData dy = contiguous(env, in.in[0]), w = contiguous(env, in.in[1]);
  const Shape& ys = dy.layout.shape;
  const Conv g{in.shape[0], in.shape[1], in.shape[2], in.shape[3], ys[1], ys[2], ys[3],
               WindowAttrs::of(in.attrs)};
  DeviceData& dx = env.alloc_to(in.out, in.shape, in.dtype);
  if (numel(in.shape) == 0) return absl::OkStatus();
  prepare_blas();
  return by_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    if (g.o == 0) {
      std::fill(dx.data<T>(), dx.data<T>() + numel(in.shape), T(0));
      return;
    }
    input_grad<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
}

absl::Status run_conv_weight_grad(Env& env, const Instr& in) {
  DeviceData dy = contiguous(env, in.in[0]), x = contiguous(env, in.in[1]);
  const Shape& xs = x.layout.shape;
  const Shape& ys = dy.layout.shape;
  const Conv g{xs[0], xs[1], xs[2], xs[3], ys[1], ys[2], ys[3], WindowAttrs::of(in.attrs)};
  DeviceData& dw = env.alloc_to(in.out, in.shape, in.dtype);
  if (numel(in.shape) == 0) return absl::OkStatus();
  prepare_blas();
  return by_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    if (g.n == 0) {
      std::fill(dw.data<T>(), dw.data<T>() + numel(in.shape), T(0));
      return;
    }
    weight_grad<T>(env, g, dy.data<T>(), x.data<T>(), dw.data<T>());
  });
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kConvForward, run_conv_forward);
SLOTH_CPU_OP_KERNEL(kConvInputGrad, run_conv_input_grad);
SLOTH_CPU_OP_KERNEL(kConvWeightGrad, run_conv_weight_grad);

}  // namespace sloth::cpu
