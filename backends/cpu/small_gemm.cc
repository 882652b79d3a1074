#include "backends/cpu/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

namespace sloth::cpu {
namespace {

#define SLOTH_AVX512 __attribute__((target("avx512f,fma")))

// Products up to 64^3 multiply-adds; above it OpenBLAS's packing pays for itself.
constexpr int64_t kSmallWork = 64 * 64 * 64;

// In-register 16x16 transpose: lane j of r[i] moves to lane i of r[j].
SLOTH_AVX512 inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int q = 0; q < 4; ++q) {
      t[8 * i + q] = _mm512_shuffle_f32x4(r[8 * i + q], r[8 * i + 4 + q], 0x88);
      t[8 * i + 4 + q] = _mm512_shuffle_f32x4(r[8 * i + q], r[8 * i + 4 + q], 0xDD);
    }
  for (int q = 0; q < 8; ++q) {
    r[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
  }
}

inline __mmask16 first(int64_t w) {
  return w >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << w) - 1);
}

// One 16x16 tile of C, computed transposed: acc[r] holds column j0+r of C for 16 rows (one
// vector), += B(p, j0+r) (a broadcast) * op(A)^T's row p. `at` holds op(A)^T's rows for this
// row block (stride ldat, `mi` masks rows past m); B(p, j) is b[j * sbj + p * sbp]. The 16
// accumulators are transposed in registers and stored as rows of C (jr columns, iw rows).
// One vector load and 16 broadcast-FMAs per p: no packing of B in either layout.
SLOTH_AVX512 inline __attribute__((always_inline)) void tile16(const float* at, int64_t ldat, __mmask16 mi, const float* b,
                         int64_t sbj, int64_t sbp, int64_t k, int jr, float* c, int64_t ldc,
                         int iw) {
  __m512 acc[16];
  const float* br[16];
  for (int r = 0; r < 16; ++r) {
    acc[r] = _mm512_setzero_ps();
    br[r] = b + (r < jr ? r : 0) * sbj;  // rows past n repeat column j0 (never stored)
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m512 av = _mm512_maskz_loadu_ps(mi, at + p * ldat);
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(br[r][p * sbp]), av, acc[r]);
  }
  transpose16(acc);
  const __mmask16 mj = first(jr);
  for (int i = 0; i < iw; ++i) _mm512_mask_storeu_ps(c + i * ldc, mj, acc[i]);
}

// Rows [i0, i0 + iw) of A (m x k, row stride lda) transposed into pk (k x 16, zeros past iw):
// 16x16 register transposes for whole blocks of 16 rows, scalar for a k tail or a last block.
SLOTH_AVX512 inline __attribute__((always_inline)) void pack_at16(const float* a, int64_t lda,
                                                                int64_t i0, int iw, int64_t k,
                                                                float* pk) {
  int64_t p0 = 0;
  if (iw == 16)
    for (; p0 + 16 <= k; p0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(a + (i0 + i) * lda + p0);
      transpose16(r);
      for (int q = 0; q < 16; ++q) _mm512_storeu_ps(pk + (p0 + q) * 16, r[q]);
    }
  for (int64_t p = p0; p < k; ++p)
    for (int i = 0; i < 16; ++i) pk[p * 16 + i] = i < iw ? a[(i0 + i) * lda + p] : 0.f;
}

// The general case: blocks of 16 rows of C; op(A)^T is read in place when A is stored
// transposed (ta), else packed per block (16x16 register transposes, scalar for a k tail).
SLOTH_AVX512 void gemm_tiles(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                             int64_t lda, const float* b, int64_t ldb, float* c) {
  thread_local std::vector<float> pack;
  if (!ta && pack.size() < static_cast<size_t>(k * 16)) pack.resize(k * 16);
  const int64_t sbj = tb ? ldb : 1, sbp = tb ? 1 : ldb;
  for (int64_t i0 = 0; i0 < m; i0 += 16) {
    const int iw = static_cast<int>(std::min<int64_t>(16, m - i0));
    const __mmask16 mi = first(iw);
    const float* at = a + i0;
    int64_t ldat = lda;
    if (!ta) {
      pack_at16(a, lda, i0, iw, k, pack.data());
      at = pack.data();
      ldat = 16;
    }
    for (int64_t j0 = 0; j0 < n; j0 += 16)
      tile16(at, ldat, mi, b + j0 * sbj, sbj, sbp, k, static_cast<int>(std::min<int64_t>(16, n - j0)),
             c + i0 * n + j0, n, iw);
  }
}

// x @ W^T (B stored n x k with row stride LDB, n a multiple of 16) as gemm_tiles computes it,
// with LDB fixed at compile time: the 16 broadcasts of B(p, j0..j0+15) are one base pointer
// plus constant displacements, so each folds into its FMA as an embedded-broadcast operand
// (no pointer per column kept in registers or spilled). No transpose of B: only op(A)^T is
// packed (k/16 register transposes per 16 rows) and each 16x16 tile of C is transposed once.
template <int LDB>
SLOTH_AVX512 void gemm_bcast_bt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                const float* b, float* c) {
  thread_local std::vector<float> pack;
  if (pack.size() < static_cast<size_t>(k * 16)) pack.resize(k * 16);
  float* pk = pack.data();
  for (int64_t i0 = 0; i0 < m; i0 += 16) {
    const int iw = static_cast<int>(std::min<int64_t>(16, m - i0));
    pack_at16(a, lda, i0, iw, k, pk);
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      const float* bj = b + j0 * LDB;
      __m512 acc[16];
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t p = 0; p < k; ++p) {
        const __m512 av = _mm512_loadu_ps(pk + p * 16);
        for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(bj[r * LDB + p]), av, acc[r]);
      }
      transpose16(acc);
      for (int i = 0; i < iw; ++i) _mm512_storeu_ps(c + (i0 + i) * n + j0, acc[i]);
    }
  }
}

// B stored n x k (tb) into bt = B^T (k x n, row stride n) by 16x16 register transposes; n and
// k are multiples of 16.
SLOTH_AVX512 void transpose_b(int64_t n, int64_t k, const float* b, int64_t ldb, float* bt) {
  for (int64_t j0 = 0; j0 < n; j0 += 16)
    for (int64_t p0 = 0; p0 < k; p0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(b + (j0 + i) * ldb + p0);
      transpose16(r);
      for (int q = 0; q < 16; ++q) _mm512_storeu_ps(bt + (p0 + q) * n + j0, r[q]);
    }
}

// C (m x n) = A (m x k, row stride lda) * Bt (k x n, row stride n), columns [j0, j0 + 16 NV),
// in blocks of 4 rows: per p, NV vector loads of Bt's row and 4 broadcasts of A for 4 NV FMAs
// (tile16 needs 17 loads for 16), and no transpose of C. NV is a template argument so that
// the accumulators stay in registers.
template <int NV>
SLOTH_AVX512 void rows_times_bt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                const float* bt, int64_t j0, float* c, bool accumulate) {
  for (int64_t i0 = 0; i0 < m; i0 += 4) {
    const int ir = static_cast<int>(std::min<int64_t>(4, m - i0));
    const float* ar[4];
    for (int i = 0; i < 4; ++i) ar[i] = a + (i0 + (i < ir ? i : 0)) * lda;  // rows past m repeat
    __m512 acc[4][NV];
    for (int i = 0; i < 4; ++i)
      for (int v = 0; v < NV; ++v)
        acc[i][v] = accumulate && i < ir ? _mm512_loadu_ps(c + (i0 + i) * n + j0 + 16 * v)
                                         : _mm512_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
      const float* br = bt + p * n + j0;
      __m512 bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(br + 16 * v);
      for (int i = 0; i < 4; ++i) {
        const __m512 av = _mm512_set1_ps(ar[i][p]);
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < ir; ++i)
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + (i0 + i) * n + j0 + 16 * v, acc[i][v]);
  }
}

// x @ W^T with n and k multiples of 16 (a Linear's forward): B transposed 16 k at a time into
// a small buffer that stays in L1 (one transpose of all of B stalled on its stores' cache
// misses: the step's other data evicts the buffer between calls), each slice multiplied in
// and summed into C, in k order as in one pass (C's float32 partial sums are stored exactly).
// At 16 x 64 x {32, 64}: ~1.3-1.5x faster than gemm_tiles, whose 16 broadcasts per vector
// load keep the load ports, not the FMAs, busy (each through a pointer of its own). Used
// where W's row stride is not one gemm_bcast_bt is built for.
SLOTH_AVX512 void gemm_packed_bt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                 const float* b, int64_t ldb, float* c) {
  thread_local std::vector<float> bt;
  if (bt.size() < static_cast<size_t>(16 * n)) bt.resize(16 * n);
  for (int64_t p0 = 0; p0 < k; p0 += 16) {
    transpose_b(n, 16, b + p0, ldb, bt.data());
    const float* ap = a + p0;
    const bool acc = p0 > 0;
    int64_t j0 = 0;
    for (; j0 + 64 <= n; j0 += 64) rows_times_bt<4>(m, n, 16, ap, lda, bt.data(), j0, c, acc);
    switch ((n - j0) / 16) {  // a last panel of 16, 32 or 48 columns
      case 1: rows_times_bt<1>(m, n, 16, ap, lda, bt.data(), j0, c, acc); break;
      case 2: rows_times_bt<2>(m, n, 16, ap, lda, bt.data(), j0, c, acc); break;
      case 3: rows_times_bt<3>(m, n, 16, ap, lda, bt.data(), j0, c, acc); break;
      default: break;
    }
  }
}

// y[r] = sum_p M[r * ldm + p] * x[p * sx] for r < rows: a one-column (or one-row) product.
SLOTH_AVX512 void gemv(int64_t rows, int64_t k, const float* mat, int64_t ldm, const float* x,
                       int64_t sx, float* y, int64_t sy) {
  if (sx != 1) {
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0.f;
      for (int64_t p = 0; p < k; ++p) s = __builtin_fmaf(mat[r * ldm + p], x[p * sx], s);
      y[r * sy] = s;
    }
    return;
  }
  const int64_t kv = k / 16 * 16;
  const __mmask16 tail = first(k - kv);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = mat + r * ldm;
    __m512 s = _mm512_setzero_ps();
    for (int64_t p = 0; p < kv; p += 16)
      s = _mm512_fmadd_ps(_mm512_loadu_ps(row + p), _mm512_loadu_ps(x + p), s);
    if (kv < k)
      s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row + kv), _mm512_maskz_loadu_ps(tail, x + kv), s);
    y[r * sy] = _mm512_reduce_add_ps(s);
  }
}

// One row of C with B stored row-major: C[0, :] = sum_p A(0, p) * B[p, :], vectors along n.
SLOTH_AVX512 void row_times_b(int64_t n, int64_t k, const float* a, int64_t sa, const float* b,
                              int64_t ldb, float* c) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    const int64_t w = std::min<int64_t>(64, n - j0);
    __mmask16 mk[4];
    __m512 acc[4];
    for (int v = 0; v < 4; ++v) {
      mk[v] = first(std::max<int64_t>(0, w - 16 * v));
      acc[v] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < k; ++p) {
      const __m512 av = _mm512_set1_ps(a[p * sa]);
      const float* br = b + p * ldb + j0;
      for (int v = 0; v < 4; ++v)
        acc[v] = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(mk[v], br + 16 * v), acc[v]);
    }
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(c + j0 + 16 * v, mk[v], acc[v]);
  }
}

bool has_avx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return avx512;
}

}  // namespace

bool small_sgemm_takes(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  if (!has_avx512()) return small_sgemm_avx2_takes(ta, tb, m, n, k);
  if (m * n * k >= kSmallWork) return false;
  // One row or column: a GEMV, which OpenBLAS's GEMM entry does not special-case. One row
  // times a row-major B (the weight gradient of a Linear with one output, dY^T @ x,
  // 1 x 64 x 16: 57 vs 72 ns) runs along B's rows.
  if ((n == 1 && !ta) || m == 1) return true;
  // x @ W^T (A row-major, B stored n x k: a Linear's forward): OpenBLAS's small "tn" kernel
  // was 1.2-1.6x slower. Its "nn" and "nt" kernels (a Linear's input and weight gradients)
  // beat this kernel, so those stay with OpenBLAS; so do row counts that leave a partial
  // block of 16 after full ones (24 x 40 x 50 was 1.25x slower here).
  return tb && !ta && (m <= 16 || m % 16 == 0);
}

void small_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c) {
  if (!has_avx512()) return small_sgemm_avx2(ta, tb, m, n, k, a, lda, b, ldb, c);
  if (n == 1 && !ta) {  // C[i] = A's row i . B's only column
    gemv(m, k, a, lda, b, tb ? 1 : ldb, c, 1);
  } else if (m == 1 && tb) {  // C[j] = B's row j . A's only row
    gemv(n, k, b, ldb, a, ta ? lda : 1, c, 1);
  } else if (m == 1) {
    row_times_b(n, k, a, ta ? lda : 1, b, ldb, c);
  } else if (!ta && tb && n % 16 == 0 && ldb % 16 == 0 && ldb <= 64) {
    // 16 x 64 x {32, 64}: 1.2-1.3x faster than gemm_packed_bt (small_gemm_bench).
    switch (ldb) {
      case 16: gemm_bcast_bt<16>(m, n, k, a, lda, b, c); break;
      case 32: gemm_bcast_bt<32>(m, n, k, a, lda, b, c); break;
      case 48: gemm_bcast_bt<48>(m, n, k, a, lda, b, c); break;
      default: gemm_bcast_bt<64>(m, n, k, a, lda, b, c); break;
    }
  } else if (!ta && tb && n % 16 == 0 && k % 16 == 0) {
    gemm_packed_bt(m, n, k, a, lda, b, ldb, c);
  } else {
    gemm_tiles(ta, tb, m, n, k, a, lda, b, ldb, c);
  }
}

}  // namespace sloth::cpu
