// batch_norm, group_norm, BatchNorm1d/2d, GroupNorm, Flatten, Dropout2d, cross_entropy's
// ignore_index / label_smoothing / reduction and clip_grad_norm_, against PyTorch 1.13.
// The expected values (tests/norm_test_values.inc) were computed by PyTorch 1.13 on the
// same inputs: seq(n, a, b, s)[i] = float(sin(a * i + b) * s).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

#include "tests/norm_test_values.inc"

Tensor seq(int64_t n, double a, double b, double s, Shape shape) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(a * i + b) * s);
  return from_vector<float>(v, shape);
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 2e-5,
                 const std::string& what = "") {
  ASSERT_TRUE(t.defined()) << what;
  std::vector<double> got = t.to(DType::kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

// sum(y * g): a loss whose gradient w.r.t. y is g.
Tensor weighted_sum(const Tensor& y, const Tensor& g) { return sum(y.reshape({-1}) * g); }

TEST(BatchNorm2d, TrainingValuesGradientsRunningStatsAndEvalMatchPyTorch) {
  nn::BatchNorm2d bn(3);
  {
    NoGradGuard g;
    bn->weight.copy_(tensor({1.5, -0.5, 2.0}));
    bn->bias.copy_(tensor({0.1, 0.2, -0.3}));
  }
  Tensor x1 = seq(48, 0.37, 0.1, 2.0, {4, 3, 2, 2}).requires_grad_(true);
  Tensor y1 = bn(x1);
  weighted_sum(y1, seq(48, 0.91, 0.3, 1.0, {48})).backward();
  expect_near(y1, kBn2dY1, 2e-5, "y");
  expect_near(x1.grad(), kBn2dDx1, 1e-4, "dx");
  expect_near(bn->weight.grad(), kBn2dDw, 2e-5, "dweight");
  expect_near(bn->bias.grad(), kBn2dDb, 2e-5, "dbias");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);

  bn(seq(24, 0.53, -0.4, 3.0, {2, 3, 2, 2}));
  expect_near(bn->running_mean, kBn2dRm2, 2e-5, "running_mean after 2 steps");
  expect_near(bn->running_var, kBn2dRv2, 2e-5, "running_var after 2 steps");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);

  bn.eval();
  Tensor x3 = seq(24, 0.23, 0.7, 1.5, {2, 3, 2, 2}).requires_grad_(true);
  Tensor y3 = bn(x3);
  weighted_sum(y3, seq(24, 0.91, 0.3, 1.0, {24})).backward();
  expect_near(y3, kBn2dEvalY, 2e-5, "eval y");
  expect_near(x3.grad(), kBn2dEvalDx, 2e-5, "eval dx");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2) << "eval does not count batches";
  expect_near(bn->running_mean, kBn2dRm2, 2e-5, "eval leaves running_mean");
}

TEST(BatchNorm2d, MomentumNoneIsTheCumulativeAverage) {
  nn::BatchNorm2d bn(3, 1e-5, std::nullopt);
  bn(seq(48, 0.37, 0.1, 2.0, {4, 3, 2, 2}));
  bn(seq(24, 0.53, -0.4, 3.0, {2, 3, 2, 2}));
  expect_near(bn->running_mean, kBnCumRm, 2e-5, "running_mean");
  expect_near(bn->running_var, kBnCumRv, 2e-5, "running_var");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
}

TEST(BatchNorm1d, TwoAndThreeDimInputs) {
  nn::BatchNorm1d bn(4, 1e-5, 0.3, /*affine=*/false);
  EXPECT_TRUE(bn.named_parameters().empty());
  expect_near(bn(seq(20, 0.77, 0.2, 1.7, {5, 4})), kBn1dY, 2e-5, "y [N, C]");
  expect_near(bn->running_mean, kBn1dRm);
  expect_near(bn->running_var, kBn1dRv);

  nn::BatchNorm1d bn3(2);
  expect_near(bn3(seq(24, 0.41, 0.9, 1.2, {3, 2, 4})), kBn1d3Y, 2e-5, "y [N, C, L]");
  expect_near(bn3->running_var, kBn1d3Rv);
}

TEST(BatchNorm, NoTrackedStatsUsesBatchStatisticsAlsoInEval) {
  nn::BatchNorm1d bn(4, 1e-5, 0.3, false, /*track_running_stats=*/false);
  EXPECT_TRUE(bn.named_buffers().empty());
  bn.eval();
  expect_near(bn(seq(20, 0.77, 0.2, 1.7, {5, 4})), kBn1dY, 2e-5);
}

TEST(BatchNorm, BuffersAndParametersHavePyTorchNames) {
  nn::Sequential net(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::BatchNorm1d>(3));
  std::vector<std::string> names;
  for (auto& [n, t] : net.named_buffers()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"1.running_mean", "1.running_var",
                                             "1.num_batches_tracked"}));
  EXPECT_EQ(net.named_buffers(false).size(), 0u);
  auto bufs = net.buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[2].dtype(), DType::kInt64);
  EXPECT_FALSE(bufs[0].requires_grad());
  EXPECT_EQ(net.parameters().size(), 4u) << "buffers are not parameters";
  EXPECT_EQ(bufs[1].to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(BatchNorm, ErrorsLeaveTheBuffersUnchanged) {
  nn::BatchNorm2d bn(3);
  auto expect_error = [&](const Tensor& x, const std::string& needle) {
    try {
      bn(x);
      ADD_FAILURE() << "no error for " << shape_str(x.shape());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 0);
    expect_near(bn->running_mean, {0, 0, 0});
    expect_near(bn->running_var, {1, 1, 1});
  };
  expect_error(zeros({2, 4, 2, 2}), "expected 3");
  expect_error(zeros({2, 3, 2}), "expected 4D input (got 3D input");
  expect_error(zeros({1, 3, 1, 1}), "Expected more than 1 value per channel when training");
  expect_error(zeros({2, 3, 2, 2}, TensorOptions(DType::kInt64)), "floating-point");
  expect_error(zeros({2, 3, 2, 2}, TensorOptions(DType::kFloat64)),
               "weight is float32 but input is float64");
  nn::BatchNorm1d b1(3, 1e-5, std::nullopt);
  EXPECT_THROW(b1(zeros({1, 3})), Error);
  EXPECT_EQ(b1->num_batches_tracked.item<int64_t>(), 0);
  bn.eval();
  expect_near(bn(ones({1, 3, 1, 1})), {1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5),
                                       1 / std::sqrt(1 + 1e-5)},
              2e-5, "a batch of one is fine in eval");
}

TEST(BatchNormFunctional, ChecksBeforeRecordingAndNeedsStatsInEval) {
  Tensor rm = zeros({3}), rv = ones({3});
  EXPECT_THROW(batch_norm(zeros({2, 3}), Tensor(), Tensor(), {}, {}, false, 0.1, 1e-5), Error);
  EXPECT_THROW(batch_norm(zeros({2, 3}), zeros({4}), ones({4}), {}, {}, true, 0.1, 1e-5), Error);
  EXPECT_THROW(batch_norm(zeros({2, 3}), rm, Tensor(), {}, {}, true, 0.1, 1e-5), Error);
  EXPECT_THROW(batch_norm(zeros({2, 3}), rm, rv, ones({2}), {}, true, 0.1, 1e-5), Error);
  expect_near(rm, {0, 0, 0});
  // The functional form updates the given buffers in place.
  Tensor x = tensor({1, 2, 3, 5, 6, 9}, {2, 3});
  Tensor y = batch_norm(x, rm, rv, {}, {}, true, 0.5, 0.0);
  expect_near(y, {-1, -1, -1, 1, 1, 1}, 1e-5);
  expect_near(rm, {1.5, 2, 3});           // 0.5 * mean
  expect_near(rv, {4.5, 4.5, 9.5});       // 0.5 + 0.5 * unbiased var (8, 8, 18)
}

TEST(GroupNorm, ValuesAndGradientsMatchPyTorch) {
  nn::GroupNorm gn(2, 4);
  {
    NoGradGuard g;
    gn->weight.copy_(tensor({1.0, 2.0, -1.0, 0.5}));
    gn->bias.copy_(tensor({0.0, 0.1, 0.2, 0.3}));
  }
  Tensor x = seq(24, 0.61, 0.5, 2.0, {2, 4, 3}).requires_grad_(true);
  Tensor y = gn(x);
  weighted_sum(y, seq(24, 0.29, -0.2, 1.0, {24})).backward();
  expect_near(y, kGnY, 2e-5, "y");
  expect_near(x.grad(), kGnDx, 1e-4, "dx");
  expect_near(gn->weight.grad(), kGnDw, 2e-5, "dweight");
  expect_near(gn->bias.grad(), kGnDb, 2e-5, "dbias");
  EXPECT_THROW(nn::GroupNorm(3, 4), Error);
  EXPECT_THROW(gn(zeros({2, 6, 3})), Error);
}

TEST(CrossEntropy, IgnoreIndexAndLabelSmoothingMatchPyTorch) {
  const Tensor logits = seq(20, 0.83, 0.1, 2.5, {5, 4});
  const Tensor t = from_vector<int64_t>({1, -100, 3, 0, 2}, {5});
  struct Case {
    const char* name;
    CrossEntropyOptions o;
    const std::vector<double>& value;
    const std::vector<double>& grad;
  };
  const Case cases[] = {
      {"ignore mean", {}, kCeIgnMean, kCeIgnMeanGrad},
      {"smooth mean", {.label_smoothing = 0.2}, kCeIgnSmoothMean, kCeIgnSmoothMeanGrad},
      {"smooth sum", {.label_smoothing = 0.2, .reduction = Reduction::kSum}, kCeIgnSmoothSum,
       kCeIgnSmoothSumGrad},
      {"smooth none", {.label_smoothing = 0.2, .reduction = Reduction::kNone}, kCeIgnSmoothNone,
       kCeIgnSmoothNoneGrad},
      {"ignore 3", {.ignore_index = 3, .label_smoothing = 0.1}, kCeIgn3SmoothMean,
       kCeIgn3SmoothMeanGrad},
  };
  for (const Case& c : cases) {
    Tensor l = logits.detach().requires_grad_(true);
    Tensor target = c.o.ignore_index == 3 ? from_vector<int64_t>({1, 1, 3, 0, 2}, {5}) : t;
    Tensor out = cross_entropy(l, target, c.o);
    expect_near(out, c.value, 2e-5, c.name);
    sum(out).backward();
    expect_near(l.grad(), c.grad, 2e-5, c.name);
  }
  EXPECT_NEAR(cross_entropy(logits, t, {}).item(), kCeIgnMean[0], 1e-5);
  EXPECT_NEAR(nll_loss(log_softmax(logits, 1), t).item(), kNllIgn[0], 1e-5);
  EXPECT_EQ(nll_loss(log_softmax(logits, 1), t, {.reduction = Reduction::kNone}).shape(), Shape{5});
  EXPECT_TRUE(std::isnan(cross_entropy(logits, full({5}, int64_t{-100})).item()))
      << "all targets ignored: 0 / 0 as in PyTorch";
  EXPECT_EQ(cross_entropy(logits, t, {.reduction = Reduction::kNone}).shape(), Shape{5});
  EXPECT_THROW(cross_entropy(logits, t, {.label_smoothing = 1.5}), Error);
}

TEST(ClipGradNorm, MatchesPyTorchForNorms2InfAnd1) {
  struct Case {
    double norm_type;
    const std::vector<double>&total, &g1, &g2;
  };
  const Case cases[] = {{2.0, kClip2Total, kClip2G1, kClip2G2},
                        {INFINITY, kClipInfTotal, kClipInfG1, kClipInfG2},
                        {1.0, kClip1Total, kClip1G1, kClip1G2}};
  for (const Case& c : cases) {
    Tensor p1 = zeros({3}).requires_grad_(true), p2 = zeros({2, 2}).requires_grad_(true);
    Tensor p3 = zeros({2}).requires_grad_(true);  // no grad: skipped
    p1.set_grad(seq(3, 1.1, 0.2, 3.0, {3}));
    p2.set_grad(seq(4, 0.7, -0.5, 2.0, {2, 2}));
    Tensor total = nn::clip_grad_norm_({p1, p2, p3}, 1.5, c.norm_type);
    expect_near(total, c.total, 2e-5, "total");
    expect_near(p1.grad(), c.g1, 2e-5, "g1");
    expect_near(p2.grad(), c.g2, 2e-5, "g2");
    EXPECT_FALSE(p3.grad().defined());
  }
  Tensor p = zeros({3}).requires_grad_(true);
  p.set_grad(seq(3, 1.1, 0.2, 0.1, {3}));
  expect_near(nn::clip_grad_norm_({p}, 10.0), kClipNoopTotal);
  expect_near(p.grad(), kClipNoopG1, 2e-5, "below max_norm: unchanged");
  EXPECT_EQ(nn::clip_grad_norm_({zeros({2}).requires_grad_(true)}, 1.0).item(), 0.0);
  Tensor q = zeros({2}).requires_grad_(true);
  q.set_grad(tensor({INFINITY, 1.0}));
  EXPECT_THROW(nn::clip_grad_norm_({q}, 1.0, 2.0, /*error_if_nonfinite=*/true), Error);
  EXPECT_EQ(q.grad().to_vector<float>()[1], 1.0f) << "unchanged after the error";
}

// LibTorch's torch::nn::utils spellings: clip_grad_norm_ returns the norm as a double (over a
// vector, an initializer list or one tensor); clip_grad_value_ clamps each gradient.
TEST(ClipGradNorm, LibTorchUtilsSpellings) {
  Tensor p1 = zeros({3}).requires_grad_(true), p2 = zeros({2}).requires_grad_(true);
  p1.set_grad(tensor({3.0, 0.0, 4.0}));
  p2.set_grad(tensor({0.0, 12.0}));
  const double total = nn::utils::clip_grad_norm_({p1, p2}, 6.5);  // |(3, 4, 12)| = 13
  EXPECT_NEAR(total, 13.0, 1e-5);
  EXPECT_NEAR(p2.grad().to_vector<float>()[1], 12.0 * 6.5 / (13.0 + 1e-6), 1e-5);
  EXPECT_NEAR(nn::utils::clip_grad_norm_(p1, 100.0), 2.5, 1e-5) << "p1 was halved";
  std::vector<Tensor> ps = {p1, p2};
  EXPECT_NEAR(nn::utils::clip_grad_norm_(ps, 100.0, 1.0), 1.5 + 0 + 2.0 + 0 + 6.0, 1e-5);
  p1.set_grad(tensor({-3.0, 0.5, 2.0}));
  nn::utils::clip_grad_value_(p1, 1.0);
  EXPECT_EQ(p1.grad().to_vector<float>(), (std::vector<float>{-1.0f, 0.5f, 1.0f}));
  nn::utils::clip_grad_value_({p1, p2}, 0.25);
  EXPECT_EQ(p1.grad().to_vector<float>(), (std::vector<float>{-0.25f, 0.25f, 0.25f}));
  EXPECT_EQ(p2.grad().to_vector<float>(), (std::vector<float>{0.0f, 0.25f}));
}

TEST(Layers, FlattenAndDropout2d) {
  nn::Flatten f;
  EXPECT_EQ(f(zeros({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0, 1)(zeros({2, 3, 4})).shape(), (Shape{6, 4}));

  manual_seed(3);
  nn::Dropout2d d(0.5);
  Tensor x = ones({8, 16, 3, 3});
  std::vector<float> y = d(x).to_vector<float>();
  int dropped = 0;
  for (int ch = 0; ch < 8 * 16; ++ch) {
    const float first = y[ch * 9];
    EXPECT_TRUE(first == 0.0f || first == 2.0f) << first;
    for (int k = 1; k < 9; ++k) EXPECT_EQ(y[ch * 9 + k], first) << "whole channels";
    dropped += first == 0.0f;
  }
  EXPECT_GT(dropped, 30);
  EXPECT_LT(dropped, 98);
  d.eval();
  EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(nn::Dropout2d(1.5), Error);
  EXPECT_THROW(dropout2d(zeros({2, 3}), 0.5, true), Error);
}

// With momentum 0.1 and with the cumulative average (momentum = nullopt, whose factor
// 1 / num_batches_tracked changes every step but is computed in the graph).
class BatchNormLoop : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Momentum, BatchNormLoop, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "None" : "Fixed"; });

TEST_P(BatchNormLoop, TrainingLoopIsOneGraphPerStepAndHitsThePlanCache) {
  manual_seed(0);
  const std::optional<double> momentum = GetParam() ? std::nullopt : std::optional(0.1);
  nn::Sequential net(std::make_shared<nn::Linear>(4, 8),
                     std::make_shared<nn::BatchNorm1d>(8, 1e-5, momentum),
                     std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3));
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm1dImpl>(net[1]);
  auto step = [&](int i) {
    Tensor x = seq(16 * 4, 0.3 + 0.01 * i, 0.1 * i, 1.0, {16, 4});
    Tensor y = from_vector<int64_t>(std::vector<int64_t>(16, i % 3), {16});
    opt.zero_grad();
    Tensor loss = cross_entropy(net(x), y);
    loss.backward();
    nn::clip_grad_norm_(net.parameters(), 1.0);
    opt.step();
    mark_step();
  };
  for (int i = 0; i < 3; ++i) step(i);
  reset_metrics();
  for (int i = 3; i < 8; ++i) step(i);
  EXPECT_EQ(metrics().graphs_executed, 5) << "one graph per step";
  EXPECT_EQ(metrics().plan_cache_misses, 0);
  EXPECT_EQ(metrics().plan_cache_hits, 5);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 8);
  // Evaluation steps: one graph each too, and the running statistics do not move.
  net.eval();
  const std::vector<float> rm = bn->running_mean.to_vector<float>();
  reset_metrics();
  for (int i = 0; i < 3; ++i) {
    Tensor out = net(seq(16 * 4, 0.5, 0.1 * i, 1.0, {16, 4}));
    sync({out});
  }
  EXPECT_EQ(metrics().graphs_executed, 3);
  EXPECT_LE(metrics().plan_cache_misses, 1);
  EXPECT_EQ(bn->running_mean.to_vector<float>(), rm);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 8);
}

// The running-stat update reuses the normalization's statistics: no second pass over x (the
// update itself is a few tiny [C] kernels).
TEST(BatchNormFunctional, RunningStatUpdateDoesNotRecomputeTheStatistics) {
  Tensor x = seq(64 * 8 * 16, 0.3, 0.1, 1.0, {64, 8, 4, 4});
  sync({x});
  int64_t kernels[2], nodes[2];
  for (int with = 0; with < 2; ++with) {
    Tensor rm = zeros({8}), rv = ones({8}), w = ones({8}), b = zeros({8});
    sync({rm, rv, w, b});
    reset_metrics();
    Tensor y = batch_norm(x, with ? rm : Tensor(), with ? rv : Tensor(), w, b, true, 0.1, 1e-5);
    sync({y, rm, rv});
    kernels[with] = metrics().kernels_launched;
    nodes[with] = metrics().nodes_executed;
  }
  EXPECT_LE(kernels[0], 8) << "the statistics' reductions and one normalizing pass";
  EXPECT_LE(kernels[1], kernels[0] + 4);
  EXPECT_LE(nodes[1], nodes[0] + 10) << "the update adds only [C]-sized nodes";
}

}  // namespace
