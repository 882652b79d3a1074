#include "backends/cpu/conv_gemm.h"

#include <immintrin.h>

#include <algorithm>

namespace sloth::cpu {
namespace {

#define SLOTH_AVX512 __attribute__((target("avx512f,fma")))

// One tile of C: MR rows x NV vectors of 16 columns (the last vector masked to `tail`
// columns). 24 accumulators at 6 x 4: per k, NV loads of B's row and MR broadcasts of At's.
template <int MR, int NV>
SLOTH_AVX512 void tile(int64_t k, const float* at, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc, const float* bias, __mmask16 tail) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m512 init = bias != nullptr ? _mm512_set1_ps(bias[r]) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = init;
  }
  for (int64_t p = 0; p < k; ++p) {
    const float* br = b + p * ldb;
    const float* ar = at + p * lda;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(tail, br + 16 * v) : _mm512_loadu_ps(br + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(ar[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* cr = c + r * ldc + 16 * v;
      if (v == NV - 1) _mm512_mask_storeu_ps(cr, tail, acc[r][v]);
      else _mm512_storeu_ps(cr, acc[r][v]);
    }
}

constexpr int kMR = 6, kNV = 4, kNR = 16 * kNV;

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                        const float*, __mmask16);
template <int MR>
constexpr TileFn pick_nv(int nv) {
  return nv == 1 ? tile<MR, 1> : nv == 2 ? tile<MR, 2> : nv == 3 ? tile<MR, 3> : tile<MR, 4>;
}
TileFn pick(int mr, int nv) {
  switch (mr) {
    case 1: return pick_nv<1>(nv);
    case 2: return pick_nv<2>(nv);
    case 3: return pick_nv<3>(nv);
    case 4: return pick_nv<4>(nv);
    case 5: return pick_nv<5>(nv);
    default: return pick_nv<6>(nv);
  }
}

}  // namespace

bool conv_gemm_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return ok;
}

void conv_gemm(int64_t m, int64_t n, int64_t k, const float* at, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, const float* bias) {
  // Column panels outer (B's [K, 64] panel stays in L1/L2 across the row tiles), row tiles inner.
  for (int64_t j0 = 0; j0 < n; j0 += kNR) {
    const int64_t cols = std::min<int64_t>(kNR, n - j0);
    const int nv = static_cast<int>((cols + 15) / 16);
    const int64_t rem = cols - 16 * (nv - 1);
    const __mmask16 tail = static_cast<__mmask16>(rem == 16 ? 0xFFFF : (1u << rem) - 1);
    for (int64_t i0 = 0; i0 < m; i0 += kMR) {
      const int mr = static_cast<int>(std::min<int64_t>(kMR, m - i0));
      pick(mr, nv)(k, at + i0, lda, b + j0, ldb, c + i0 * ldc + j0, ldc,
                   bias != nullptr ? bias + i0 : nullptr, tail);
    }
  }
}

}  // namespace sloth::cpu
