// Optimizers against updates computed by hand (in double, PyTorch 1.13's rules) for 3 steps;
// learning-rate changes never add a plan; schedules; zero_grad.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;
using V = std::vector<double>;

const V kStart = {1.0, -2.0, 3.0, 0.25};
const V kCoef = {0.5, 1.0, 2.0, -3.0};   // loss = sum(c * p^2)  =>  grad = 2 c p

V grad_of(const V& p) {
  V g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2 * kCoef[i] * p[i];
  return g;
}

// Runs `steps` steps of `opt` on p (float64), each: zero_grad, backward, step, mark_step.
template <class Opt>
V run(Tensor p, Opt& opt, int steps) {
  Tensor c = tensor(kCoef, {4}, TensorOptions(kFloat64));
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = (c * p * p).sum();
    loss.backward();
    opt.step();
    mark_step();
  }
  return p.to_vector<double>();
}

Tensor param() {
  return tensor(kStart, {4}, TensorOptions(kFloat64).requires_grad());
}

void expect_near(const V& got, const V& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
}

// ---- hand-written references (torch/optim/sgd.py, adam.py, adamw.py of PyTorch 1.13) ----
V sgd_ref(V p, optim::SGDOptions o, int steps) {
  V buf;
  for (int s = 0; s < steps; ++s) {
    V d = grad_of(p);
    for (size_t i = 0; i < p.size(); ++i) d[i] += o.weight_decay * p[i];
    if (o.momentum != 0) {
      if (buf.empty()) buf = d;
      else for (size_t i = 0; i < p.size(); ++i) buf[i] = o.momentum * buf[i] + (1 - o.dampening) * d[i];
      for (size_t i = 0; i < p.size(); ++i) d[i] = o.nesterov ? d[i] + o.momentum * buf[i] : buf[i];
    }
    for (size_t i = 0; i < p.size(); ++i) p[i] -= o.lr * d[i];
  }
  return p;
}

V adam_ref(V p, optim::AdamOptions o, bool decoupled, int steps) {
  V m(p.size(), 0), v(p.size(), 0);
  for (int t = 1; t <= steps; ++t) {
    V g = grad_of(p);
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else g[i] += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
      double denom = std::sqrt(v[i]) / std::sqrt(bc2) + o.eps;
      p[i] -= o.lr / bc1 * m[i] / denom;
    }
  }
  return p;
}

TEST(SGD, PlainMatchesHandComputedFirstStep) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  // grad = 2 c p = [1, -4, 12, -1.5]; p - 0.1 g:
  expect_near(run(p, opt, 1), {0.9, -1.6, 1.8, 0.4});
  expect_near(p.to_vector<double>(), sgd_ref(kStart, {.lr = 0.1}, 1));
  run(p, opt, 2);
  expect_near(p.to_vector<double>(), sgd_ref(kStart, {.lr = 0.1}, 3));
}

TEST(SGD, MomentumDampeningWeightDecay) {
  optim::SGDOptions o{.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.1};
  Tensor p = param();
  optim::SGD opt({p}, o);
  expect_near(run(p, opt, 3), sgd_ref(kStart, o, 3));
  // Hand-computed for element 0 (c = 0.5): step 1: d = 1 + 0.1 = 1.1, buf = 1.1,
  // p = 1 - 0.05*1.1 = 0.945.
  EXPECT_NEAR(sgd_ref(kStart, o, 1)[0], 0.945, 1e-15);
}

TEST(SGD, Nesterov) {
  optim::SGDOptions o{.lr = 0.02, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true};
  Tensor p = param();
  optim::SGD opt({p}, o);
  expect_near(run(p, opt, 3), sgd_ref(kStart, o, 3));
  EXPECT_THROW(optim::SGD({param()}, {.lr = 0.1, .nesterov = true}), Error);
}

TEST(Adam, MatchesHandComputed) {
  optim::AdamOptions o{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05};
  Tensor p = param();
  optim::Adam opt({p}, o);
  // First step of Adam moves each element by ~lr * sign(g) (m_hat / sqrt(v_hat) = sign(g)).
  auto one = adam_ref(kStart, o, false, 1);
  EXPECT_NEAR(one[0], 1.0 - 0.1, 1e-6);
  EXPECT_NEAR(one[1], -2.0 + 0.1, 1e-6);
  expect_near(run(p, opt, 1), one);
  run(p, opt, 2);
  expect_near(p.to_vector<double>(), adam_ref(kStart, o, false, 3));
  EXPECT_EQ(opt.step_count(), 3);
}

TEST(AdamW, DecoupledWeightDecay) {
  optim::AdamWOptions o{.lr = 0.01, .weight_decay = 0.5};
  Tensor p = param();
  optim::AdamW opt({p}, o);
  expect_near(run(p, opt, 3), adam_ref(kStart, {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay},
                                       true, 3));
  // Element 0 after one step: 1 * (1 - 0.01*0.5) - 0.01 = 0.985.
  EXPECT_NEAR(adam_ref(kStart, {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, true, 1)[0],
              0.985, 1e-9);
  EXPECT_EQ(opt.name(), "AdamW");
  EXPECT_DOUBLE_EQ(optim::AdamWOptions{}.weight_decay, 1e-2);
}

TEST(AdamW, Float32ParametersCloseToDouble) {
  Tensor p = tensor(kStart, {4}, TensorOptions(kFloat32).requires_grad());
  optim::AdamW opt({p}, {.lr = 0.01});
  Tensor c = tensor(kCoef, {4});
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    (c * p * p).sum().backward();
    opt.step();
    mark_step();
  }
  EXPECT_EQ(p.dtype(), kFloat32);
  auto want = adam_ref(kStart, {0.01, 0.9, 0.999, 1e-8, 1e-2}, true, 3);
  auto got = p.to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

TEST(Optimizer, SkipsParametersWithoutGrad) {
  Tensor a = param(), b = param();
  optim::Adam opt({a, b}, {.lr = 0.1});
  Tensor c = tensor(kCoef, {4}, TensorOptions(kFloat64));
  (c * a * a).sum().backward();
  opt.step();
  mark_step();
  expect_near(b.to_vector<double>(), kStart);
  expect_near(a.to_vector<double>(), adam_ref(kStart, {.lr = 0.1}, false, 1));
}

TEST(Optimizer, ZeroGrad) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  (p * p).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(p.grad().defined());
  for (double v : p.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  // Grads accumulate without zero_grad, as in PyTorch.
  (p * 1.0).sum().backward();
  (p * 1.0).sum().backward();
  for (double v : p.grad().to_vector<double>()) EXPECT_EQ(v, 2.0);
}

// A small model's training step: forward + backward + AdamW update + mark_step.
struct Loop {
  nn::MLP model{{8, 16, 4}};
  optim::AdamW opt{model.parameters(), {.lr = 1e-2}};
  Tensor x = randn({32, 8});
  Tensor y = randint(0, 4, {32});
  double step() {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    mark_step();
    return 0;
  }
};

TEST(Optimizer, LearningRateChangesAddNoPlan) {
  manual_seed(0);
  Loop loop;
  for (int i = 0; i < 4; ++i) loop.step();   // warm-up (first steps create the state)
  const int64_t misses = metrics().plan_cache_misses;
  const int64_t hits = metrics().plan_cache_hits;
  // Rates that are integral (1, 0) or tiny must not change the graph either.
  for (double lr : {0.5, 1e-4, 1.0, 0.0, 3e-3, 2.0}) {
    loop.opt.set_lr(lr);
    loop.step();
  }
  EXPECT_EQ(metrics().plan_cache_misses, misses);
  EXPECT_GE(metrics().plan_cache_hits, hits + 6);
  // A schedule changes the rate every step: still no new plan.
  optim::CosineAnnealingLR sched(loop.opt, 10);
  for (int i = 0; i < 5; ++i) {
    loop.step();
    sched.step();
  }
  EXPECT_EQ(metrics().plan_cache_misses, misses);
}

TEST(Optimizer, SgdMomentumLrChangeAddsNoPlan) {
  manual_seed(0);
  nn::Linear lin(4, 2);
  optim::SGD opt(lin.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
  Tensor x = randn({8, 4}), t = randn({8, 2});
  auto step = [&] {
    opt.zero_grad();
    mse_loss(lin.forward(x), t).backward();
    opt.step();
    mark_step();
  };
  for (int i = 0; i < 3; ++i) step();
  const int64_t misses = metrics().plan_cache_misses;
  for (double lr : {1.0, 0.01, 0.0, 0.2}) {
    opt.set_lr(lr);
    step();
  }
  EXPECT_EQ(metrics().plan_cache_misses, misses);
}

TEST(Optimizer, StepDoesNotSync) {
  manual_seed(0);
  Loop loop;
  loop.step();
  loop.step();
  const int64_t graphs = metrics().graphs_executed;
  loop.opt.zero_grad();
  cross_entropy(loop.model.forward(loop.x), loop.y).backward();
  loop.opt.step();
  EXPECT_EQ(metrics().graphs_executed, graphs);  // nothing ran yet
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, graphs + 1);  // one graph per step
}

TEST(Schedules, StepAndCosine) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.8});
  optim::StepLR step_lr(opt, 2, 0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.8);
  std::vector<double> seen;
  for (int e = 0; e < 5; ++e) {
    step_lr.step();
    seen.push_back(opt.lr());
  }
  EXPECT_EQ(seen, (std::vector<double>{0.8, 0.4, 0.4, 0.2, 0.2}));

  optim::SGD opt2({param()}, {.lr = 1.0});
  optim::CosineAnnealingLR cos_lr(opt2, 4, 0.0);
  cos_lr.step();
  EXPECT_NEAR(opt2.lr(), (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  cos_lr.step();
  EXPECT_NEAR(opt2.lr(), 0.5, 1e-15);
  cos_lr.set_epoch(4);
  EXPECT_NEAR(opt2.lr(), 0.0, 1e-15);
  EXPECT_THROW(opt2.set_lr(-1), Error);
}

}  // namespace
