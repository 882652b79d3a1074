// PyTorch 1.13's observable autograd semantics for saved tensors and in-place writes:
// which tensors each backward saves (a write to one after the op fails backward with
// PyTorch's message, a write to anything else is fine), non-leaves written from sources
// that need no grad, and create_graph gradients that stay connected. Expected raise/no-raise
// is ../shared/notes/SAVED_TENSORS.md's table (each row checked on torch 1.13); expected
// values are worked out by hand from the definitions (noted per test).
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/errors.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

using testing::error_of;

using D = std::vector<double>;
std::vector<double> v(const Tensor& t) { return t.to_vector<double>(); }
Tensor leaf(std::vector<double> vals, Shape s = {-1}) {
  return tensor(std::move(vals), s, TensorOptions().dtype(kFloat64).requires_grad());
}
Tensor plain(std::vector<double> vals, Shape s = {-1}) {
  return tensor(std::move(vals), s, TensorOptions().dtype(kFloat64));
}
Tensor ints(std::vector<int64_t> vals, Shape s = {-1}) { return from_vector<int64_t>(vals, s); }
// A write that changes no value but bumps the version, through an alias without history.
void touch(const Tensor& t) { t.detach().copy_(t.detach().clone()); }

// ---- item 1: in-place writes on non-leaves from sources that need no grad --------------------

TEST(InplaceNonLeaf, WritesFromPlainSourcesKeepANonLeafAndGiveZeroGrad) {
  // PyTorch: x.grad == [0, 0, 0] (every path from x was cut by fill_/copy_).
  Tensor x = leaf({1, 2, 3});
  Tensor t = x * x;
  t.fill_(2.0);
  EXPECT_TRUE(t.requires_grad());
  EXPECT_FALSE(t.is_leaf());
  EXPECT_EQ(t.grad_fn_name(), "FillBackward2");
  t.add_(t);
  t.copy_(plain({5, 6, 7}));
  EXPECT_EQ(t.grad_fn_name(), "CopyBackwards");
  t.mul_(3);
  (t * plain({1, 2, 3})).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(v(x.grad()), (D{0, 0, 0}));
  EXPECT_EQ(v(t), (D{15, 18, 21}));
}

TEST(InplaceNonLeaf, ZeroClampDivAndViewsAfterACut) {
  Tensor x = leaf({1, -2, 3});
  Tensor t = x * 2.0;
  t.zero_();
  EXPECT_EQ(t.grad_fn_name(), "ZeroBackward0");
  t.add_(1.5);
  t.clamp_(-1, 1);
  t.div_(2);
  t[1].mul_(4);           // a view of the written non-leaf: allowed
  t.slice(0, 0, 2).fill_(3);
  t.select(0, 2).copy_(plain({7}, {}));
  EXPECT_EQ(v(t), (D{3, 3, 7}));
  (t * t).sum().backward();
  EXPECT_EQ(v(x.grad()), (D{0, 0, 0}));
}

TEST(InplaceNonLeaf, PartialCutKeepsTheRestOfTheGradient) {
  // t = x*x then t[0] = 0 (fill through a view): d/dx sum(t * [1,2,3]) = [0, 2*2*2, 2*3*3].
  Tensor x = leaf({1, 2, 3});
  Tensor t = x * x;
  t[0].fill_(0);
  (t * plain({1, 2, 3})).sum().backward();
  EXPECT_EQ(v(x.grad()), (D{0, 8, 18}));
}

TEST(InplaceNonLeaf, CopyFromAGradSourceMakesAPlainTensorANonLeaf) {
  Tensor x = leaf({1, 2, 3});
  Tensor p = zeros({3}, TensorOptions().dtype(kFloat64));
  p.copy_(x * 2.0);
  EXPECT_FALSE(p.is_leaf());
  EXPECT_EQ(p.grad_fn_name(), "CopyBackwards");
  (p * p).sum().backward();  // d/dx sum((2x)^2) = 8x
  EXPECT_EQ(v(x.grad()), (D{8, 16, 24}));
}

TEST(InplaceNonLeaf, CopyOverAGradValueCutsTheOldPathOnly) {
  // t = x*x; t.copy_(y*3): x gets a zero gradient, y gets 3.
  Tensor x = leaf({1, 2}), y = leaf({4, 5});
  Tensor t = x * x;
  t.copy_(y * 3.0);
  t.sum().backward();
  EXPECT_EQ(v(x.grad()), (D{0, 0}));
  EXPECT_EQ(v(y.grad()), (D{3, 3}));
}

TEST(InplaceNonLeaf, LeavesStillRefuseInPlaceWrites) {
  Tensor x = leaf({1, 2});
  EXPECT_NE(error_of([&] { x.fill_(1); }).find("leaf tensor that requires grad"), std::string::npos);
  EXPECT_NE(error_of([&] { x[0].zero_(); }).find("view of a leaf"), std::string::npos);
}

// ---- item 2: what each backward saves ------------------------------------------------------

struct Case {
  const char* name;
  std::function<std::vector<Tensor>()> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  std::vector<int> raises;  // one per input, then one for the output: 1 raise, 0 not, 2 skip
};

// For each input and the output: run f, write the target in place (a no-op through
// detach()), backward; it must raise the version error exactly where the table says.
void check_case(const Case& c) {
  const size_t n = c.inputs().size();
  ASSERT_EQ(c.raises.size(), n + 1) << c.name;
  for (size_t k = 0; k <= n; ++k) {
    if (c.raises[k] == 2) continue;
    std::vector<Tensor> in = c.inputs();
    Tensor y = c.f(in);
    touch(k < n ? in[k] : y);
    std::string e = error_of([&] { (y.to(kFloat64) * 1.5).sum().backward(); });
    const bool raised = e.find("modified by an inplace operation") != std::string::npos;
    EXPECT_TRUE(raised || e.empty()) << c.name << ": unexpected error: " << e;
    EXPECT_EQ(raised, c.raises[k] == 1)
        << c.name << ": write to " << (k < n ? "input " + std::to_string(k) : std::string("the output"))
        << (raised ? " raised: " + e : std::string(" did not raise"));
  }
}

std::function<std::vector<Tensor>()> one() { return [] { return std::vector<Tensor>{leaf({0.5, 1.5, 2.5, 0.7})}; }; }
std::function<std::vector<Tensor>()> two() {
  return [] { return std::vector<Tensor>{leaf({0.5, 1.5, 2.5, 0.7}), leaf({1.2, 0.3, 2.5, 0.9})}; };
}
std::function<std::vector<Tensor>()> two_first_only() {
  return [] { return std::vector<Tensor>{leaf({0.5, 1.5, 2.5, 0.7}), plain({1.2, 0.3, 2.5, 0.9})}; };
}
std::function<std::vector<Tensor>()> mat() { return [] { return std::vector<Tensor>{leaf({0.5, 1.5, 2.5, 0.7, 0.2, 1.1}, {2, 3})}; }; }
Tensor randn64(Shape s, bool grad) {
  Tensor t = randn(s, TensorOptions().dtype(kFloat64));
  return grad ? t.requires_grad_() : t;
}

using In = const std::vector<Tensor>&;

TEST(SavedTensors, UnaryOps) {
  const std::vector<Case> cases = {
      {"neg", one(), [](In i) { return -i[0]; }, {0, 0}},
      {"abs", one(), [](In i) { return i[0].abs(); }, {1, 0}},
      {"exp", one(), [](In i) { return i[0].exp(); }, {0, 1}},
      {"log", one(), [](In i) { return i[0].log(); }, {1, 0}},
      {"log1p", one(), [](In i) { return log1p(i[0]); }, {1, 0}},
      {"sqrt", one(), [](In i) { return i[0].sqrt(); }, {0, 1}},
      {"rsqrt", one(), [](In i) { return rsqrt(i[0]); }, {0, 1}},
      {"sin", one(), [](In i) { return i[0].sin(); }, {1, 0}},
      {"cos", one(), [](In i) { return i[0].cos(); }, {1, 0}},
      {"tanh", one(), [](In i) { return i[0].tanh(); }, {0, 1}},
      {"sigmoid", one(), [](In i) { return sigmoid(i[0]); }, {0, 1}},
      {"relu", one(), [](In i) { return relu(i[0]); }, {0, 1}},
      {"gelu", one(), [](In i) { return gelu(i[0]); }, {1, 0}},
      {"silu", one(), [](In i) { return silu(i[0]); }, {1, 0}},
      {"erf", one(), [](In i) { return erf(i[0]); }, {1, 0}},
      {"square", one(), [](In i) { return square(i[0]); }, {1, 0}},
      {"reciprocal", one(), [](In i) { return reciprocal(i[0]); }, {0, 1}},
      {"sign", one(), [](In i) { return sign(i[0]); }, {0, 0}},
      {"floor", one(), [](In i) { return floor(i[0]); }, {0, 0}},
      {"ceil", one(), [](In i) { return ceil(i[0]); }, {0, 0}},
      {"round", one(), [](In i) { return round(i[0]); }, {0, 0}},
      {"to", one(), [](In i) { return i[0].to(kFloat32); }, {0, 0}},
      {"clone", one(), [](In i) { return i[0].clone(); }, {0, 0}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, BinaryAndTernaryOps) {
  const std::vector<Case> cases = {
      {"add", two(), [](In i) { return i[0] + i[1]; }, {0, 0, 0}},
      {"sub", two(), [](In i) { return i[0] - i[1]; }, {0, 0, 0}},
      {"mul", two(), [](In i) { return i[0] * i[1]; }, {1, 1, 0}},
      {"mul, other needs no grad", two_first_only(), [](In i) { return i[0] * i[1]; }, {0, 1, 0}},
      {"mul by a number", one(), [](In i) { return i[0] * 3.0; }, {0, 0}},
      {"div", two(), [](In i) { return i[0] / i[1]; }, {1, 1, 0}},
      {"div, other needs no grad", two_first_only(), [](In i) { return i[0] / i[1]; }, {0, 1, 0}},
      {"div by a number", one(), [](In i) { return i[0] / 3.0; }, {0, 0}},
      {"number / x", one(), [](In i) { return 2.0 / i[0]; }, {1, 0}},
      {"pow(T, T)", two(), [](In i) { return pow(i[0], i[1]); }, {1, 1, 1}},
      {"pow(T, s)", one(), [](In i) { return pow(i[0], 3.0); }, {1, 0}},
      {"maximum", two(), [](In i) { return maximum(i[0], i[1]); }, {1, 1, 0}},
      {"minimum", two(), [](In i) { return minimum(i[0], i[1]); }, {1, 1, 0}},
      {"where", [] { return std::vector<Tensor>{plain({1, 0, 1, 0}) > 0.5, leaf({1, 2, 3, 4}), leaf({5, 6, 7, 8})}; },
       [](In i) { return where(i[0], i[1], i[2]); }, {1, 0, 0, 0}},
      {"clamp", one(), [](In i) { return clamp(i[0], 0.6, 2.0); }, {1, 0}},
      {"masked_fill", [] { return std::vector<Tensor>{leaf({1, 2, 3, 4}), plain({1, 0, 1, 0}) > 0.5}; },
       [](In i) { return masked_fill(i[0], i[1], 9.0); }, {0, 1, 0}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, Reductions) {
  const std::vector<Case> cases = {
      {"sum", mat(), [](In i) { return i[0].sum(); }, {0, 0}},
      {"sum(dims)", mat(), [](In i) { return sum(i[0], {1}); }, {0, 0}},
      {"prod", mat(), [](In i) { return prod(i[0], {1}); }, {1, 1}},
      {"amax", mat(), [](In i) { return amax(i[0], {1}); }, {1, 1}},
      {"amin", mat(), [](In i) { return amin(i[0], {1}); }, {1, 1}},
      {"mean()", mat(), [](In i) { return mean(i[0]); }, {0, 0}},
      {"mean(dims)", mat(), [](In i) { return mean(i[0], {1}); }, {1, 0}},
      {"mean(all dims)", mat(), [](In i) { return mean(i[0], {0, 1}); }, {1, 0}},
      {"var", mat(), [](In i) { return var(i[0], {1}); }, {1, 0}},
      {"std", mat(), [](In i) { return std(i[0], {1}); }, {1, 1}},
      {"logsumexp", mat(), [](In i) { return logsumexp(i[0], {1}); }, {1, 1}},
      {"softmax", mat(), [](In i) { return softmax(i[0], 1); }, {0, 1}},
      {"log_softmax", mat(), [](In i) { return log_softmax(i[0], 1); }, {0, 1}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, MatmulFamily) {
  auto pair = [](Shape a, Shape b, bool ga = true, bool gb = true) {
    return [=] { return std::vector<Tensor>{randn64(a, ga), randn64(b, gb)}; };
  };
  const std::vector<Case> cases = {
      {"dot", pair({3}, {3}), [](In i) { return matmul(i[0], i[1]); }, {1, 1, 0}},
      {"mv", pair({2, 3}, {3}), [](In i) { return matmul(i[0], i[1]); }, {1, 1, 0}},
      {"mm", pair({2, 3}, {3, 4}), [](In i) { return matmul(i[0], i[1]); }, {1, 1, 0}},
      {"mm, right needs no grad", pair({2, 3}, {3, 4}, true, false), [](In i) { return matmul(i[0], i[1]); }, {0, 1, 0}},
      {"mm, left needs no grad", pair({2, 3}, {3, 4}, false, true), [](In i) { return matmul(i[0], i[1]); }, {1, 0, 0}},
      {"bmm", pair({2, 2, 3}, {2, 3, 4}), [](In i) { return bmm(i[0], i[1]); }, {1, 1, 0}},
      {"3-D @ 2-D", pair({2, 2, 3}, {3, 4}), [](In i) { return matmul(i[0], i[1]); }, {1, 1, 0}},
      {"2-D @ 3-D copies the right", pair({2, 3}, {2, 3, 4}), [](In i) { return matmul(i[0], i[1]); }, {1, 0, 0}},
      {"expanded batch copies", pair({2, 2, 3, 4}, {2, 4, 5}), [](In i) { return matmul(i[0], i[1]); }, {1, 0, 0}},
      {"linear", [] { return std::vector<Tensor>{randn64({2, 3}, true), randn64({4, 3}, true), randn64({4}, true)}; },
       [](In i) { return linear(i[0], i[1], i[2]); }, {1, 1, 0, 0}},
      {"mm()", pair({2, 3}, {3, 4}), [](In i) { return mm(i[0], i[1]); }, {1, 1, 0}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, ViewsIndexingAndShapes) {
  auto with_index = [] { return std::vector<Tensor>{leaf({1, 2, 3, 4, 5, 6}, {2, 3}), ints({0, 2, 1, 0}, {2, 2})}; };
  const std::vector<Case> cases = {
      {"reshape", mat(), [](In i) { return i[0].reshape({3, 2}); }, {0, 0}},
      {"permute", mat(), [](In i) { return i[0].permute({1, 0}); }, {0, 0}},
      {"transpose", mat(), [](In i) { return i[0].t(); }, {0, 0}},
      {"slice", mat(), [](In i) { return i[0].slice(1, 0, 2); }, {0, 0}},
      {"select", mat(), [](In i) { return i[0].select(0, 1); }, {0, 0}},
      {"expand", one(), [](In i) { return i[0].expand({2, 4}); }, {0, 2}},  // not writable
      {"cat", two(), [](In i) { return cat({i[0], i[1]}); }, {0, 0, 0}},
      {"stack", two(), [](In i) { return stack({i[0], i[1]}); }, {0, 0, 0}},
      {"index_select", [] { return std::vector<Tensor>{leaf({1, 2, 3}), ints({2, 0})}; },
       [](In i) { return index_select(i[0], 0, i[1]); }, {0, 1, 0}},
      {"gather", with_index, [](In i) { return gather(i[0], 1, i[1]); }, {1, 1, 0}},
      {"scatter_add", [] { return std::vector<Tensor>{leaf({1, 2, 3}), ints({2, 0}), leaf({5, 6})}; },
       [](In i) { return scatter_add(i[0], 0, i[1], i[2]); }, {0, 1, 0, 0}},
      {"scatter_add, src needs no grad", [] { return std::vector<Tensor>{leaf({1, 2, 3}), ints({2, 0}), plain({5, 6})}; },
       [](In i) { return scatter_add(i[0], 0, i[1], i[2]); }, {0, 0, 0, 0}},
      {"index_add", [] { return std::vector<Tensor>{leaf({1, 2, 3}), ints({2, 0}), leaf({5, 6})}; },
       [](In i) { return index_add(i[0], 0, i[1], i[2]); }, {0, 1, 1, 0}},
      {"embedding", [] { return std::vector<Tensor>{leaf({1, 2, 3, 4, 5, 6}, {3, 2}), ints({2, 0})}; },
       [](In i) { return embedding(i[0], i[1]); }, {1, 1, 0}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, Losses) {
  auto logits = [] { return std::vector<Tensor>{leaf({0.1, 2, -1, 0.5, 0.3, 0.2}, {2, 3}), ints({2, 0})}; };
  auto pairs = [] { return std::vector<Tensor>{leaf({0.1, 2, -1}), plain({0.5, 1, 0})}; };
  const std::vector<Case> cases = {
      {"cross_entropy", logits, [](In i) { return cross_entropy(i[0], i[1]); }, {0, 1, 0}},
      {"nll_loss", logits, [](In i) { return nll_loss(i[0], i[1]); }, {1, 1, 0}},
      {"mse_loss", pairs, [](In i) { return mse_loss(i[0], i[1]); }, {1, 1, 0}},
      {"bce_with_logits", pairs, [](In i) { return binary_cross_entropy_with_logits(i[0], i[1]); }, {1, 1, 0}},
      {"layer_norm", [] { return std::vector<Tensor>{randn64({2, 3}, true), randn64({3}, true), randn64({3}, true)}; },
       [](In i) { return layer_norm(i[0], {3}, i[1], i[2]); }, {1, 1, 1, 0}},
  };
  for (const auto& c : cases) check_case(c);
}

TEST(SavedTensors, InPlaceOps) {
  // mul_/div_ save `other` and a private copy of self; clamp_ a private copy; add_ nothing.
  auto base = [](In i) { return i[0] * 1.0; };
  const std::vector<Case> cases = {
      {"add_", two(), [&](In i) { Tensor t = base(i); t.add_(i[1]); return t; }, {0, 0, 0}},
      {"mul_", two(), [&](In i) { Tensor t = base(i); t.mul_(i[1]); return t; }, {0, 1, 0}},
      {"div_", two(), [&](In i) { Tensor t = base(i); t.div_(i[1]); return t; }, {0, 1, 0}},
      {"mul_ by a number", one(), [&](In i) { Tensor t = base(i); t.mul_(2.0); return t; }, {0, 0}},
      {"clamp_", one(), [&](In i) { Tensor t = base(i); t.clamp_(0.6, 2.0); return t; }, {0, 0}},
      {"copy_", two(), [&](In i) { Tensor t = base(i); t.copy_(i[1]); return t; }, {0, 0, 0}},
      {"fill_", one(), [&](In i) { Tensor t = base(i); t.fill_(1.0); return t; }, {0, 0}},
      {"zero_", one(), [&](In i) { Tensor t = base(i); t.zero_(); return t; }, {0, 0}},
      {"relu_", one(), [&](In i) { Tensor t = base(i); t.relu_(); return t; }, {0, 1}},
  };
  for (const auto& c : cases) check_case(c);
}

// ---- the messages ---------------------------------------------------------------------------

TEST(SavedTensors, MessageNamesTheProducerOfTheSavedTensor) {
  manual_seed(3);
  Tensor y = randn({3, 3}).requires_grad_();
  Tensor s = log_softmax(sigmoid(y), 1);
  EXPECT_EQ(s.grad_fn_name(), "LogSoftmaxBackward0");
  s.copy_(randn({3, 3}));
  std::string e = error_of([&] { (s * 2.0).sum().backward(); });
  EXPECT_NE(e.find("one of the variables needed for gradient computation has been modified by an "
                   "inplace operation: [float [3, 3]], which is output 0 of LogSoftmaxBackward0, "
                   "is at version 1; expected version 0 instead"),
            std::string::npos)
      << e;
  EXPECT_FALSE(y.grad().defined()) << "nothing accumulated";
}

TEST(SavedTensors, ExpSavesItsResultNotItsInput) {
  manual_seed(4);
  Tensor x = randn({4}).requires_grad_();
  Tensor a = x.abs().clone();
  Tensor e = a.exp();
  a.add_(1.0);
  e.sum().backward();  // PyTorch accepts: d/dx sum(exp(|x|)) = exp(|x|) * sign(x)
  std::vector<double> xs = v(x), g = v(x.grad());
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(g[i], std::exp(std::fabs(xs[i])) * (xs[i] > 0 ? 1 : -1), 1e-5);
  // And a write to the result names abs's output as the saved input of abs.
  Tensor b = x.abs();
  Tensor s = b.sin();
  b.detach().add_(0.0);
  std::string err = error_of([&] { s.sum().backward(); });
  EXPECT_NE(err.find("[float [4]], which is output 0 of AbsBackward0, is at version 1; expected "
                     "version 0"),
            std::string::npos)
      << err;
}

TEST(SavedTensors, LeafAndPlainSavedTensorsHaveNoProducerInTheMessage) {
  Tensor x = leaf({1, 2});
  Tensor y = x.sin();
  {
    NoGradGuard g;
    x.add_(0.0);  // allowed under no_grad; bumps the version
  }
  std::string e = error_of([&] { y.sum().backward(); });
  EXPECT_NE(e.find("[double [2]] is at version 1; expected version 0 instead"), std::string::npos) << e;
}

TEST(SavedTensors, Relu_SavesTheTensorItWrote) {
  Tensor x = leaf({-1, 2});
  Tensor t = x.clone();
  t.relu_();
  EXPECT_EQ(t.version(), 1);
  t.mul_(2.0);
  std::string e = error_of([&] { t.sum().backward(); });
  EXPECT_NE(e.find("which is output 0 of ReluBackward0, is at version 2; expected version 1"),
            std::string::npos)
      << e;
  Tensor u = x.clone();
  u.relu_();
  (u * 3.0).sum().backward();
  EXPECT_EQ(v(x.grad()), (D{0, 3}));
}

TEST(SavedTensors, WritesThroughAnyAliasCount) {
  auto run = [](const std::function<void(const Tensor&)>& write) {
    Tensor x = leaf({0.5, 1.5, 2.5, 3.5});
    Tensor t = x * 1.0;
    Tensor s = t.sin();
    write(t);
    return error_of([&] { s.sum().backward(); });
  };
  EXPECT_NE(run([](const Tensor& t) { t.detach().add_(0.0); }).find("modified by an inplace"), std::string::npos);
  EXPECT_NE(run([](const Tensor& t) { t[1].add_(0.0); }).find("modified by an inplace"), std::string::npos);
  EXPECT_NE(run([](const Tensor& t) { t.view({2, 2}).mul_(1.0); }).find("modified by an inplace"), std::string::npos);
  EXPECT_EQ(run([](const Tensor& t) { t.clone().add_(1.0); }), "");
}

TEST(SavedTensors, AWriteBeforeTheSaveIsFine) {
  Tensor x = leaf({1, 2});
  Tensor t = x * 1.0;
  t.add_(1.0);
  Tensor s = t.sin();
  s.sum().backward();  // d/dx sin(x + 1) = cos(x + 1)
  EXPECT_NEAR(v(x.grad())[0], std::cos(2.0), 1e-12);
  EXPECT_NEAR(v(x.grad())[1], std::cos(3.0), 1e-12);
}

// ---- item 5: create_graph gradients stay connected ------------------------------------------

TEST(CreateGraph, ReluGradRequiresGradAndItsGradientIsZero) {
  // PyTorch: g = threshold_backward(1, relu(x), 0) requires grad; d(sum g)/dx = 0.
  Tensor x = leaf({-1, 2, 3});
  Tensor loss = relu(x).sum();
  Tensor g = autograd::grad({loss}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  EXPECT_TRUE(g.requires_grad());
  EXPECT_EQ(v(g), (D{0, 1, 1}));
  g.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(v(x.grad()), (D{0, 0, 0}));
}

TEST(CreateGraph, SignTimesXAndSecondOrderValues) {
  // loss = sum(sign(x) * x) = sum|x|: g = sign(x) (requires grad through mul), d(sum g)/dx = 0.
  Tensor x = leaf({-1.5, 2});
  Tensor g = autograd::grad({(sign(x) * x).sum()}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  EXPECT_TRUE(g.requires_grad());
  EXPECT_EQ(v(g), (D{-1, 1}));
  g.sum().backward();
  EXPECT_EQ(v(x.grad()), (D{0, 0}));
}

TEST(CreateGraph, SecondDerivativesThroughResultSavingOps) {
  // loss = sum(exp(x) + tanh(x) + sigmoid(x) + sqrt(x) + 1/x) at x = 0.5 and 2:
  // d2/dx2 = exp(x) - 2 tanh(x) (1 - tanh^2) + s (1 - s)(1 - 2s) - x^(-3/2)/4 + 2/x^3.
  Tensor x = leaf({0.5, 2});
  Tensor loss = (x.exp() + x.tanh() + sigmoid(x) + x.sqrt() + reciprocal(x)).sum();
  Tensor g = autograd::grad({loss}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  g.sum().backward();
  std::vector<double> got = v(x.grad());
  for (int i = 0; i < 2; ++i) {
    const double a = i == 0 ? 0.5 : 2.0, t = std::tanh(a), s = 1 / (1 + std::exp(-a));
    const double want = std::exp(a) - 2 * t * (1 - t * t) + s * (1 - s) * (1 - 2 * s) -
                        0.25 * std::pow(a, -1.5) + 2 / (a * a * a);
    EXPECT_NEAR(got[i], want, 1e-10) << i;
  }
}

TEST(CreateGraph, ThirdOrderOfCube) {
  // d/dx x^3 = 3x^2, d2 = 6x, d3 = 6.
  Tensor x = leaf({2});
  Tensor g1 = autograd::grad({(x * x * x).sum()}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  Tensor g2 = autograd::grad({g1.sum()}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  EXPECT_EQ(v(g2), (D{12}));
  g2.sum().backward();
  EXPECT_EQ(v(x.grad()), (D{6}));
}

}  // namespace
}  // namespace sloth

namespace sloth {
namespace {

// LibTorch's retain_graph is optional and defaults to create_graph; an explicit false frees
// the graph even with create_graph (PyTorch raises on the second pass, and so does sloth).
TEST(CreateGraph, ExplicitRetainFalseFreesTheGraph) {
  Tensor x = from_vector<float>({2.f}, {1}).requires_grad_();
  Tensor g1 = autograd::grad({(x * x * x).sum()}, {x}, {}, /*retain_graph=*/false, true)[0];
  EXPECT_EQ(g1.to_vector<float>(), (std::vector<float>{12.f}));
  EXPECT_TRUE(g1.requires_grad());
  try {
    autograd::grad({g1.sum()}, {x}, {}, false, true);
    FAIL() << "expected the freed graph to be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(x.grad().defined());  // nothing changed
}

// ---- a tensor and a C++ number ---------------------------------------------------------------
// `x op number` with x requiring grad records its node without a tensor for the number
// (sloth/dispatch.cc call_op_number): the node must be the one call_op makes with a wrapped
// number. Values by hand: d(s*x)/dx = s, d(s/x)/dx = -s/x^2, d2(s/x)/dx2 = 2s/x^3.

TEST(NumberOperand, GradientsAndNodeNames) {
  struct Case {
    const char* what;
    std::function<Tensor(const Tensor&)> f;
    const char* name;
    D grad;  // at x = [0.5, -2]
  };
  const std::vector<Case> cases = {
      {"x * 3.0", [](const Tensor& x) { return x * 3.0; }, "MulBackward0", {3, 3}},
      {"3.0 * x", [](const Tensor& x) { return 3.0 * x; }, "MulBackward0", {3, 3}},
      {"x * 3", [](const Tensor& x) { return x * 3; }, "MulBackward0", {3, 3}},
      {"x / 4.0", [](const Tensor& x) { return x / 4.0; }, "DivBackward0", {0.25, 0.25}},
      {"2.0 / x", [](const Tensor& x) { return 2.0 / x; }, "DivBackward0", {-8, -0.5}},
      {"x + 2", [](const Tensor& x) { return x + 2; }, "AddBackward0", {1, 1}},
      {"x - 1.5", [](const Tensor& x) { return x - 1.5; }, "SubBackward0", {1, 1}},
      {"1.5 - x", [](const Tensor& x) { return 1.5 - x; }, "SubBackward0", {-1, -1}},
  };
  for (const auto& c : cases) {
    Tensor x = leaf({0.5, -2});
    Tensor y = c.f(x);
    EXPECT_EQ(y.dtype(), kFloat64) << c.what;
    EXPECT_EQ(y.grad_fn_name(), c.name) << c.what;
    y.sum().backward();
    EXPECT_EQ(v(x.grad()), c.grad) << c.what;
  }
  // A float32 tensor stays float32 (a number never widens it), and so does its gradient.
  Tensor x32 = tensor({0.5, -2}, {2}, TensorOptions().dtype(kFloat32).requires_grad());
  Tensor y32 = x32 * 2.5;
  EXPECT_EQ(y32.dtype(), kFloat32);
  y32.sum().backward();
  EXPECT_EQ(x32.grad().dtype(), kFloat32);
  EXPECT_EQ(v(x32.grad()), (D{2.5, 2.5}));
}

TEST(NumberOperand, DoubleBackward) {
  Tensor x = leaf({0.5, -2});
  auto g = autograd::grad({(2.0 / x).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_EQ(v(g[0]), (D{-8, -0.5}));
  g[0].sum().backward();
  EXPECT_EQ(v(x.grad()), (D{32, -0.5}));  // 4 / x^3
  Tensor z = leaf({0.5, -2});
  auto h = autograd::grad({(z * z * 3.0).sum()}, {z}, {}, std::nullopt, true);
  EXPECT_EQ(v(h[0]), (D{3, -12}));  // 6z
  h[0].sum().backward();
  EXPECT_EQ(v(z.grad()), (D{6, 6}));
}

TEST(NumberOperand, RetainGraphAndSavedVersions) {
  // x * s saves no tensor (PyTorch keeps s as a Scalar): a second backward is fine.
  Tensor x = leaf({0.5, -2});
  Tensor y = (x * 3.0).sum();
  y.backward();
  y.backward();
  EXPECT_EQ(v(x.grad()), (D{6, 6}));
  // s / x saves x: a second backward without retain_graph fails...
  Tensor w = leaf({0.5, -2});
  Tensor r = (2.0 / w).sum();
  r.backward();
  std::string e = error_of([&] { r.backward(); });
  EXPECT_NE(e.find("backward through the graph a second time"), std::string::npos) << e;
  // ...and so does a write to x after the op; a write to the operand of x * s does not.
  Tensor h = leaf({0.5, -2}) * 1.0;
  Tensor q = 2.0 / h, p = h * 3.0;
  touch(h);
  e = error_of([&] { q.sum().backward(); });
  EXPECT_NE(e.find("modified by an inplace operation: [double [2]], which is output 0 of "
                   "MulBackward0, is at version 1; expected version 0 instead"),
            std::string::npos)
      << e;
  Tensor base = leaf({0.5, -2});
  Tensor h2 = base * 1.0;
  Tensor p2 = h2 * 3.0;
  touch(h2);
  p2.sum().backward();
  EXPECT_EQ(v(base.grad()), (D{3, 3}));
}

TEST(NumberOperand, NoHistoryWithoutGrad) {
  Tensor x = leaf({0.5, -2});
  {
    NoGradGuard ng;
    Tensor y = x * 3.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn_name(), "");
  }
  Tensor d = x.detach() * 3.0;
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(v(d), (D{1.5, -6}));
  // A plain tensor that once had autograd state (requires_grad_(false)) records none either.
  Tensor p = plain({1, 2});
  p.requires_grad_();
  p.requires_grad_(false);
  Tensor q = p * 2.0;
  EXPECT_FALSE(q.requires_grad());
  EXPECT_EQ(v(q), (D{2, 4}));
}

// ---- .grad accumulates in place (PyTorch's AccumulateGrad without create_graph) ------------
// Values checked on torch 1.13: after (w*2).sum().backward(), g = w.grad, (w*3).sum().backward():
// g is w.grad and holds 5s; a view of .grad sees the next backward's sum (version 1); a leaf's
// y.backward(gout) twice gives 2*gout and leaves gout unchanged.
TEST(GradAccumulation, GradIsTheSameTensorAndAccumulatesInPlace) {
  Tensor w = leaf({1, 1, 1});
  (w * 2.0).sum().backward();
  Tensor g = w.grad();
  (w * 3.0).sum().backward();
  EXPECT_EQ(g.impl(), w.grad().impl());
  EXPECT_EQ(v(g), (D{5, 5, 5}));
  EXPECT_FALSE(g.requires_grad());
  // zero_grad(false) zeroes that same tensor, and the next backward fills it again.
  optim::SGD opt({w}, {.lr = 0.1});
  opt.zero_grad(/*set_to_none=*/false);
  (w * 4.0).sum().backward();
  EXPECT_EQ(v(g), (D{4, 4, 4}));
}

TEST(GradAccumulation, AViewOfGradSeesTheSum) {
  Tensor w = leaf({1, 1, 1, 1}, {2, 2});
  (w * 2.0).sum().backward();
  Tensor flat = w.grad().view({4});
  const int64_t before = w.grad().version();
  (w * w).sum().backward();
  EXPECT_EQ(v(flat), (D{4, 4, 4, 4}));
  EXPECT_EQ(w.grad().version(), before + 1);
}

TEST(GradAccumulation, AccumulatingNeverWritesIntoTheIncomingGradient) {
  // y is a leaf: its first .grad is made from gout itself, which must stay the caller's.
  Tensor y = leaf({0, 0, 0});
  Tensor gout = plain({1, 2, 3});
  y.backward(gout);
  y.backward(gout);
  EXPECT_EQ(v(y.grad()), (D{2, 4, 6}));
  EXPECT_EQ(v(gout), (D{1, 2, 3}));
}

TEST(GradAccumulation, CreateGraphMakesANewTensorWithHistory) {
  // With create_graph the sum keeps its history: .grad is a new tensor (PyTorch too).
  Tensor w = leaf({2, 3});
  (w * w).sum().backward({}, /*retain_graph=*/true, /*create_graph=*/true);
  Tensor g1 = w.grad();
  (w * w).sum().backward({}, true, true);
  EXPECT_NE(g1.impl(), w.grad().impl());
  EXPECT_EQ(v(g1), (D{4, 6}));
  EXPECT_EQ(v(w.grad()), (D{8, 12}));
  EXPECT_TRUE(w.grad().requires_grad());
}

}  // namespace
}  // namespace sloth
