// Gradient accumulation of scattered slices (sloth/grad_accumulate.h): the backward of chunk /
// narrow pieces that tile a dim is one concatenation; the values are those of the plain sum.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

std::vector<double> v(const Tensor& t) { return t.to_vector<double>(); }

// x [2, 6]; loss = sum over the chosen chunks of chunk_i * w_i: d loss / d x is w_i on the
// chosen chunks' columns and 0 elsewhere.
std::vector<double> chunk_grad(const std::vector<int>& used, bool create_graph = false) {
  Tensor x = arange(0.0, 12.0, 1.0, TensorOptions().dtype(kFloat64)).reshape({2, 6}).requires_grad_();
  std::vector<Tensor> parts = (x * 1.0).chunk(3, -1);
  Tensor loss;
  for (int i : used) {
    Tensor w = full({2, 2}, 1.0 + i, TensorOptions().dtype(kFloat64));
    Tensor term = (parts[i] * w).sum();
    loss = loss.defined() ? loss + term : term;
  }
  if (create_graph) return v(autograd::grad({loss}, {x}, {}, false, true)[0]);
  loss.backward();
  return v(x.grad());
}

std::vector<double> expected(const std::vector<int>& used) {
  std::vector<double> e(12, 0.0);
  for (int i : used)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) e[r * 6 + i * 2 + c] = 1.0 + i;
  return e;
}

TEST(GradAccumulate, ChunksCoveringTheDimJoin) {
  EXPECT_EQ(chunk_grad({0, 1, 2}), expected({0, 1, 2}));
  EXPECT_EQ(chunk_grad({2, 0, 1}), expected({2, 0, 1}));  // any order of arrival
}

TEST(GradAccumulate, AdjacentChunksLeaveZerosOutside) {
  EXPECT_EQ(chunk_grad({1, 2}), expected({1, 2}));
  EXPECT_EQ(chunk_grad({0, 1}), expected({0, 1}));
}

TEST(GradAccumulate, GappedChunksAdd) { EXPECT_EQ(chunk_grad({0, 2}), expected({0, 2})); }

TEST(GradAccumulate, CreateGraphKeepsHistory) {
  EXPECT_EQ(chunk_grad({0, 1, 2}, true), expected({0, 1, 2}));
}

// The same chunk used twice: its gradients add before the scatter.
TEST(GradAccumulate, RepeatedChunk) {
  EXPECT_EQ(chunk_grad({1, 1, 0, 2}), (std::vector<double>{1, 1, 4, 4, 3, 3, 1, 1, 4, 4, 3, 3}));
}

// What the step runs: one concatenation, no scatter into zeros.
TEST(GradAccumulate, PlanIsOneConcatenation) {
  Tensor x = randn({4, 9}).requires_grad_();
  std::vector<Tensor> parts = (x * 2.0).chunk(3, -1);
  ((parts[0] * 3.0).sum() + (parts[1] * 4.0).sum() + (parts[2] * 5.0).sum()).backward();
  const std::string plan = dump_plan({x.grad()});
  EXPECT_NE(plan.find("cat"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("slice_scatter"), std::string::npos) << plan;
}

// Attention's heads: each third of x [N, L, 3 * H * D] is viewed as [N, H, L, D] (reshape,
// permute). The joined gradient concatenates the permuted-back views along the head dim
// (no copy per third) and has the values of the plain sum.
TEST(GradAccumulate, MergedHeadsJoinWithoutCopies) {
  Tensor x = randn({2, 3, 12}, TensorOptions().dtype(kFloat64)).requires_grad_();
  std::vector<Tensor> parts = (x * 1.0).chunk(3, -1);
  Tensor loss;
  for (int i = 0; i < 3; ++i) {
    Tensor w = arange(0.0, 24.0, 1.0, TensorOptions().dtype(kFloat64)).reshape({2, 2, 3, 2}) + 100.0 * i;
    Tensor t = (parts[i].reshape({2, 3, 2, 2}).permute({0, 2, 1, 3}) * w).sum();
    loss = loss.defined() ? loss + t : t;
  }
  loss.backward();
  const std::string plan = dump_plan({x.grad()});
  EXPECT_EQ(plan.find("clone"), std::string::npos) << plan;
  std::vector<double> e(2 * 3 * 12);
  for (int i = 0; i < 3; ++i)
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 3; ++t)
          for (int d = 0; d < 2; ++d)
            e[(b * 3 + t) * 12 + 4 * i + 2 * h + d] = ((b * 2 + h) * 3 + t) * 2 + d + 100.0 * i;
  EXPECT_EQ(v(x.grad()), e);
}

// A weight used transposed (Linear: x w^T): its gradient g^T x is one GEMM written in w's
// layout, no transposed view of x^T g; the values are the plain product's.
TEST(GradAccumulate, TransposedWeightGradient) {
  Tensor x = arange(0.0, 6.0, 1.0, TensorOptions().dtype(kFloat64)).reshape({3, 2});
  Tensor w = arange(1.0, 5.0, 1.0, TensorOptions().dtype(kFloat64)).reshape({2, 2}).requires_grad_();
  Tensor gy = tensor({1.0, -1.0, 2.0, 0.5, 0.0, 3.0}, {3, 2}, kFloat64);
  (matmul(x, w.t()) * gy).sum().backward();
  const std::string plan = dump_plan({w.grad()});
  EXPECT_GT(plan.rfind("matmul"), plan.rfind("permute")) << "the product is not transposed after\n" << plan;
  // w.grad[i][j] = sum_r gy[r][i] * x[r][j]
  EXPECT_EQ(v(w.grad()), (std::vector<double>{0 * 1 + 2 * 2 + 4 * 0, 1 * 1 + 3 * 2 + 5 * 0,
                                              0 * -1 + 2 * 0.5 + 4 * 3, 1 * -1 + 3 * 0.5 + 5 * 3}));
  // Batched input (the batch folds into the GEMM's rows), against the 2-D result.
  Tensor w2 = w.detach().clone().requires_grad_();
  (matmul(x.reshape({1, 3, 2}), w2.t()) * gy.reshape({1, 3, 2})).sum().backward();
  EXPECT_EQ(v(w2.grad()), v(w.grad()));
}

// gelu's derivative takes cdf from the forward value (gelu(x) / x); near and at 0 it uses
// the expansion 1/2 + x pdf(0). First and second derivatives against the closed forms.
TEST(GradAccumulate, GeluDerivativesNearZero) {
  const std::vector<double> xs = {0.0, 1e-35, -1e-3, 0.5, -3.0, 6.0};
  Tensor x = tensor(xs, {6}, kFloat64).requires_grad_();
  Tensor d1 = autograd::grad({gelu(x).sum()}, {x}, {}, true, true)[0];
  Tensor d2 = autograd::grad({d1.sum()}, {x})[0];
  const std::vector<double> g1 = v(d1), g2 = v(d2);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double t = xs[i], pdf = std::exp(-t * t / 2) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * (1 + std::erf(t / std::sqrt(2.0)));
    EXPECT_NEAR(g1[i], cdf + t * pdf, 1e-12) << "x = " << t;
    EXPECT_NEAR(g2[i], 2 * pdf - t * t * pdf, 1e-9) << "x = " << t;
  }
  // float32: within float tolerance of the closed form.
  Tensor xf = tensor(xs, {6}, kFloat32).requires_grad_();
  gelu(xf).sum().backward();
  const std::vector<double> gf = v(xf.grad());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(gf[i], g1[i], 1e-6) << "x = " << xs[i];
}

}  // namespace
}  // namespace sloth
