// small_sgemm's kernels for CPUs without AVX-512 (AVX2 + FMA: Zen 1-3, Haswell to Comet Lake).
// OpenBLAS runs a small product through its general path there: it scales C by beta in a pass
// of its own and packs both operands, which for a 16 x 64 x 64 product costs as much as the
// multiply-adds (perf on Zen 3: sgemm_beta 15% and the four copy routines 13% of a tiny MLP's
// jitted step, against 34% in the GEMM kernel). These kernels write C once and pack only a
// transposed B (an L1-sized copy).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/small_gemm.h"

namespace sloth::cpu {
namespace {

#define SLOTH_AVX2 __attribute__((target("avx2,fma")))
#define SLOTH_ALWAYS_INLINE inline __attribute__((always_inline))

// Products up to 64^3 multiply-adds (inclusive). On Zen 3 these kernels were 1.2-4x faster than
// OpenBLAS on every product measured up to there (small_gemm_bench: a tiny MLP's eight products
// 7.6 vs 13.6 us in all; 64^3 1.3-1.4x in each layout; the main job's 128 x 10 x 128 1.2x,
// 10 x 128 x 128 and 128 x 128 x 10 2.2x). Larger products are left to OpenBLAS, whose packing
// pays for itself as they grow.
constexpr int64_t kAvx2SmallWork = 64 * 64 * 64;

// The first w (0..8) lanes.
SLOTH_AVX2 SLOTH_ALWAYS_INLINE __m256i first8(int w) {
  alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - w));
}

// In-register 8x8 transpose: lane j of r[i] moves to lane i of r[j].
SLOTH_AVX2 SLOTH_ALWAYS_INLINE void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x31);
  }
}

// op(B) (k x n) into bp, row-major with row stride np (n rounded up to 8), zeros past n: the
// kernel then loads whole vectors without masks. B stored n x k (tb) is transposed 8x8 in
// registers; a column tail and a k tail go element by element.
SLOTH_AVX2 void pack_b(bool tb, int64_t n, int64_t k, const float* b, int64_t ldb, float* bp,
                       int64_t np) {
  if (!tb) {
    for (int64_t p = 0; p < k; ++p) {
      std::copy(b + p * ldb, b + p * ldb + n, bp + p * np);
      std::fill(bp + p * np + n, bp + (p + 1) * np, 0.f);
    }
    return;
  }
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    int64_t p0 = 0;
    for (; p0 + 8 <= k; p0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(b + (j0 + i) * ldb + p0);
      transpose8(r);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(bp + (p0 + q) * np + j0, r[q]);
    }
    for (int64_t p = p0; p < k; ++p)
      for (int i = 0; i < 8; ++i) bp[p * np + j0 + i] = b[(j0 + i) * ldb + p];
  }
  if (j0 < n)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = j0; j < np; ++j) bp[p * np + j] = j < n ? b[j * ldb + p] : 0.f;
}

// C's rows [0, MR) and columns [0, 8 NV) of this block (`ncols` of them stored): per p, NV
// vector loads of Bp's row and MR broadcasts of A for MR x NV FMAs, summed in k order.
// A(r, p) is a[r * lda + p], or a[p * lda + r] when TA (A stored k x m).
template <bool TA, int MR, int NV>
SLOTH_AVX2 void block(int64_t k, const float* a, int64_t lda, const float* bp, int64_t ldbp,
                      float* c, int64_t ldc, int ncols) {
  __m256 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(bp + p * ldbp + 8 * v);
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(TA ? a + p * lda + r : a + r * lda + p);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  // (Unrolled, so that gcc keeps the accumulators in registers: with a loop here it keeps a
  // copy of them on the stack, stored at every p.)
  if (ncols >= 8 * NV) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
    return;
  }
  // The last vector of a row is partial: NV - 1 whole vectors before it.
  const __m256i tail = first8(ncols - 8 * (NV - 1));
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v + 1 < NV; ++v) _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
    _mm256_maskstore_ps(c + r * ldc + 8 * (NV - 1), tail, acc[r][NV - 1]);
  }
}

// Rows in blocks of 6 (12 accumulators with NV = 2: the register file's worth), the last block
// with exactly the rows left; columns in panels of 16, a last one of 8 where that covers it.
template <bool TA>
SLOTH_AVX2 void gemm_blocks(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                            const float* bp, int64_t ldbp, float* c) {
  using Fn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int);
  static constexpr Fn kWide[6] = {block<TA, 1, 2>, block<TA, 2, 2>, block<TA, 3, 2>,
                                  block<TA, 4, 2>, block<TA, 5, 2>, block<TA, 6, 2>};
  static constexpr Fn kNarrow[6] = {block<TA, 1, 1>, block<TA, 2, 1>, block<TA, 3, 1>,
                                    block<TA, 4, 1>, block<TA, 5, 1>, block<TA, 6, 1>};
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int nc = static_cast<int>(std::min<int64_t>(16, n - j0));
    const Fn* fns = nc > 8 ? kWide : kNarrow;
    for (int64_t i0 = 0; i0 < m; i0 += 6) {
      const int mr = static_cast<int>(std::min<int64_t>(6, m - i0));
      const float* ai = TA ? a + i0 : a + i0 * lda;
      fns[mr - 1](k, ai, lda, bp + j0, ldbp, c + i0 * n + j0, n, nc);
    }
  }
}

SLOTH_AVX2 SLOTH_ALWAYS_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One column of C: c[i] = sum_p op(A)(i, p) x[p] (x contiguous). A row-major: a dot product
// per row in 8 interleaved partial sums; A stored transposed (TA): vectors along C's rows.
SLOTH_AVX2 void gemv_column(bool ta, int64_t m, int64_t k, const float* a, int64_t lda,
                            const float* x, float* c) {
  if (!ta) {
    const int64_t kv = k / 8 * 8;
    const __m256i tail = first8(static_cast<int>(k - kv));
    for (int64_t i = 0; i < m; ++i) {
      const float* row = a + i * lda;
      __m256 s = _mm256_setzero_ps();
      for (int64_t p = 0; p < kv; p += 8)
        s = _mm256_fmadd_ps(_mm256_loadu_ps(row + p), _mm256_loadu_ps(x + p), s);
      if (kv < k)
        s = _mm256_fmadd_ps(_mm256_maskload_ps(row + kv, tail), _mm256_maskload_ps(x + kv, tail), s);
      c[i] = hsum(s);
    }
    return;
  }
  for (int64_t i0 = 0; i0 < m; i0 += 8) {
    const int w = static_cast<int>(std::min<int64_t>(8, m - i0));
    const __m256i mk = first8(w);
    __m256 s = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p)
      s = _mm256_fmadd_ps(_mm256_maskload_ps(a + p * lda + i0, mk), _mm256_set1_ps(x[p]), s);
    _mm256_maskstore_ps(c + i0, mk, s);
  }
}

}  // namespace

bool small_sgemm_avx2_takes(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  (void)ta;
  (void)tb;
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 && m * n * k <= kAvx2SmallWork;
}

SLOTH_AVX2 void small_sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                 const float* a, int64_t lda, const float* b, int64_t ldb,
                                 float* c) {
  thread_local std::vector<float> pack;
  if (n == 1) {
    // op(B)'s only column: contiguous when B is stored 1 x k (tb), else gathered.
    const float* x = b;
    if (!tb && k > 1) {
      if (pack.size() < static_cast<size_t>(k)) pack.resize(k);
      for (int64_t p = 0; p < k; ++p) pack[p] = b[p * ldb];
      x = pack.data();
    }
    gemv_column(ta, m, k, a, lda, x, c);
    return;
  }
  const float* bp = b;
  int64_t ldbp = ldb;
  if (tb || n % 8 != 0) {
    const int64_t np = (n + 7) / 8 * 8;
    if (pack.size() < static_cast<size_t>(k * np)) pack.resize(k * np);
    pack_b(tb, n, k, b, ldb, pack.data(), np);
    bp = pack.data();
    ldbp = np;
  }
  if (ta) gemm_blocks<true>(m, n, k, a, lda, bp, ldbp, c);
  else gemm_blocks<false>(m, n, k, a, lda, bp, ldbp, c);
}

}  // namespace sloth::cpu
