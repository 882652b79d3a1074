// The CPU speed work of issue #13: the vectorizable float erf (core/ew_semantics.h verff) and
// the OpenBLAS core selection (backends/cpu/blas_core.h, SLOTH_BLAS_CORE).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/blas_core.h"
#include "core/ew_semantics.h"
#include "sloth/sloth.h"
#include "tests/support/blas_check.h"

namespace {
using namespace sloth;

// |got - want| in units of the float ulp at want (denormal spacing below FLT_MIN).
double ulps(float got, double want) {
  const double a = std::fabs(want);
  const double ulp = a < 1.1754943508222875e-38 ? std::ldexp(1.0, -149)
                                                 : std::ldexp(1.0, std::ilogb(static_cast<float>(a)) - 23);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Every 97th float of both signs (~44 million points, all binades, denormals to Inf); the
// exhaustive check over all floats gave 1.02 ulp at most.
TEST(Erf, WithinTwoUlpOfDoubleErfEverywhere) {
  double worst = 0;
  float worst_x = 0;
  for (uint64_t b = 0; b < 0x7f800000u; b += 97) {
    for (float x : {from_bits(static_cast<uint32_t>(b)), -from_bits(static_cast<uint32_t>(b))}) {
      const double e = ulps(ew::verff(x), std::erf(static_cast<double>(x)));
      if (e > worst) worst = e, worst_x = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
}

TEST(Erf, SpecialValues) {
  EXPECT_EQ(ew::verff(INFINITY), 1.0f);
  EXPECT_EQ(ew::verff(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(ew::verff(NAN)));
  EXPECT_EQ(ew::verff(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(ew::verff(-0.0f)));
  EXPECT_EQ(ew::verff(5.0f), 1.0f);
  EXPECT_EQ(ew::verff(-5.0f), -1.0f);
}

// Through the public ops (interpreter, fused loops): erf and exact GELU against double math.
TEST(Erf, ErfAndGeluOpsMatchDouble) {
  std::vector<double> v;
  for (int i = -4000; i <= 4000; ++i) v.push_back(static_cast<float>(i * 0.00173));
  const Tensor x = tensor(v, {static_cast<int64_t>(v.size())});
  const std::vector<double> e = erf(x).to(kFloat64).to_vector<double>();
  const std::vector<double> g = gelu(x).to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_LE(ulps(static_cast<float>(e[i]), std::erf(v[i])), 2.0) << "erf at " << v[i];
    const double want = 0.5 * v[i] * (1 + std::erf(v[i] / std::sqrt(2.0)));
    EXPECT_NEAR(g[i], want, 4e-7 * (1 + std::fabs(want))) << "gelu at " << v[i];
  }
}

// GEMMs stay right whichever core runs them, and the core is the CPU's AVX-512 one when the
// environment forced a narrower one (SLOTH_BLAS_CORE=auto, the default).
TEST(BlasCore, MatmulCorrectAndCoreSelected) {
  ASSERT_NO_FATAL_FAILURE(sloth::testing::expect_blas_matmul_right());
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const bool avx512 = sloth::testing::cpu_has_avx512();
  const std::string core = cpu::blas_core_name();
  if (forced != nullptr && avx512 && !core.empty()) {
    EXPECT_TRUE(sloth::testing::is_avx512_core(core)) << core;
  }
  // The variable itself is left as the user set it.
  if (forced != nullptr) {
    EXPECT_NE(std::getenv("OPENBLAS_CORETYPE"), nullptr);
  }
}

}  // namespace
