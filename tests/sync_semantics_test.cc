// Sync semantics (DESIGN I9): a sync leaves every live tensor whose value its graph computed
// holding that value; no program reaches an internal executor error, whatever it keeps alive
// across a sync (in-place writes that read their own target, dropped first-order grads,
// training loops that never call mark_step()).
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

std::vector<float> v(const Tensor& t) { return t.to_vector<float>(); }

// Issue #11 item 3: copy_ into t3 of a value computed from t3, after t3 was materialized.
TEST(SyncSemantics, InPlaceWriteWhoseSourceReadsTheTargetAfterASync) {
  Tensor x2 = tensor({0.7865321040153503f}).view({1, 1}).detach().requires_grad_();
  Tensor t3 = maximum(x2, x2);
  mark_step();
  Tensor t5 = matmul(t3, t3);
  t3.copy_(t5);
  // PyTorch: 0.7865321^2 = 0.61863275
  EXPECT_NEAR(t3.sum({1}).item(), 0.61863275, 1e-6);
  EXPECT_NEAR(v(t3)[0], 0.61863275, 1e-6);
  // Again, now that t3 holds data: each write reads the value the previous one left.
  for (int i = 0; i < 3; ++i) {
    t3.copy_(matmul(t3, t3) + 1.0);
    mark_step();
  }
  // 0.61863275 -> 1.38271 -> 2.91189 -> 9.47910
  EXPECT_NEAR(t3.item(), 9.479104, 1e-4);
}

// The class behind item 3: a graph whose input is read only by its own nodes donates that
// input; a node of the graph that a pending tensor outside it still needs must then hold its
// value after the sync, or the later graph would read the donated (moved-out) input.
TEST(SyncSemantics, NodeNeededOutsideASubsetSyncIsMaterializedNotRerun) {
  Tensor x = tensor({1, 2, 3});
  mark_step();
  Tensor other;
  Tensor s;
  {
    Tensor a = x * 2.0;     // dropped at the end of the block, but `other` still needs it
    other = a + 1.0;
    x.add_(1.0);            // x's old data is now read only by pending nodes
    s = (x + a).sum();
  }
  reset_metrics();
  EXPECT_FLOAT_EQ(s.item(), 21);  // (2+2)+(3+4)+(4+6)
  EXPECT_EQ(metrics().nodes_executed, 4);  // mul, add_, add, sum
  reset_metrics();
  EXPECT_EQ(v(other), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(metrics().nodes_executed, 1) << "x * 2 held its value: only + 1 runs";
  EXPECT_EQ(v(x), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(metrics().graphs_executed, 1) << "x's new value was computed by the first graph";
}

// A view's memo of its value is not a holder that makes a node an output: after a sync that
// computed the base, the view reads the base's data (zero-copy), and its stale memo, whose
// IR may read an input the sync donated, is never run.
TEST(SyncSemantics, ViewWrittenThenBaseSyncedReadsTheBase) {
  Tensor base = tensor({1, 2, 3, 4});
  mark_step();
  Tensor view = base.slice(0, 1, 3);
  view.mul_(10.0);           // base's old data is now read only by pending nodes
  reset_metrics();
  EXPECT_FLOAT_EQ(base.sum().item(), 55);
  EXPECT_EQ(metrics().nodes_executed, 3);  // mul, slice_scatter, sum (the slice reads in place)
  reset_metrics();
  EXPECT_EQ(v(view), (std::vector<float>{20, 30}));
  EXPECT_EQ(metrics().graphs_executed, 0) << "the view reads the base's data in place";
  view.add_(1.0);
  EXPECT_EQ(v(base), (std::vector<float>{1, 21, 31, 4}));
}

// Here the view's memo reads the base's old data through pending IR, and that data is
// donated to the sync (nothing else reads it): the memo must never run again.
TEST(SyncSemantics, StaleViewMemoOverADonatedInputIsNeverRun) {
  Tensor base = tensor({1, 2, 3, 4}) * 1.0;
  mark_step();
  base.add_(1.0);
  Tensor view = base.slice(0, 1, 3);
  view.mul_(10.0);
  EXPECT_FLOAT_EQ(base.sum().item(), 77);
  EXPECT_EQ(v(view), (std::vector<float>{30, 40}));
  view.add_(1.0);
  EXPECT_EQ(v(base), (std::vector<float>{2, 31, 41, 5}));
  EXPECT_EQ(v(view * 2.0), (std::vector<float>{62, 82}));
}

TEST(SyncSemantics, ViewWrittenThenViewSyncedLeavesTheBaseToFollow) {
  Tensor base = tensor({1, 2, 3, 4});
  mark_step();
  Tensor view = base.slice(0, 1, 3);
  view.mul_(10.0);
  reset_metrics();
  EXPECT_FLOAT_EQ(view.sum().item(), 50);
  EXPECT_EQ(metrics().nodes_executed, 2);  // mul, sum (base's scatter is not needed)
  reset_metrics();
  EXPECT_EQ(v(base), (std::vector<float>{1, 20, 30, 4}));
  EXPECT_EQ(metrics().nodes_executed, 1) << "view * 10 held its value: only the scatter runs";
  EXPECT_EQ(v(view), (std::vector<float>{20, 30}));
}

// Issue #11 item 5 (crash half): second-order backward through create_graph grads, with the
// first-order grads dropped before the leaf's grad is read.
TEST(SyncSemantics, SecondOrderThroughDroppedFirstOrderGradsDoesNotCrash) {
  Tensor x1 = zeros({4, 3}).requires_grad_();
  Tensor x2 = from_vector<float>({-1.743113398551941f, 0.042194709181785583f,
                                  -0.07516977936029434f, -0.1328112930059433f},
                                 {2, 1, 2})
                  .requires_grad_();
  Tensor t3 = x2.transpose(1, 0);
  Tensor x5 = from_vector<float>({-1.7204229831695557f, 0.8217978477478027f}, {1, 1, 2})
                  .requires_grad_();
  Tensor t6 = abs(x5);
  Tensor t7 = t6 + 0.5;
  Tensor t4 = t3 / t7;
  Tensor t8 = t4 * 0.59;
  Tensor t9 = t4 * 1.288;
  Tensor t10 = abs(t8);
  Tensor t11 = x2.clone();
  Tensor t12 = relu(t9);
  Tensor t13 = x5 * t6;
  Tensor t14 = tanh(t10);
  Tensor Wt14 = from_vector<float>({0.1897585391998291f, -0.07196029275655746f,
                                    1.4081568717956543f, -0.04829881340265274f},
                                   {1, 2, 2});
  Tensor loss = (t14 * Wt14).sum();
  {
    auto gs = autograd::grad({loss}, {x1, x2, x5}, {}, /*retain_graph=*/std::nullopt, true, true);
    Tensor Vx5 = from_vector<float>({-0.549812912940979f, -0.43037277460098267f}, {1, 1, 2});
    Tensor loss2 = (gs[2] * Vx5).sum();
    loss2.backward();
  }
  ASSERT_TRUE(x2.grad().defined());
  auto g2 = x2.grad().to_vector<float>();
  std::vector<float> want = {0.00608f, -0.01045f, 0.09254f, 0.00695f};  // PyTorch
  ASSERT_EQ(g2.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g2[i], want[i], 1e-4) << i;
}

// The same program with every combination of intermediates dropped before the second
// backward, and a sync at different points: what a graph keeps for later must not depend on
// which tensors the program still holds. Each run must give the all-kept, never-synced grads.
struct SecondOrder {
  std::vector<float> g2, g5;
};
SecondOrder second_order(uint32_t keep, int sync_at) {
  Tensor x2 = from_vector<float>({-1.743113398551941f, 0.042194709181785583f,
                                  -0.07516977936029434f, -0.1328112930059433f},
                                 {2, 1, 2})
                  .requires_grad_();
  Tensor x5 = from_vector<float>({-1.7204229831695557f, 0.8217978477478027f}, {1, 1, 2})
                  .requires_grad_();
  {
    Tensor t[12];
    t[0] = x2.transpose(1, 0);
    t[1] = abs(x5);
    t[2] = t[1] + 0.5;
    t[3] = t[0] / t[2];
    t[4] = t[3] * 0.59;
    t[5] = abs(t[4]);
    t[6] = tanh(t[5]);
    t[7] = (t[6] * from_vector<float>({0.1897585391998291f, -0.07196029275655746f,
                                       1.4081568717956543f, -0.04829881340265274f},
                                      {1, 2, 2}))
               .sum();
    if (sync_at == 0) mark_step();
    auto gs = autograd::grad({t[7]}, {x2, x5}, {}, /*retain_graph=*/std::nullopt, true, true);
    t[8] = gs[0];
    t[9] = gs[1];
    if (sync_at == 1) mark_step();
    t[10] = (t[9] * from_vector<float>({-0.549812912940979f, -0.43037277460098267f}, {1, 1, 2}))
                .sum();
    t[11] = t[10] * 1.0;
    gs.clear();
    for (int i = 0; i < 12; ++i)
      if (i != 11 && !(keep >> i & 1)) t[i] = Tensor();
    if (sync_at == 2) mark_step();
    t[11].backward();
    for (int i = 0; i < 12; ++i)
      if (!(keep >> i & 1)) t[i] = Tensor();
    if (sync_at == 3) mark_step();
  }
  SecondOrder r;
  if (x2.grad().defined()) r.g2 = v(x2.grad());
  if (x5.grad().defined()) r.g5 = v(x5.grad());
  return r;
}

TEST(SyncSemantics, SecondOrderGradsDoNotDependOnWhatIsAliveOrWhenItSyncs) {
  const SecondOrder want = second_order(~0u, -1);
  ASSERT_EQ(want.g2.size(), 4u);
  const std::vector<float> torch = {0.00608f, -0.01045f, 0.09254f, 0.00695f};  // PyTorch
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(want.g2[i], torch[i], 1e-4) << i;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t keep = rng() & 0xfff;
    const int sync_at = trial % 5 - 1;  // never, after forward, after grad, before/after backward
    SecondOrder got = second_order(keep, sync_at);
    ASSERT_EQ(got.g2.size(), want.g2.size()) << "keep " << keep << " sync " << sync_at;
    ASSERT_EQ(got.g5.size(), want.g5.size()) << "keep " << keep << " sync " << sync_at;
    for (size_t i = 0; i < want.g2.size(); ++i)
      EXPECT_NEAR(got.g2[i], want.g2[i], 1e-6) << "keep " << keep << " sync " << sync_at;
    for (size_t i = 0; i < want.g5.size(); ++i)
      EXPECT_NEAR(got.g5[i], want.g5[i], 1e-6) << "keep " << keep << " sync " << sync_at;
  }
}

// ---- Issue #11 item 4: LibTorch-style loops without mark_step() ------------------------------
//
// Each loop trains nn::Linear(4, 1) on fixed data for kSteps steps. Counters are read at the
// end of every step. The reference is the same loop with mark_step() at the end of each step;
// the final parameters must be bit-equal (the same float ops run, whichever graph they land in).

enum class Opt { kSgd, kAdam, kAdamW, kHandWritten };
enum class Sync { kMarkStep, kItemEveryStep, kItemEvery3 };
constexpr int kSteps = 12;

struct LoopRun {
  std::vector<std::vector<float>> params;
  std::vector<double> losses;
  // Per step (deltas over the step, except live nodes: the count at its end).
  std::vector<int64_t> nodes, misses, hits, graphs, live_nodes, os_allocs;
};

LoopRun train(Opt opt_kind, Sync sync) {
  mark_step();
  manual_seed(0);
  Tensor x = randn({32, 4}), y = randn({32, 1});
  auto fc = std::make_shared<nn::Linear>(4, 1);
  std::unique_ptr<optim::Optimizer> opt;
  switch (opt_kind) {
    case Opt::kSgd: opt = std::make_unique<optim::SGD>(fc->parameters(), optim::SGDOptions{.lr = 0.1}); break;
    case Opt::kAdam: opt = std::make_unique<optim::Adam>(fc->parameters(), optim::AdamOptions{.lr = 0.05}); break;
    case Opt::kAdamW: opt = std::make_unique<optim::AdamW>(fc->parameters(), optim::AdamWOptions{.lr = 0.05}); break;
    case Opt::kHandWritten: break;
  }
  LoopRun r;
  reset_metrics();
  Metrics before = metrics();
  for (int step = 0; step < kSteps; ++step) {
    if (opt) opt->zero_grad();
    else for (Tensor& p : fc->parameters()) p.set_grad(Tensor());
    Tensor loss = mse_loss((*fc)(x), y);
    if (sync != Sync::kItemEvery3 || step % 3 == 2) r.losses.push_back(loss.item());
    loss.backward();
    if (opt) {
      opt->step();
    } else {
      NoGradGuard g;
      for (Tensor& p : fc->parameters()) p.sub_(p.grad() * 0.1);  // a plain double rate
    }
    if (sync == Sync::kMarkStep) mark_step();
    Metrics m = metrics();
    r.nodes.push_back(m.nodes_executed - before.nodes_executed);
    r.misses.push_back(m.plan_cache_misses - before.plan_cache_misses);
    r.hits.push_back(m.plan_cache_hits - before.plan_cache_hits);
    r.graphs.push_back(m.graphs_executed - before.graphs_executed);
    r.os_allocs.push_back(m.os_allocations - before.os_allocations);
    r.live_nodes.push_back(m.live_ir_nodes);
    before = m;
  }
  for (const Tensor& p : fc->parameters()) r.params.push_back(v(p));
  return r;
}

std::string show(const std::vector<int64_t>& xs) {
  std::string out;
  for (int64_t x : xs) out += std::to_string(x) + " ";
  return out;
}

class LoopWithoutMarkStep : public ::testing::TestWithParam<Opt> {};

TEST_P(LoopWithoutMarkStep, ItemEveryStepMatchesMarkStepAndNeverRerunsHistory) {
  const LoopRun ref = train(GetParam(), Sync::kMarkStep);
  const LoopRun r = train(GetParam(), Sync::kItemEveryStep);
  EXPECT_EQ(r.params, ref.params);
  ASSERT_EQ(r.losses.size(), static_cast<size_t>(kSteps));
  // The loss is reduced by differently fused kernels in the two loops (here its bias add
  // fuses into the reduction, there into the matmul's epilogue): equal up to rounding.
  for (int s = 0; s < kSteps; ++s) EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-6 * ref.losses[s]) << s;
  EXPECT_LT(r.losses.back(), r.losses.front()) << "it trains";
  SCOPED_TRACE("nodes per step: " + show(r.nodes) + "| mark_step loop: " + show(ref.nodes) +
               "| misses: " + show(r.misses) + "| live nodes: " + show(r.live_nodes) +
               "| OS allocations: " + show(r.os_allocs));
  // One graph per step (the item()); from the third step on it is the same graph: a plan
  // cache hit, the same number of nodes, and no node more alive than a step before. Graph k
  // holds update k-1; Adam makes its zero moments as data before its first update, so that
  // update is already the steady one for every optimizer.
  for (int s = 2; s < kSteps; ++s) {
    EXPECT_EQ(r.graphs[s], 1) << s;
    EXPECT_EQ(r.misses[s], 0) << s;
    EXPECT_EQ(r.hits[s], 1) << s;
    EXPECT_EQ(r.nodes[s], r.nodes[2]) << s;
    EXPECT_EQ(r.live_nodes[s], r.live_nodes[2]) << s;
    // The first repeat of a graph builds its frozen run (backends/cpu/frozen_run.h), whose
    // arena may be one new allocation; every later step allocates nothing.
    EXPECT_LE(r.os_allocs[s], s == 2 ? 1 : 0) << s;
  }
  // Nothing runs twice: the same work per step as the loop that syncs every step, give or
  // take w.t() (a node when w is pending, a zero-copy view of data when it is synced).
  EXPECT_LE(r.nodes[kSteps - 1], ref.nodes[kSteps - 1] + 1);
}

TEST_P(LoopWithoutMarkStep, ItemEveryThirdStepMatchesMarkStep) {
  const LoopRun ref = train(GetParam(), Sync::kMarkStep);
  const LoopRun r = train(GetParam(), Sync::kItemEvery3);
  EXPECT_EQ(r.params, ref.params);
  ASSERT_EQ(r.losses.size(), static_cast<size_t>(kSteps / 3));
  for (size_t i = 0; i < r.losses.size(); ++i)
    EXPECT_NEAR(r.losses[i], ref.losses[3 * i + 2], 1e-6 * ref.losses[3 * i + 2]) << i;
  SCOPED_TRACE("nodes per step: " + show(r.nodes) + "| misses: " + show(r.misses) +
               "| live nodes: " + show(r.live_nodes));
  // A graph every third step; periods after the first two are the same graph.
  // (Adam makes its zero moments with one small graph at its first step.)
  const bool adam = GetParam() == Opt::kAdam || GetParam() == Opt::kAdamW;
  for (int s = 0; s < kSteps; ++s)
    EXPECT_EQ(r.graphs[s], (s % 3 == 2 ? 1 : 0) + (adam && s == 0 ? 1 : 0)) << s;
  for (int s = 8; s < kSteps; s += 3) {
    EXPECT_EQ(r.misses[s], 0) << s;
    EXPECT_EQ(r.nodes[s], r.nodes[5]) << s;
    EXPECT_EQ(r.live_nodes[s], r.live_nodes[5]) << s;
  }
  // Three steps' worth of work per graph, no more: the same as three steps with mark_step().
  EXPECT_LE(r.nodes[kSteps - 1], 3 * (ref.nodes[kSteps - 1] + 1));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, LoopWithoutMarkStep,
                         ::testing::Values(Opt::kSgd, Opt::kAdam, Opt::kAdamW, Opt::kHandWritten),
                         [](const auto& info) {
                           switch (info.param) {
                             case Opt::kSgd: return std::string("SGD");
                             case Opt::kAdam: return std::string("Adam");
                             case Opt::kAdamW: return std::string("AdamW");
                             default: return std::string("HandWritten");
                           }
                         });

// The bounded-graph policy counts pending IR, not nodes made since the last mark_step():
// a loop that syncs with item() every step never holds much pending IR, so it never triggers
// an extra flush (which would be a graph of another shape: a plan-cache miss mid-loop).
TEST(SyncSemantics, LoopWithItemEveryStepNeverAutoFlushes) {
  mark_step();
  manual_seed(2);
  Tensor x = randn({8, 4}), y = randn({8, 1});
  auto fc = std::make_shared<nn::Linear>(4, 1);
  optim::Adam opt(fc->parameters(), {.lr = 0.01});
  set_auto_flush_limit(500);  // about ten steps of nodes
  reset_metrics();
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss((*fc)(x), y);
    loss.item();
    loss.backward();
    opt.step();
  }
  Metrics m = metrics();
  set_auto_flush_limit(20000);
  EXPECT_EQ(m.auto_flushes, 0);
  EXPECT_EQ(m.graphs_executed, 201);  // one item() per step, and Adam's zero moments once
  EXPECT_LE(m.plan_cache_misses, 3);
}

// A long loop without mark_step() or item() stays bounded: the pending IR is flushed when it
// grows past the limit, and each flush leaves every parameter holding data, so no flush
// re-runs the steps before it.
TEST(SyncSemantics, LongLoopWithoutAnySyncStaysBounded) {
  mark_step();
  manual_seed(1);
  Tensor x = randn({8, 4}), y = randn({8, 1});
  auto fc = std::make_shared<nn::Linear>(4, 1);
  optim::SGD opt(fc->parameters(), {.lr = 0.05});
  set_auto_flush_limit(2000);
  reset_metrics();
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    mse_loss((*fc)(x), y).backward();
    opt.step();
  }
  Metrics m = metrics();
  set_auto_flush_limit(20000);
  EXPECT_GT(m.auto_flushes, 0);
  // Every step's nodes run once (the loop with mark_step() runs 21 a step), never again in a
  // later flush: without I9 each flush re-ran every step before it.
  EXPECT_LE(m.nodes_executed, 300 * 22) << m.to_string();
  EXPECT_LT(m.live_ir_nodes, 3000);
}

}  // namespace
}  // namespace sloth

namespace sloth {
namespace {

// Written as a LibTorch user writes a loop: no mark_step(), loss.item() every step, modules
// through shared_ptr, copy_ of known weights under NoGradGuard. The expected losses and
// weights are PyTorch 1.13's for the same program (computed with python3-torch).
struct TwoLayer {
  std::shared_ptr<nn::Linear> fc1 = std::make_shared<nn::Linear>(4, 8);
  std::shared_ptr<nn::Linear> fc2 = std::make_shared<nn::Linear>(8, 1);
  TwoLayer() {
    std::vector<float> w1, b1, w2;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) w1.push_back(0.1f * (i + 1) * (j % 2 ? -1.f : 1.f));
    for (int i = 0; i < 8; ++i) b1.push_back(0.05f * i);
    for (int j = 0; j < 8; ++j) w2.push_back(0.2f - 0.03f * j);
    NoGradGuard no_grad;
    (*fc1)->weight.copy_(from_vector<float>(w1, {8, 4}));
    (*fc1)->bias.copy_(from_vector<float>(b1, {8}));
    (*fc2)->weight.copy_(from_vector<float>(w2, {1, 8}));
    (*fc2)->bias.fill_(0.1);
  }
  std::vector<Tensor> parameters() const {
    auto p = fc1->parameters(), q = fc2->parameters();
    p.insert(p.end(), q.begin(), q.end());
    return p;
  }
};

Tensor inputs() {
  std::vector<float> x;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) x.push_back(0.1f * i - 0.3f * j);
  return from_vector<float>(x, {6, 4});
}
Tensor targets() {
  std::vector<float> y;
  for (int i = 0; i < 6; ++i) y.push_back(0.5f * i - 1.f);
  return from_vector<float>(y, {6, 1});
}

TEST(LibTorchStyleLoop, AdamWWithItemEveryStepMatchesPyTorch) {
  TwoLayer m;
  Tensor x = inputs(), y = targets();
  optim::AdamW opt(m.parameters(), {.lr = 0.05, .weight_decay = 0.01});
  const std::vector<double> want = {0.7316269, 0.7558005, 0.6832227, 0.6187818,
                                    0.5594463, 0.4815719, 0.3857956, 0.2985155};
  for (int step = 0; step < 8; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss((*m.fc2)(relu((*m.fc1)(x))), y);
    EXPECT_NEAR(loss.item(), want[step], 2e-6) << "step " << step;
    loss.backward();
    opt.step();
  }
  const std::vector<float> w2 = (*m.fc2)->weight.to_vector<float>();
  const std::vector<double> want_w2 = {0.41736236, 0.42089182, 0.38502619, 0.34201258,
                                       0.29203972, 0.24040456, 0.12861490, -0.11745492};
  for (int j = 0; j < 8; ++j) EXPECT_NEAR(w2[j], want_w2[j], 2e-6) << j;
}

TEST(LibTorchStyleLoop, NesterovSgdWithItemEveryStepMatchesPyTorch) {
  TwoLayer m;
  Tensor x = inputs(), y = targets();
  optim::SGD opt(m.parameters(),
                 {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true});
  const std::vector<double> want = {0.7307171, 0.7261317, 0.721327,  0.715865,
                                    0.7090292, 0.7004148, 0.6898021, 0.6768197};
  for (int step = 0; step < 8; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss((*m.fc2)(tanh((*m.fc1)(x))), y);
    EXPECT_NEAR(loss.item(), want[step], 2e-6) << "step " << step;
    loss.backward();
    opt.step();
  }
}

}  // namespace
}  // namespace sloth
