// Sync semantics (DESIGN I9): a sync leaves every live tensor whose value its graph computed
// holding that value; no program reaches an internal executor error, whatever it keeps alive
// across a sync (in-place writes that read their own target, dropped first-order grads,
// training loops that never call mark_step()).
#include <cmath>
#include <memory>
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
    auto gs = autograd::grad({loss}, {x1, x2, x5}, {}, false, true, true);
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

// Issue #11 item 4: the LibTorch-style loop, item() every step, no mark_step().
TEST(SyncSemantics, LoopWithoutMarkStepSgdRuns) {
  manual_seed(0);
  Tensor x = randn({32, 4}), y = randn({32, 1});
  auto fc = std::make_shared<nn::Linear>(4, 1);
  optim::SGD opt(fc->parameters(), {.lr = 0.1});
  double last = 0;
  for (int step = 0; step < 10; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss((*fc)(x), y);
    last = loss.item();
    loss.backward();
    opt.step();
  }
  EXPECT_TRUE(std::isfinite(last));
}

}  // namespace
}  // namespace sloth
