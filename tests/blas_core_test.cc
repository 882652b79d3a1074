// OpenBLAS's core selection without OPENBLAS_CORETYPE (backends/cpu/blas_core.h): on an
// AVX-512 CPU the GEMMs run an AVX-512 core even when OpenBLAS's own detection does not know
// the CPU model (virtual machines: it fell back on Prescott's SSE3 kernels, ~2x slower).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/blas_core.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

TEST(BlasCoreDetect, AvxCoreWithoutTheVariableAndMatmulRight) {
  // Bazel runs tests without the caller's environment; run by hand with it, the case is not
  // this test's.
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE is set";
  // 67 x 301 x 129: large enough for OpenBLAS (small_gemm takes only small products).
  const int64_t m = 67, k = 301, n = 129;
  std::vector<double> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(std::sin(0.37 * i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(std::cos(0.23 * i));
  const std::vector<double> c =
      matmul(tensor(a, {m, k}), tensor(b, {k, n})).to(kFloat64).to_vector<double>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[p * n + j];
      ASSERT_NEAR(c[i * n + j], want, 1e-4 * (1 + std::fabs(want))) << i << "," << j;
    }
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const std::string core = cpu::blas_core_name();
  if (avx512 && !core.empty())
    EXPECT_TRUE(core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids") << core;
  // The variable stays unset.
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
}

}  // namespace
