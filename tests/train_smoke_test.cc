// Training end to end: a synthetic task converges quickly, and a short Fashion-MNIST run
// (2,000 training images) beats 70% test accuracy.
#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

double accuracy(nn::Module& model, const data::Dataset& ds) {
  NoGradGuard g;
  model.eval();
  data::DataLoader loader(ds, 500);
  Tensor correct = zeros({}, TensorOptions(kInt64));
  for (auto& b : loader) correct = correct + sum(argmax(model.forward(b.x), 1) == b.y).to(kInt64);
  model.train();
  return correct.item() / double(ds.size());
}

// XOR of the quadrants: not linearly separable, so the hidden layers must learn. Its wall
// time is measured by benchmarks/train_smoke_bench.cc (BM_TrainSmokeXor), not asserted here.
TEST(TrainSmoke, SyntheticTaskConverges) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x;
  std::vector<int64_t> y;
  while (y.size() < 1024) {
    float a = u(rng), b = u(rng);
    if (std::abs(a) < 0.05f || std::abs(b) < 0.05f) continue;   // a small margin
    x.push_back(a);
    x.push_back(b);
    y.push_back((a > 0) != (b > 0) ? 1 : 0);
  }
  data::TensorDataset train(x, {2}, y);
  manual_seed(0);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{2, 32, 32, 2});
  optim::Adam opt(model->parameters(), {.lr = 1e-2});
  data::DataLoader loader(train, 128, /*shuffle=*/true, /*seed=*/1);
  double last = 0;
  for (int epoch = 0; epoch < 40; ++epoch) {
    Tensor epoch_loss = zeros({});
    for (auto& b : loader) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(b.x), b.y);
      loss.backward();
      opt.step();
      epoch_loss = epoch_loss + loss.detach();
      mark_step();
    }
    last = epoch_loss.item() / loader.num_batches();
  }
  const double acc = accuracy(*model, train);
  EXPECT_LT(last, 0.15) << "mean training loss of the last epoch";
  EXPECT_GT(acc, 0.97);
  // One plan per distinct step shape: steady state is all cache hits.
  EXPECT_LE(metrics().plan_cache_misses, 16);
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
