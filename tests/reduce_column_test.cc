// Column sums on the CPU (backends/cpu/reduce.cc, column_sum_f32): float rows summed over
// leading dims, for sizes around the 32-column blocks and the row chunks, against a double
// sum of the same float values.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

// Elementwise check of sum(x, dims) against `expect` (double sums of the float values).
void expect_sums(const Tensor& got, const std::vector<double>& expect, const std::string& what) {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), expect.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], expect[i], 1e-5 * (1 + std::abs(expect[i]))) << what << " at " << i;
}

TEST(ColumnSum, OddSizesAgainstDouble) {
  manual_seed(7);
  for (int64_t rows : {1, 3, 257, 2049})
    for (int64_t cols : {1, 5, 31, 32, 33, 100, 128, 517}) {
      Tensor x = randn({rows, cols});
      const std::vector<double> xv = x.to_vector<double>();
      std::vector<double> e(cols, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) e[c] += xv[r * cols + c];
      expect_sums(sum(x, {0}), e, "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
      // The same rows as [a, b, cols] summed over (0, 1), where the shape splits.
      if (rows % 3 == 0)
        expect_sums(sum(x.reshape({3, rows / 3, cols}), {0, 1}), e, "3-D");
    }
}

// Kept outer dim (sum over the middle dim of [a, r, L]) and reduced rows that do not
// coalesce into one stride (every other row of a slice).
TEST(ColumnSum, OuterDimAndStridedRows) {
  manual_seed(8);
  Tensor x = randn({3, 600, 40});
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> e(3 * 40, 0.0);
  for (int a = 0; a < 3; ++a)
    for (int r = 0; r < 600; ++r)
      for (int c = 0; c < 40; ++c) e[a * 40 + c] += xv[(a * 600 + r) * 40 + c];
  expect_sums(sum(x, {1}), e, "outer");

  Tensor y = randn({50, 40, 70});
  Tensor ys = y.slice(1, 0, 30, 2);  // [50, 15, 70], rows at strides 2 * 70 and 40 * 70
  const std::vector<double> yv = y.to_vector<double>();
  std::vector<double> f(70, 0.0);
  for (int a = 0; a < 50; ++a)
    for (int r = 0; r < 30; r += 2)
      for (int c = 0; c < 70; ++c) f[c] += yv[(a * 40 + r) * 70 + c];
  expect_sums(sum(ys, {0, 1}), f, "strided rows");
}

}  // namespace
}  // namespace sloth
