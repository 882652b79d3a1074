// The built-in small float GEMM (backends/cpu/small_gemm.h) against a float64 reference, for
// every transpose variant, the shapes of a small training step and odd sizes (row and column
// tails, single rows and columns, k = 1), with leading dimensions wider than the matrix.
#include "backends/cpu/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace sloth::cpu {
namespace {

struct Case {
  int64_t m, n, k;
};

// C = op(A) op(B) for stored A (ta: k x m) and B (tb: n x k) with row strides lda, ldb.
// impl: the CPU's own choice (small_sgemm: AVX-512 where the CPU has it), or the AVX2 kernels.
enum class Impl { kDispatch, kAvx2 };

void check(const Case& cs, bool ta, bool tb, int64_t pad, Impl impl = Impl::kDispatch) {
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad;
  const int64_t arows = ta ? k : m, brows = tb ? n : k;
  std::mt19937 gen(static_cast<uint32_t>(m * 1000003 + n * 1009 + k * 7 + ta * 2 + tb));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(arows * lda), b(brows * ldb), c(m * n, 123.f);
  for (float& x : a) x = u(gen);
  for (float& x : b) x = u(gen);
  // Every shape is checked, including those matmul.cc leaves to OpenBLAS.
  if (impl == Impl::kAvx2) small_sgemm_avx2(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data());
  else small_sgemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * lda + i] : a[i * lda + p];
        const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
        ref += x * y;
        mag += std::fabs(x * y);
      }
      // float32 accumulation: at most ~k roundings of the running sum's magnitude.
      ASSERT_NEAR(c[i * n + j], ref, 1e-6 * (mag + 1e-3) * (k + 1))
          << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb << " pad=" << pad
          << (impl == Impl::kAvx2 ? " (AVX2 kernels)" : "")
          << " at (" << i << ", " << j << ")";
    }
}

const Case kCases[] = {
      // a tiny MLP's step (batch 16, 32-64-64-1): forward, input and weight gradients
      {16, 64, 32}, {16, 64, 64}, {16, 1, 64}, {16, 64, 1}, {1, 64, 16}, {64, 64, 16}, {64, 32, 16},
      // odd sizes: row and column tails, k not a multiple of 16, single rows and columns
      {1, 1, 1}, {1, 1, 37}, {1, 70, 3}, {70, 1, 3}, {5, 70, 3}, {15, 17, 33}, {3, 3, 3},
      {24, 40, 50}, {48, 40, 50}, {10, 128, 128}, {128, 10, 128}, {128, 128, 10}, {7, 65, 1},
      {31, 31, 31}, {2, 200, 17}, {200, 2, 17},
      // x @ W^T with n, k multiples of 16 (W transposed, blocks of 4 rows x 64 columns): row
      // tails of 1-3, last column panels of 16 and 48
      {6, 48, 16}, {9, 80, 48}, {4, 16, 16}, {3, 128, 32},
      // x @ W^T with W's row stride fixed at compile time (16..64): with pad 3, k below it
      // and not a multiple of 16, a second block of 4 rows
      {16, 32, 29}, {20, 64, 61}, {16, 16, 13}, {2, 48, 45}};

TEST(SmallGemm, MatchesFloat64ReferenceForEveryTransposeAndSize) {
  // sloth is built with -mavx2 -mfma (.bazelrc), so the AVX2 kernels run on every CPU it
  // runs on; the dispatching entry is AVX-512 code where the CPU has it, else the same.
  for (Impl impl : {Impl::kDispatch, Impl::kAvx2})
    for (const Case& cs : kCases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (int64_t pad : {0, 3}) check(cs, ta, tb, pad, impl);
}

TEST(SmallGemm, TakesOnlyTheShapesMeasuredFaster) {
  EXPECT_FALSE(small_sgemm_takes(false, true, 128, 256, 784));
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    EXPECT_FALSE(small_sgemm_takes(false, true, 64, 64, 64));  // 64^3: OpenBLAS packs profitably
    EXPECT_FALSE(small_sgemm_takes(false, true, 17, 33, 29));  // a 1-row last block
    EXPECT_FALSE(small_sgemm_takes(false, false, 16, 64, 64));  // OpenBLAS's nn is faster
    EXPECT_FALSE(small_sgemm_takes(true, false, 64, 64, 16));   // and its nt
    EXPECT_TRUE(small_sgemm_takes(false, true, 16, 64, 64));  // a Linear's forward
    EXPECT_TRUE(small_sgemm_takes(false, false, 17, 1, 29));  // a GEMV
    EXPECT_TRUE(small_sgemm_takes(true, true, 1, 64, 16));    // a GEMV
    EXPECT_TRUE(small_sgemm_takes(true, false, 1, 64, 16));   // one row along B's rows
    EXPECT_FALSE(small_sgemm_takes(false, true, 24, 40, 50));
    EXPECT_TRUE(small_sgemm_takes(false, true, 128, 10, 128));
  } else {
    // AVX2 only: OpenBLAS's general path (a beta pass, both operands packed) loses on every
    // product up to 64^3, in each layout.
    EXPECT_TRUE(small_sgemm_takes(false, false, 16, 64, 64));
    EXPECT_TRUE(small_sgemm_takes(true, false, 64, 64, 16));
    EXPECT_TRUE(small_sgemm_takes(false, true, 64, 64, 64));
    EXPECT_TRUE(small_sgemm_takes(false, false, 128, 128, 10));
    EXPECT_FALSE(small_sgemm_takes(false, false, 64, 64, 65));
  }
  // The AVX2 rule itself, whatever the CPU (sloth requires AVX2 and FMA).
  EXPECT_TRUE(small_sgemm_avx2_takes(true, true, 1, 1, 1));
  EXPECT_TRUE(small_sgemm_avx2_takes(true, false, 10, 128, 128));
  EXPECT_FALSE(small_sgemm_avx2_takes(false, true, 128, 256, 784));
}

}  // namespace
}  // namespace sloth::cpu
