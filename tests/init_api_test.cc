// LibTorch's torch::nn::init, Tensor::uniform_/normal_ and the module-walking API
// (apply, modules, named_modules, as<T>) as a LibTorch program uses them to initialize a
// model. The gains and fans are PyTorch's formulas (values checked in PyTorch 1.13:
// calculate_gain('leaky_relu', 0.2) = 1.3867504905630728); distributions are checked on
// large seeded samples (deterministic, so the bounds cannot flake).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/errors.h"
#include "tests/support/pytorch_values.h"

namespace {

using namespace sloth;
using sloth::testing::values;
namespace init = sloth::nn::init;

struct Moments { double mean, std, min, max; };
Moments moments(const Tensor& t) {
  const std::vector<double> v = values(t);
  double s = 0, s2 = 0, lo = v[0], hi = v[0];
  for (double x : v) { s += x; s2 += x * x; lo = std::min(lo, x); hi = std::max(hi, x); }
  const double n = static_cast<double>(v.size()), mean = s / n;
  return {mean, std::sqrt(s2 / n - mean * mean), lo, hi};
}

TEST(InitApi, GainsAndFansArePyTorchs) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(kLinear), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(kConv2D), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(kSigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(kTanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(kReLU), std::sqrt(2.0));
  EXPECT_NEAR(init::calculate_gain(kLeakyReLU, 0.2), 1.3867504905630728, 1e-15);
  EXPECT_NEAR(init::calculate_gain(kLeakyReLU), std::sqrt(2.0 / 1.0001), 1e-15);
  const auto [in, out] = init::_calculate_fan_in_and_fan_out(zeros({8, 4, 3, 3}));
  EXPECT_EQ(in, 36);
  EXPECT_EQ(out, 72);
  // The same spellings still name an RNN's nonlinearity.
  EXPECT_EQ(nn::RNNOptions(2, 3).nonlinearity(kReLU).nonlinearity(), RNNNonlinearity::kReLU);
}

TEST(InitApi, XavierAndKaimingHaveTheirBoundsAndSpreads) {
  manual_seed(1);
  Tensor w = zeros({256, 128, 3});  // fan_in 384, fan_out 768
  init::xavier_uniform_(w, 2.0);
  const double a = 2.0 * std::sqrt(6.0 / (384 + 768));
  Moments m = moments(w);
  EXPECT_LE(m.max, a);
  EXPECT_GE(m.min, -a);
  EXPECT_GT(m.max, 0.99 * a);
  EXPECT_NEAR(m.std, a / std::sqrt(3.0), 0.01 * a);
  init::xavier_normal_(w);
  m = moments(w);
  EXPECT_NEAR(m.std, std::sqrt(2.0 / (384 + 768)), 0.01 * std::sqrt(2.0 / (384 + 768)));
  EXPECT_NEAR(m.mean, 0.0, 0.001);
  init::kaiming_normal_(w, 0, kFanOut, kReLU);
  m = moments(w);
  EXPECT_NEAR(m.std, std::sqrt(2.0 / 768), 0.01 * std::sqrt(2.0 / 768));
  init::kaiming_uniform_(w, std::sqrt(5.0));  // nn.Linear's own init: bound 1 / sqrt(fan_in)
  m = moments(w);
  EXPECT_LE(m.max, 1 / std::sqrt(384.0));
  EXPECT_GT(m.max, 0.99 / std::sqrt(384.0));
  Tensor d = zeros({4096}, kFloat64);
  d.uniform_(-3, 5);
  m = moments(d);
  EXPECT_GE(m.min, -3);
  EXPECT_LT(m.max, 5);
  EXPECT_NEAR(m.mean, 1.0, 0.15);
  d.normal_(2, 0.5);
  m = moments(d);
  EXPECT_NEAR(m.mean, 2.0, 0.03);
  EXPECT_NEAR(m.std, 0.5, 0.02);
}

TEST(InitApi, OrthogonalEyeDiracSparseAndConstants) {
  manual_seed(2);
  for (Shape s : {Shape{5, 12}, Shape{12, 5}, Shape{4, 2, 3}}) {
    Tensor w = zeros(s, kFloat64);
    init::orthogonal_(w, 1.5);
    const Tensor flat = w.reshape({s[0], -1});
    const bool wide = flat.size(0) <= flat.size(1);
    const Tensor gram = wide ? flat.matmul(flat.t()) : flat.t().matmul(flat);
    const std::vector<double> g = values(gram);
    const int64_t n = gram.size(0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(g[i * n + j], i == j ? 2.25 : 0.0, 1e-12) << shape_str(s);
  }
  Tensor e = zeros({2, 3});
  init::eye_(e);
  EXPECT_EQ(values(e), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  // A dirac kernel makes the convolution the identity (per group).
  Tensor k = zeros({4, 2, 3, 3}, kFloat64);
  init::dirac_(k, 2);
  const Tensor x = randn({1, 4, 5, 5}, kFloat64);
  const std::vector<double> y = values(conv2d(x, k, {}, {1, 1}, {1, 1}, {1, 1}, 2));
  const std::vector<double> xv = values(x);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(y[i], xv[i]);
  Tensor sp = zeros({10, 40}, kFloat64);
  init::sparse_(sp, 0.25, 0.5);
  const std::vector<double> sv = values(sp);
  for (int64_t c = 0; c < 40; ++c) {
    int zeros_in_column = 0;
    for (int64_t r = 0; r < 10; ++r) zeros_in_column += sv[r * 40 + c] == 0.0;
    EXPECT_EQ(zeros_in_column, 3) << "column " << c;  // ceil(0.25 * 10)
  }
  Tensor c3 = zeros({3});
  EXPECT_EQ(values(init::constant_(c3, 0.5)), (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(values(init::ones_(c3)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(init::zeros_(c3)), (std::vector<double>{0, 0, 0}));
}

TEST(InitApi, BadInputIsAnErrorAndChangesNothing) {
  Tensor b = tensor({1.0, 2.0}, {2});
  EXPECT_ERROR_HAS(init::kaiming_uniform_(b), "fewer than 2 dimensions");
  EXPECT_ERROR_HAS(init::xavier_normal_(b), "fewer than 2 dimensions");
  EXPECT_ERROR_HAS(init::eye_(b), "Only tensors with 2 dimensions");
  EXPECT_ERROR_HAS(init::dirac_(zeros({3, 2, 3}), 2), "divisible by groups");
  EXPECT_ERROR_HAS(init::sparse_(zeros({3, 3}), 1.5), "sparsity must be in [0, 1]");
  EXPECT_ERROR_HAS(init::xavier_uniform_(Tensor()), "undefined");
  EXPECT_ERROR_HAS(b.uniform_(2, 1), "from=2 > to=1");
  EXPECT_ERROR_HAS(b.normal_(0, -1), "std >= 0.0");
  EXPECT_ERROR_HAS(zeros({2}, kInt64).uniform_(), "not implemented for int64");
  EXPECT_EQ(values(b), (std::vector<double>{1, 2}));
  // A parameter is written only under NoGradGuard (nn::init takes it itself), as in PyTorch.
  nn::Linear fc(3, 2);
  EXPECT_ERROR_HAS(fc->weight.uniform_(), "in-place");
}

struct NetImpl : nn::Module {
  NetImpl() : Module("Net") {
    seq = register_module("seq", nn::Sequential(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2)));
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 2, 3)));
  }
  nn::Sequential seq{nullptr};
  nn::Conv2d conv{nullptr};
};
SLOTH_MODULE(Net);

TEST(InitApi, ApplyWalksTheModuleTreeLikeLibTorch) {
  Net net;
  std::vector<std::string> names;
  for (const auto& [name, m] : net->named_modules()) names.push_back(name + ":" + m->name());
  EXPECT_EQ(names, (std::vector<std::string>{":Net", "seq:Sequential", "seq.0:Linear",
                                             "seq.1:ReLU", "seq.2:Linear", "conv:Conv2d"}));
  EXPECT_EQ(net->modules().size(), 6u);
  EXPECT_EQ(net->modules(false).size(), 5u);
  // The custom-initialization idiom: zero every Linear's bias, fill its weight.
  int linears = 0;
  net->apply([&](nn::Module& m) {
    if (auto* l = m.as<nn::Linear>()) {
      ++linears;
      init::zeros_(l->bias);
      init::constant_(l->weight, 0.25);
    }
  });
  EXPECT_EQ(linears, 2);
  EXPECT_TRUE(net->seq[0]->is<nn::LinearImpl>());
  EXPECT_EQ(net->conv->as<nn::Linear>(), nullptr);
  // seq: 4 -> 8 (all 0.25 * sum(x)), relu, 8 -> 2: 0.25 * 8 * relu(0.25 * sum(x)).
  const Tensor y = net->seq->forward(ones({1, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{2.0, 2.0}));
  // The parameters stay leaves that learn.
  y.sum().backward();
  EXPECT_EQ(values(net->seq[2]->as<nn::Linear>()->bias.grad()), (std::vector<double>{1, 1}));
  std::vector<std::string> named;
  net->apply([&](const std::string& name, nn::Module&) { named.push_back(name); }, "net");
  EXPECT_EQ(named, (std::vector<std::string>{"net", "net.seq", "net.seq.0", "net.seq.1",
                                             "net.seq.2", "net.conv"}));
  // A module not held by a shared_ptr cannot hand itself out as one.
  NetImpl on_stack;
  EXPECT_ERROR_HAS(on_stack.modules(), "not held by a std::shared_ptr");
  EXPECT_EQ(on_stack.modules(false).size(), 5u);
}

}  // namespace
