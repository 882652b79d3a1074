// Small float GEMMs without OpenBLAS: C = op(A) * op(B), row-major, for the products of a
// small training step that OpenBLAS does slower. With AVX-512: a Linear's forward x @ W^T for a
// small batch (1.2-1.6x), and one-row or one-column products (GEMVs). With AVX2 only
// (small_gemm_avx2.cc), where OpenBLAS takes its general path (a beta pass and packing of both
// operands): every product up to 64^3 multiply-adds.
// benchmarks/small_gemm_bench.cc compares each shape; everything else stays with OpenBLAS.
#pragma once

#include <cstdint>

namespace sloth::cpu {

// Whether small_sgemm takes this product (m*n*k small, a shape it was measured faster on, with
// the CPU's kernels: AVX-512, else AVX2); otherwise the caller uses the BLAS.
bool small_sgemm_takes(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

// C (m x n, row stride n) = op(A) * op(B): op(A) is m x k, stored k x m when ta (row stride
// lda); op(B) is k x n, stored n x k when tb (row stride ldb). Needs m, n, k >= 1 and
// small_sgemm_takes(ta, tb, m, n, k). Sums in float32 with FMA: in k order, or for a one-column
// (one-row) product in 16 interleaved partial sums.
void small_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c);

// The AVX2 + FMA kernels small_sgemm runs on CPUs without AVX-512 (callable directly by tests
// and benchmarks on CPUs with both). Same contract; a one-column product sums in 8 interleaved
// partial sums (or in k order when A is stored transposed).
bool small_sgemm_avx2_takes(bool ta, bool tb, int64_t m, int64_t n, int64_t k);
void small_sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float* c);

}  // namespace sloth::cpu
