// A training loop written as LibTorch users write it (a module behind a holder, SGD with
// momentum and weight decay, cross_entropy, zero_grad / backward / step, no mark_step, the
// loss read with item() every step) gives PyTorch 1.13's numbers, and gives them bit for bit
// whether its repeated graphs run from their frozen form (backends/cpu/frozen_run.h) or bind
// every kernel each run. The expected values come from tests/training_loop_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/settings.h"
#include "sloth/sloth.h"
#include "tests/support/pytorch_values.h"

namespace {

using namespace sloth;
using sloth::testing::cos_;
using sloth::testing::seq;
using sloth::testing::sin_;
using sloth::testing::values;

struct NetImpl : nn::Module {
  NetImpl() : Module("Net") {
    fc1 = register_module("fc1", nn::Linear(8, 16));
    fc2 = register_module("fc2", nn::Linear(16, 4));
  }
  Tensor forward(Tensor x) { return fc2(relu(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
SLOTH_MODULE(Net);

struct Trained {
  std::vector<double> losses, fc2_bias, fc1_row0;
  double fc1_sum = 0;
  int64_t frozen_runs = 0;
};

// `scaled`: the loss is multiplied by 0.5^(step / 3), a host number that changes every third
// step (loss scaling): the backward seed is then a constant step whose scalar changes.
Trained train(bool frozen, bool scaled = false) {
  const bool saved = settings_for_test().frozen_runs;
  settings_for_test().frozen_runs = frozen;
  Net net;
  {
    NoGradGuard g;
    net->fc1->weight.copy_(seq({16, 8}, sin_, 0.37, 0.3, kFloat32));
    net->fc1->bias.copy_(seq({16}, cos_, 0.5, 0.1, kFloat32));
    net->fc2->weight.copy_(seq({4, 16}, cos_, 0.23, 0.3, kFloat32));
    net->fc2->bias.copy_(seq({4}, sin_, 1.1, 0.1, kFloat32));
  }
  Tensor x = seq({6, 8}, sin_, 0.71, 1.0, kFloat32);
  Tensor y = tensor(std::vector<int64_t>{0, 3, 1, 2, 1, 0});
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  reset_metrics();
  Trained t;
  for (int step = 0; step < 25; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net->forward(x), y);
    if (scaled) loss = loss * std::pow(0.5, step / 3);
    loss.backward();
    opt.step();
    t.losses.push_back(loss.item<double>());
  }
  t.frozen_runs = metrics().frozen_runs;
  t.fc2_bias = values(net->fc2->bias);
  t.fc1_row0 = values(net->fc1->weight[0]);
  t.fc1_sum = net->fc1->weight.to(kFloat64).sum().item<double>();
  settings_for_test().frozen_runs = saved;
  return t;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " " << i;
}

TEST(TrainingLoop, LibTorchStyleLoopMatchesPyTorchFrozenOrNot) {
  // Frozen first: the normal runs that follow use the executables the frozen runs used.
  const Trained frozen = train(true), normal = train(false);
  // The loop's graph repeats from its second step on: its frozen form runs from the third.
  EXPECT_GE(frozen.frozen_runs, 20);
  EXPECT_EQ(normal.frozen_runs, 0);
  // Frozen runs change where intermediates live, never the arithmetic.
  EXPECT_EQ(frozen.losses, normal.losses);
  EXPECT_EQ(frozen.fc2_bias, normal.fc2_bias);
  EXPECT_EQ(frozen.fc1_row0, normal.fc1_row0);
  // PyTorch 1.13, float32 (tests/training_loop_test.py).
  const std::vector<double> losses = {
      1.79680932, 1.71844578, 1.59793532, 1.46890414, 1.3508023,  1.24993575, 1.17010629,
      1.11529136, 1.07701468, 1.04707003, 1.02166212, 0.994236767, 0.957893133, 0.907680035,
      0.845088542, 0.778285086, 0.713840961, 0.664390802, 0.631582499, 0.59808892, 0.542676508,
      0.477970958, 0.42310515, 0.384741277, 0.355216473};
  expect_close(frozen.losses, losses, 2e-5, "loss at step");
  expect_close(frozen.fc2_bias, {0.731991231, -0.0273632016, 0.120363526, -0.673350871}, 2e-5,
               "fc2.bias");
  expect_close(frozen.fc1_row0,
               {0.254664928, 0.288243532, 0.219640538, 0.114105985, 0.0453699455, 0.0569345281,
                0.13965866, 0.236656323},
               2e-5, "fc1.weight[0]");
  EXPECT_NEAR(frozen.fc1_sum, 2.40153794, 1e-4);
}

// A run whose constant steps' scalars changed runs the normal way, between frozen runs of the
// same layouts: the slot table it finds must hold the normal run's layouts (a frozen run had
// left the offsets of the arena views a kStep read, and the loss went to NaN).
TEST(TrainingLoop, LossScaleChangingEveryThirdStepMatchesPyTorch) {
  const Trained frozen = train(true, true), normal = train(false, true);
  EXPECT_GE(frozen.frozen_runs, 10);
  EXPECT_EQ(frozen.losses, normal.losses);
  EXPECT_EQ(frozen.fc2_bias, normal.fc2_bias);
  const std::vector<double> losses = {
      1.79680932,  1.71844578,  1.59793532,   0.734452069,  0.681914866, 0.639799535,
      0.302961022, 0.291069537, 0.28349185,   0.139234394,  0.137755379, 0.136935368,
      0.0682523176, 0.0682032481, 0.0683411807, 0.034292914, 0.0344387144, 0.0345945247,
      0.0173700415, 0.0174406264, 0.0175007451, 0.00877555273, 0.0087996712, 0.00882208627,
      0.00442256732};
  expect_close(frozen.losses, losses, 2e-5, "scaled loss at step");
  expect_close(frozen.fc2_bias, {0.497678816, 0.050733652, 0.235906005, -0.632677674}, 2e-5,
               "fc2.bias");
}

}  // namespace
