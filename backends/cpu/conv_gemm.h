// The float GEMM of conv2d's kernels (backends/cpu/conv.cc) on AVX-512: C = At^T B (+ bias per
// row), with A given transposed ([K, M] row-major: the forward packs W^T once per call, the
// input gradient reads W as it is) and B the sample's columns or gradient in place. Per
// sample the shapes are small (the CNN's second conv: 64 x 196 x 288), where OpenBLAS spent
// a third of its time packing both operands on every call; this kernel packs nothing.
#pragma once

#include <cstdint>

namespace sloth::cpu {

// Whether conv_gemm can run here (the CPU has AVX-512F).
bool conv_gemm_available();

// C[M, N] (row stride ldc) = At[K, M]^T B[K, N] (+ bias[m] on row m when bias is not null).
void conv_gemm(int64_t m, int64_t n, int64_t k, const float* at, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, const float* bias);

}  // namespace sloth::cpu
