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
#include "tests/support/blas_check.h"

namespace {
using namespace sloth;

TEST(BlasCoreDetect, AvxCoreWithoutTheVariableAndMatmulRight) {
  // Bazel runs tests without the caller's environment; run by hand with it, the case is not
  // this test's.
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE is set";
  ASSERT_NO_FATAL_FAILURE(sloth::testing::expect_blas_matmul_right());
  const bool avx512 = sloth::testing::cpu_has_avx512();
  const std::string core = cpu::blas_core_name();
  if (avx512 && !core.empty())
    EXPECT_TRUE(sloth::testing::is_avx512_core(core)) << core;
  // The variable stays unset.
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
}

}  // namespace
