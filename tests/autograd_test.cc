// Autograd with PyTorch's semantics; backward is lazy IR in the same graph as the step.
#include <cmath>

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
TEST(Autograd, RetainGraphAccumulatesAndThirdBackwardFails) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x).sum();
  y.backward({}, true);
  y.backward();
  EXPECT_EQ(v(x.grad()), (D{4, 8, 12}));
  std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("backward through the graph a second time"), std::string::npos) << e;
  EXPECT_EQ(v(x.grad()), (D{4, 8, 12})) << "nothing lost";
}

// torch.prod's gradient is the product of the other elements, zeros included (values as
// PyTorch 1.13 gives them).
TEST(Autograd, ProdGradientWithZeros) {
  Tensor x = leaf({2, 0, 3});
  prod(x).backward();
  EXPECT_EQ(v(x.grad()), (D{0, 6, 0}));
  Tensor y = leaf({0, 0, 3});
  prod(y).backward();
  EXPECT_EQ(v(y.grad()), (D{0, 0, 0}));
  // Per row: no zero, one zero, two zeros; and weighted by an upstream gradient.
  Tensor z = leaf({2, 4, 5, 0, 3, 7, 0, 0, 1}, {3, 3});
  (prod(z, {1}) * tensor({1.0, 2.0, 3.0}, {3}, kFloat64)).sum().backward();
  EXPECT_EQ(v(z.grad()), (D{20, 10, 8, 42, 0, 0, 0, 0, 0}));
  // Without zeros the gradient is unchanged (p / x).
  Tensor w = leaf({1.5, -2, 4});
  prod(w).backward();
  EXPECT_EQ(v(w.grad()), (D{-8, 6, -3}));
}

TEST(Autograd, NonLeafGradOnlyWithRetainGrad) {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3.0;
  Tensor k = x * 4.0;
  k.retain_grad();
  (h.sum() + k.sum() * 2.0).backward();
  EXPECT_FALSE(h.grad().defined());
  EXPECT_EQ(v(k.grad()), (D{2, 2}));
  EXPECT_EQ(v(x.grad()), (D{11, 11}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(h.is_leaf());
}

TEST(Autograd, HigherOrderWithCreateGraph) {
  Tensor x = leaf({1, 2, 3});
  auto g = autograd::grad({(x * x * x).sum()}, {x}, {}, /*retain_graph=*/std::nullopt, true);
  EXPECT_EQ(v(g[0]), (D{3, 12, 27}));
  g[0].sum().backward();
  EXPECT_EQ(v(x.grad()), (D{6, 12, 18}));
}

TEST(Autograd, BackwardOnNonScalarNeedsAGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2.0;
  std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("only for scalar outputs"), std::string::npos) << e;
  y.backward(tensor({1, 10}, {-1}, TensorOptions().dtype(kFloat64)));
  EXPECT_EQ(v(x.grad()), (D{2, 20}));
}

TEST(Autograd, UnusedInputNeedsAllowUnused) {
  Tensor x = leaf({1}), z = leaf({2});
  Tensor y = (x * 2.0).sum();
  std::string e = error_of([&] { autograd::grad({y}, {x, z}, {}, true); });
  EXPECT_NE(e.find("allow_unused"), std::string::npos) << e;
  auto g = autograd::grad({y}, {x, z}, {}, false, false, true);
  EXPECT_EQ(v(g[0]), (D{2}));
  EXPECT_FALSE(g[1].defined());
}

TEST(Autograd, InPlaceOnLeafThatRequiresGradFailsButWorksUnderNoGrad) {
  Tensor x = leaf({1, 2});
  std::string e = error_of([&] { x.add_(1); });
  EXPECT_NE(e.find("leaf tensor that requires grad"), std::string::npos) << e;
  e = error_of([&] { x[0].mul_(2); });
  EXPECT_NE(e.find("view of a leaf"), std::string::npos) << e;
  EXPECT_EQ(v(x), (D{1, 2}));
  EXPECT_EQ(x.version(), 0);
  {
    NoGradGuard g;
    x.add_(1);
  }
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(v(x), (D{2, 3}));
}

TEST(Autograd, SavedValueModifiedInPlaceIsCaught) {
  Tensor x = leaf({1, 2});
  Tensor a = x * 1.0;
  Tensor y = (a * a).sum();
  a.add_(1);
  std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("modified by an inplace operation"), std::string::npos) << e;
  EXPECT_FALSE(x.grad().defined()) << "nothing accumulated";
}

TEST(Autograd, CopySlicesRebasesHistory) {
  Tensor x = tensor({1, 1, 1, 1}, {-1}, TensorOptions().dtype(kFloat64).requires_grad());
  Tensor a = x.clone();
  a.slice(0, 1, 4).mul_(2);
  EXPECT_EQ(a.grad_fn_name(), "CopySlices");
  a.sum().backward();
  EXPECT_EQ(v(x.grad()), (D{1, 2, 2, 2}));
}

TEST(Autograd, WriteOfAGradTensorIntoAViewOfAPlainTensor) {
  Tensor w = leaf({3, 4});
  Tensor buf = zeros({4}, TensorOptions().dtype(kFloat64));
  buf.slice(0, 1, 3).copy_(w * 2.0);
  EXPECT_TRUE(buf.requires_grad());
  (buf * tensor({1, 10, 100, 1000}, {-1}, TensorOptions().dtype(kFloat64))).sum().backward();
  EXPECT_EQ(v(w.grad()), (D{20, 200}));
  EXPECT_EQ(v(buf), (D{0, 6, 8, 0}));
}

TEST(Autograd, HooksCanReplaceGradientsAndStayOnTheirNode) {
  Tensor x = leaf({1, 2});
  x.register_hook([](const Tensor& g) { return g * 2.0; });
  (x * 3.0).sum().backward();
  EXPECT_EQ(v(x.grad()), (D{6, 6}));

  Tensor y = leaf({1, 1});
  Tensor h = y * 1.0;
  std::vector<double> seen_old, seen_new;
  h.register_hook([&](const Tensor& g) { seen_old = g.to_vector<double>(); return Tensor(); });
  h.mul_(5.0);  // h's grad_fn is replaced; the old hook stays on the old node
  h.register_hook([&](const Tensor& g) { seen_new = g.to_vector<double>(); return Tensor(); });
  (h * tensor({1, 2}, {-1}, TensorOptions().dtype(kFloat64))).sum().backward();
  EXPECT_EQ(seen_new, (D{1, 2}));
  EXPECT_EQ(seen_old, (D{5, 10}));
  EXPECT_EQ(v(y.grad()), (D{5, 10}));
}

TEST(Autograd, NoGradAndDetach) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard g;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE((x * 2.0).requires_grad());
    {
      EnableGradGuard e;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
  }
  EXPECT_FALSE((x * 2.0).detach().requires_grad());
  EXPECT_FALSE((x * 2.0).view({-1}).detach().requires_grad());
  Tensor d = x * 2.0;
  d.detach_();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_FALSE((x > 1.0).requires_grad()) << "comparisons are not differentiable";
  EXPECT_FALSE(argmax(x, 0).requires_grad());
}

TEST(Autograd, ViewMadeUnderNoGrad) {
  Tensor x = leaf({1, 2, 3});
  Tensor h = x * 2.0;
  Tensor v;
  {
    NoGradGuard g;
    v = h.view({-1});
  }
  EXPECT_TRUE(v.requires_grad());
  EXPECT_EQ(v.grad_fn_name(), "");
  std::string e = error_of([&] { v.add_(1); });
  EXPECT_NE(e.find("view was created in no_grad mode"), std::string::npos) << e;
  EXPECT_EQ(v.version(), 0);
}

TEST(Autograd, RequiresGradOfCachedReplayFollowsAutogradRules) {
  for (int i = 0; i < 3; ++i) {  // the 2nd and 3rd run replay a cached plan
    Tensor x = leaf({1, 2, 3, 4});
    Tensor y = sin(x);
    Tensor o0 = y.slice(0, 0, 2), o1 = y.slice(0, 2, 4), o2 = y.detach();
    mark_step();
    EXPECT_TRUE(o0.requires_grad());
    EXPECT_TRUE(o1.requires_grad());
    EXPECT_FALSE(o2.requires_grad());
    (o0.sum() + o1.sum()).backward();
    auto g = v(x.grad());
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(g[k], std::cos(k + 1.0), 1e-12);
  }
}

// ---- custom functions ------------------------------------------------------------------------
struct Square : autograd::Function<Square> {
  static Tensor forward(autograd::AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = 2.0;
    return x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * x * ctx->saved_data["scale"].toDouble()};
  }
};

struct ViewAndIndex : autograd::Function<ViewAndIndex> {
  static std::vector<Tensor> forward(autograd::AutogradContext* ctx, Tensor x) {
    Tensor flat = x.view({-1});
    Tensor idx = argmax(x, 0);
    Tensor nd = x.view({-1});
    ctx->mark_non_differentiable({idx, nd});
    return {flat, idx, nd};
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[0] * 3.0};
  }
};

struct AddOneInPlace : autograd::Function<AddOneInPlace> {
  static Tensor forward(autograd::AutogradContext* ctx, Tensor x) {
    x.add_(1);
    ctx->mark_dirty({x});
    return x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[0] * 10.0};
  }
};

TEST(Autograd, CustomFunctions) {
  Tensor x = leaf({1, 2, 3});
  Square::apply(x).sum().backward();
  EXPECT_EQ(v(x.grad()), (D{2, 4, 6}));

  Tensor y = leaf({1, 5, 2});
  auto outs = ViewAndIndex::apply(y);
  EXPECT_TRUE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].requires_grad());
  EXPECT_FALSE(outs[2].requires_grad()) << "non-differentiable also when the output is a view";
  mark_step();
  EXPECT_FALSE(outs[2].requires_grad());
  outs[0].sum().backward();
  EXPECT_EQ(v(y.grad()), (D{3, 3, 3}));

  Tensor z = leaf({1, 2});
  Tensor c = z * 1.0;
  Tensor r = AddOneInPlace::apply(c);
  EXPECT_EQ(r.impl(), c.impl()) << "a dirty input is returned as itself";
  EXPECT_EQ(v(c), (D{2, 3}));
  r.sum().backward();
  EXPECT_EQ(v(z.grad()), (D{10, 10}));
}

// ---- transforms --------------------------------------------------------------------------------
TEST(Transforms, GradOfFactoryCopiedInput) {
  auto f = [](Tensor x) {
    Tensor z = tensor(0.0, TensorOptions().dtype(kFloat64));
    z.copy_(x);
    return z.sum();
  };
  Tensor x = tensor(3.14, TensorOptions().dtype(kFloat64));
  EXPECT_DOUBLE_EQ(func::grad(f)(x).item(), 1.0);
  EXPECT_DOUBLE_EQ(func::grad(func::grad(f))(x).item(), 0.0);
}

TEST(Transforms, ConstantsMadeInsideAreLifted) {
  auto f = [](Tensor x) {
    Tensor c = tensor({1, 2, 3}, {-1}, TensorOptions().dtype(kFloat64));
    return (c * x).sum();
  };
  EXPECT_DOUBLE_EQ(func::grad(f)(tensor(2.0, TensorOptions().dtype(kFloat64))).item(), 6.0);
}

TEST(Transforms, NoPerturbationConfusion) {
  // d/dx [ x * (d/dy (x * y))(at y = 1) ] = d/dx [x * x] = 2x
  auto outer = [](Tensor x) {
    auto inner = [x](Tensor y) { return (x * y).sum(); };
    Tensor one = tensor(1.0, TensorOptions().dtype(kFloat64));
    return (x * func::grad(inner)(one)).sum();
  };
  EXPECT_DOUBLE_EQ(func::grad(outer)(tensor(3.0, TensorOptions().dtype(kFloat64))).item(), 6.0);
  // Third derivative of x^4 at 2: 24 x = 48.
  auto f = [](Tensor x) { return (x * x * x * x).sum(); };
  EXPECT_DOUBLE_EQ(func::grad(func::grad(func::grad(f)))(tensor(2.0, TensorOptions().dtype(kFloat64))).item(), 48.0);
}

TEST(Transforms, ValueAndGradAndVjp) {
  auto f = [](Tensor x) { return (x * x).sum(); };
  auto [val, g] = func::value_and_grad(f)(tensor({1, 2}, {-1}, TensorOptions().dtype(kFloat64)));
  EXPECT_DOUBLE_EQ(val.item(), 5.0);
  EXPECT_EQ(v(g), (D{2, 4}));
  EXPECT_FALSE(g.requires_grad());
  auto [out, fn] = func::vjp([](Tensor a, Tensor b) { return a * b; },
                             tensor({1, 2}, {-1}, TensorOptions().dtype(kFloat64)),
                             tensor({3, 4}, {-1}, TensorOptions().dtype(kFloat64)));
  EXPECT_EQ(v(out), (D{3, 8}));
  auto grads = fn(tensor({1, 10}, {-1}, TensorOptions().dtype(kFloat64)));
  EXPECT_EQ(v(grads[0]), (D{3, 40}));
  EXPECT_EQ(v(grads[1]), (D{1, 20}));
}

// ---- one step, one graph -------------------------------------------------------------------------
TEST(Autograd, MlpStepForwardBackwardAndSgdAreOneGraph) {
  manual_seed(1);
  Tensor w1 = (randn({8, 16}) * 0.3).detach().requires_grad_();
  Tensor w2 = (randn({16, 3}) * 0.3).detach().requires_grad_();
  Tensor x = randn({4, 8});
  Tensor y = from_vector<int64_t>({0, 1, 2, 1}, {4});
  mark_step();
  reset_metrics();
  Tensor loss = cross_entropy(matmul(relu(matmul(x, w1)), w2), y);
  loss.backward();
  {
    NoGradGuard g;
    w1.sub_(w1.grad() * 0.1);
    w2.sub_(w2.grad() * 0.1);
  }
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, 1);
  EXPECT_GT(metrics().nodes_executed, 20);
  EXPECT_EQ(metrics().graphs_executed, 1);
  double l0 = loss.item();
  EXPECT_EQ(metrics().graphs_executed, 1) << "the loss was computed in that graph";
  Tensor loss2 = cross_entropy(matmul(relu(matmul(x, w1)), w2), y);
  EXPECT_LT(loss2.item(), l0);
}


// Two outputs of different shapes: a [4] copy and a [2, 2] copy.
struct TwoShapes : autograd::Function<TwoShapes> {
  static std::vector<Tensor> forward(autograd::AutogradContext*, Tensor x) {
    return {x * 1.0, x.reshape({2, 2}) * 1.0};
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[1].reshape({-1})};
  }
};

// A backward node keeps an input's shape/dtype/device as a tag where it can be told again at
// backward (from the edge's producer, or a 0-dim cpu operand's dtype) and stores the rest; the
// formulas must see the same infos either way (sum_to shapes, cat's split sizes, dtype casts).
TEST(Autograd, InputInfoFromProducerScalarAndStored) {
  // A float64 0-dim operand that requires grad with a float32 tensor: the result is float32,
  // the 0-dim input's gradient comes back as a float64 0-dim tensor (its info is a tag).
  Tensor s = tensor({2.0}, {}, TensorOptions().dtype(kFloat64).requires_grad());
  Tensor x = tensor({1.0, 2.0, 3.0}, {3}, TensorOptions().dtype(kFloat32).requires_grad());
  Tensor y = s * x;
  EXPECT_EQ(y.dtype(), kFloat32);
  y.sum().backward();
  EXPECT_EQ(s.grad().dtype(), kFloat64);
  EXPECT_EQ(s.grad().shape(), Shape{});
  EXPECT_EQ(v(s.grad()), (D{6}));
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(v(x.grad()), (D{2, 2, 2}));

  // An operand without grad first (stored info), one with grad second (from its producer's
  // output 1, of another shape than output 0): the broadcast gradient is summed to [2, 2].
  Tensor a = leaf({1, 2, 3, 4});
  std::vector<Tensor> two = TwoShapes::apply(a);
  Tensor w = tensor({1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400}, {3, 2, 2}, kFloat64);
  (w * two[1]).sum().backward();  // [3, 2, 2]: two[1]'s gradient is w summed over dim 0
  EXPECT_EQ(v(a.grad()), (D{111, 222, 333, 444}));

  // where(cond, grad, no-grad [3]): cond (bool) and b are stored, a reads its producer.
  Tensor c = tensor({1.0, 0.0, 1.0}, {3}, kFloat64) > 0.5;
  Tensor g = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({7.0, 8.0, 9.0}, {3}, kFloat64);
  (where(c, g * 2.0, b) * tensor({1.0, 10.0}, {2, 1}, kFloat64)).sum().backward();
  EXPECT_EQ(v(g.grad()), (D{2, 0, 2, 20, 0, 20}));

  // An operand without grad with the result's info (its info is the node's output info):
  // matmul's backward reads both operands' shapes ([3, 2, 2] folds into 6 rows of x).
  Tensor xb = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 2, 2}, kFloat64);
  Tensor wm = leaf({1, 2, 3, 4}, {2, 2});
  matmul(xb, wm).sum().backward();
  EXPECT_EQ(v(wm.grad()), (D{36, 36, 42, 42}));

  // More inputs than the node keeps tags inline, mixed with and without grad, sizes 1..8:
  // cat's backward splits by every input's recorded length.
  std::vector<Tensor> in;
  std::vector<Tensor> leaves;
  double next_value = 0;
  for (int64_t i = 0; i < 8; ++i) {
    std::vector<double> vals;
    for (int64_t k = 0; k <= i; ++k) vals.push_back(next_value++);
    if (i % 2 == 0) {
      leaves.push_back(leaf(vals, {i + 1}));
      in.push_back(leaves.back());
    } else {
      in.push_back(tensor(vals, {i + 1}, kFloat64));
    }
  }
  Tensor cat_all = cat(in);
  ASSERT_EQ(cat_all.shape(), Shape{36});
  (cat_all * arange(0, 36).to(kFloat64)).sum().backward();
  // Leaf i (even) sits at offset i*(i+1)/2: its gradient is the positions it covers.
  for (int64_t i = 0; i < 8; i += 2) {
    const int64_t off = i * (i + 1) / 2;
    D want;
    for (int64_t k = 0; k <= i; ++k) want.push_back(static_cast<double>(off + k));
    EXPECT_EQ(v(leaves[i / 2].grad()), want) << "input " << i;
  }
}

}  // namespace
}  // namespace sloth
