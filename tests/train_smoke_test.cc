// Training end to end: a synthetic task converges quickly, and a short Fashion-MNIST run
// (2,000 training images) beats 70% test accuracy.
#include <filesystem>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "tests/support/xor_run.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

using sloth::testing::accuracy;

// XOR of the quadrants: not linearly separable, so the hidden layers must learn. Its wall
// time is measured by benchmarks/train_smoke_bench.cc (BM_TrainSmokeXor), not asserted here.
TEST(TrainSmoke, SyntheticTaskConverges) {
  const sloth::testing::XorRun r = sloth::testing::train_xor_quadrants();
  EXPECT_LT(r.last_epoch_loss, 0.15) << "mean training loss of the last epoch";
  EXPECT_GT(r.train_accuracy, 0.97);
  // One plan per distinct step shape: steady state is all cache hits.
  EXPECT_LE(r.plan_misses, 16);
}

TEST(TrainSmoke, FashionMnist2000Images) {
  const std::string root = data::FashionMnist::kDefaultRoot;
  if (!std::filesystem::exists(root + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << root
                 << " (apt-get install dataset-fashion-mnist)";
  data::TensorDataset train = data::FashionMnist(root, true).head(2000);
  data::TensorDataset test = data::FashionMnist(root, false).head(1000);
  manual_seed(0);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{784, 128, 10});
  optim::AdamW opt(model->parameters(), {.lr = 2e-3});
  data::DataLoader loader(train, 64, /*shuffle=*/true, /*seed=*/0, /*drop_last=*/true);
  const double before = accuracy(*model, test);
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (auto& b : loader) {
      opt.zero_grad();
      cross_entropy(model->forward(b.x), b.y).backward();
      opt.step();
      mark_step();
    }
  }
  const double acc = accuracy(*model, test);
  EXPECT_LT(before, 0.3);
  EXPECT_GT(acc, 0.70) << "test accuracy after 5 epochs on 2,000 images";
  std::printf("Fashion-MNIST smoke: %.1f%% -> %.1f%% on 1,000 test images\n", 100 * before,
              100 * acc);
}

}  // namespace
