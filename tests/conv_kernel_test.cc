// conv2d's dedicated kernels (ConvForward, ConvInputGrad, ConvWeightGrad; backends/cpu/conv.cc)
// against PyTorch 1.13 (values in conv_kernel_test_values.inc, from
// conv_kernel_test_values.py): stride 2 on odd sizes, "same" with dilation, unbatched,
// batch 1, bias or none, first and second order, conv_transpose2d (the input gradient
// kernel); a batch large enough to split across the
// pool against the unfold + matmul formulation. gradcheck_test covers the three ops'
// samples (first and second order) against the reference kernels.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"
#include "tests/support/pytorch_values.h"

namespace sloth {
namespace {

#include "tests/conv_kernel_test_values.inc"

using testing::cos_;
using testing::param;
using testing::seq;
using testing::sin_;
void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-10) {
  testing::expect_values(t, want, tol);
}

struct Case {
  Shape xs, ws;
  bool bias;
  const std::vector<double>*y, *gx, *gw, *gb;
};

// conv(x, w, b) and the gradients of sum(y * gy), in float64, and the float32 forward.
template <class F>
void check_case(const Case& c, F conv) {
  Tensor x = param(seq(c.xs, sin_, 0.37)), w = param(seq(c.ws, cos_, 0.23, 0.5));
  Tensor b = c.bias ? param(seq({c.ws[0]}, sin_, 0.7, 0.3)) : Tensor();
  Tensor y = conv(x, w, b);
  expect_values(y, *c.y);
  (y * seq(y.shape(), cos_, 0.11)).sum().backward();
  expect_values(x.grad(), *c.gx);
  expect_values(w.grad(), *c.gw);
  if (c.bias) expect_values(b.grad(), *c.gb);
  Tensor y32 = conv(x.detach().to(kFloat32), w.detach().to(kFloat32),
                    c.bias ? b.detach().to(kFloat32) : Tensor());
  EXPECT_EQ(y32.dtype(), kFloat32);
  expect_values(y32, *c.y, 2e-5);
}

TEST(ConvKernel, Stride2OnOddSizesWithBias) {
  check_case({{2, 3, 7, 6}, {4, 3, 3, 3}, true, &kStride2Odd_y, &kStride2Odd_gx, &kStride2Odd_gw,
              &kStride2Odd_gb},
             [](const Tensor& x, const Tensor& w, const Tensor& b) {
               return conv2d(x, w, b, {2, 2}, {1, 1});
             });
}

TEST(ConvKernel, SamePaddingWithDilationAndNoBias) {
  check_case({{1, 2, 6, 5}, {3, 2, 2, 3}, false, &kSameDilated_y, &kSameDilated_gx,
              &kSameDilated_gw, nullptr},
             [](const Tensor& x, const Tensor& w, const Tensor& b) {
               return conv2d(x, w, b, {1, 1}, "same", {2, 1});
             });
}

TEST(ConvKernel, UnbatchedInput) {
  check_case({{2, 5, 5}, {2, 2, 3, 3}, true, &kUnbatched_y, &kUnbatched_gx, &kUnbatched_gw,
              &kUnbatched_gb},
             [](const Tensor& x, const Tensor& w, const Tensor& b) {
               return conv2d(x, w, b, {1, 1}, {0, 0}, {2, 2});
             });
}

TEST(ConvKernel, BatchOneWithUnequalStrideAndPadding) {
  check_case({{1, 3, 5, 8}, {2, 3, 3, 2}, true, &kBatch1Stride21_y, &kBatch1Stride21_gx,
              &kBatch1Stride21_gw, &kBatch1Stride21_gb},
             [](const Tensor& x, const Tensor& w, const Tensor& b) {
               return conv2d(x, w, b, {2, 1}, {0, 1});
             });
}

TEST(ConvKernel, SecondOrderMatchesPyTorch) {
  Tensor x = param(seq({2, 2, 5, 4}, sin_, 0.37)), w = param(seq({3, 2, 3, 3}, cos_, 0.23, 0.5));
  Tensor y = conv2d(x, w, {}, {2, 2}, {1, 1});
  Tensor gy = param(seq(y.shape(), cos_, 0.11));
  std::vector<Tensor> g = autograd::grad({(y * gy).sum()}, {x, w}, {}, std::nullopt, true);
  expect_values(g[0], kSecond_gx);
  expect_values(g[1], kSecond_gw);
  Tensor u = seq(x.shape(), cos_, 0.19), v = seq(w.shape(), sin_, 0.13);
  ((g[0] * u).sum() + (g[1] * v).sum()).backward();
  expect_values(x.grad(), kSecond_x);
  expect_values(w.grad(), kSecond_w);
  expect_values(gy.grad(), kSecond_gy);
}

TEST(ConvKernel, ConvTranspose2dIsTheInputGradientKernel) {
  Tensor x = param(seq({2, 3, 4, 3}, sin_, 0.37)), w = param(seq({3, 2, 3, 2}, cos_, 0.23, 0.5));
  Tensor b = param(tensor({0.5, -0.25}, {2}, TensorOptions().dtype(kFloat64)));
  Tensor y = conv_transpose2d(x, w, b, {2, 2}, {1, 1}, {1, 1}, 1, {1, 2});
  EXPECT_NE(dump_plan({y}).find("conv_input_grad"), std::string::npos);
  expect_values(y, kTransposed_y);
  (y * seq(y.shape(), cos_, 0.11)).sum().backward();
  expect_values(x.grad(), kTransposed_gx);
  expect_values(w.grad(), kTransposed_gw);
  expect_values(b.grad(), kTransposed_gb);
}

TEST(ConvKernel, ForwardIsOneConvKernelWithoutColumnsOfTheBatch) {
  Tensor x = seq({4, 3, 8, 8}, sin_, 0.37, 1.0, kFloat32), w = seq({5, 3, 3, 3}, cos_, 0.2, 1.0, kFloat32);
  const std::string plan = dump_plan({conv2d(x, w, seq({5}, sin_, 0.3, 1.0, kFloat32), {1, 1}, {1, 1})});
  EXPECT_NE(plan.find("conv_forward"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("unfold"), std::string::npos) << plan;
}

// A batch the pool splits (forward and input gradient by samples, the weight gradient into
// one accumulator per task), against im2col + matmul written with sloth's unfold.
// float32 runs the AVX-512 GEMM (backends/cpu/conv_gemm.h) where the CPU has it, float64
// OpenBLAS; o = 13 and the 15-wide rows leave ragged row and column tiles.
class ConvKernelSplit : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, ConvKernelSplit, ::testing::Values(kFloat64, kFloat32));

TEST_P(ConvKernelSplit, SplitBatchMatchesUnfoldMatmul) {
  const DType dt = GetParam();
  const double tol = dt == kFloat64 ? 1e-9 : 2e-4;
  const int64_t n = 16, c = 8, o = 13, h = 16, wd = 15;
  Tensor x = param(seq({n, c, h, wd}, sin_, 0.37, 1.0, dt));
  Tensor w = param(seq({o, c, 3, 3}, cos_, 0.23, 0.2, dt));
  Tensor b = param(seq({o}, sin_, 0.7, 1.0, dt));
  Tensor gy = seq({n, o, h, wd}, cos_, 0.11, 1.0, dt);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  (y * gy).sum().backward();
  Tensor x2 = param(x.detach()), w2 = param(w.detach()), b2 = param(b.detach());
  Tensor y2 = (matmul(w2.reshape({o, c * 9}), unfold(x2, {3, 3}, {1, 1}, {1, 1})) +
               b2.reshape({o, 1})).reshape({n, o, h, wd});
  (y2 * gy).sum().backward();
  auto values = [](const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); };
  expect_values(y, values(y2), tol);
  expect_values(x.grad(), values(x2.grad()), tol);
  expect_values(w.grad(), values(w2.grad()), 50 * tol);
  expect_values(b.grad(), values(b2.grad()), 50 * tol);
  // The weight gradient's accumulators are summed in a fixed order: runs agree bit for bit.
  Tensor x3 = param(x.detach());
  Tensor w3 = param(w.detach());
  (conv2d(x3, w3, {}, {1, 1}, {1, 1}) * gy).sum().backward();
  Tensor x4 = param(x.detach());
  Tensor w4 = param(w.detach());
  (conv2d(x4, w4, {}, {1, 1}, {1, 1}) * gy).sum().backward();
  EXPECT_EQ(values(w3.grad()), values(w4.grad()));
}

TEST(ConvKernel, NonContiguousOperands) {
  Tensor x = seq({2, 3, 6, 5}, sin_, 0.37), w = seq({4, 3, 3, 3}, cos_, 0.23);
  Tensor xt = x.transpose(2, 3).contiguous().transpose(2, 3);  // same values, strided
  Tensor wt = w.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(xt.is_contiguous());
  expect_values(conv2d(xt, wt, {}, {1, 2}, {1, 0}),
                conv2d(x, w, {}, {1, 2}, {1, 0}).to_vector<double>(), 1e-12);
}

}  // namespace
}  // namespace sloth
