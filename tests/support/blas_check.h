// The checks shared by the tests of OpenBLAS's core selection (perf_math_test runs with
// OPENBLAS_CORETYPE forced, blas_core_test without it): GEMMs stay right whichever core runs
// them, and which cores count as the CPU's AVX-512 ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth::testing {

// A 67 x 301 x 129 float matmul (large enough for OpenBLAS, not small_gemm) against float64.
inline void expect_blas_matmul_right() {
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
}

// Whether this CPU has the AVX-512 subsets OpenBLAS's SkylakeX kernels use.
inline bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

inline bool is_avx512_core(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

}  // namespace sloth::testing
