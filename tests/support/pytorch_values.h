// Helpers of the tests that compare with values committed from PyTorch (conv, pooling, the
// LibTorch API suites): the generators' input sequences, a tensor's values as float64, and
// element-wise comparison with a tolerance (expect_values: NaN expects NaN, infinities compare
// exactly; expect_close: relative tolerance with a named failure).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth::testing {

// scale * f(a * i) for i = 0, 1, ... in row-major order: the *_values.py generators' inputs.
inline Tensor seq(Shape shape, double (*f)(double), double a, double scale = 1.0,
                  DType d = kFloat64) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * f(a * static_cast<double>(i));
  return tensor(v, shape, TensorOptions().dtype(d));
}
inline double sin_(double x) { return std::sin(x); }
inline double cos_(double x) { return std::cos(x); }

inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol) {
  std::vector<double> got = t.to(kFloat64).contiguous().to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

// t's elements in row-major order, as float64 (any dtype, any layout).
inline std::vector<double> values(const Tensor& t) {
  return t.to(kFloat64).contiguous().to_vector<double>();
}

// Element-wise |got - want| <= rel_tol * max(1, |want|): a relative tolerance that turns
// absolute near zero, for expected values committed from a float64 reference.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         const std::string& what, double rel_tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel_tol * std::max(1.0, std::abs(want[i])))
        << what << " at " << i;
}

// A leaf that requires grad, holding t's values.
inline Tensor param(Tensor t) { return t.detach().requires_grad_(); }

}  // namespace sloth::testing
