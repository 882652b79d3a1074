#include "tests/support/xor_run.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

namespace sloth::testing {
namespace {

data::TensorDataset xor_quadrants() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x;
  std::vector<int64_t> y;
  while (y.size() < 1024) {
    float a = u(rng), b = u(rng);
    if (std::abs(a) < 0.05f || std::abs(b) < 0.05f) continue;  // a small margin
    x.push_back(a);
    x.push_back(b);
    y.push_back((a > 0) != (b > 0) ? 1 : 0);
  }
  return data::TensorDataset(x, {2}, y);
}

}  // namespace

double accuracy(nn::Module& model, const data::Dataset& ds) {
  NoGradGuard g;
  model.eval();
  data::DataLoader loader(ds, 500);
  Tensor correct = zeros({}, TensorOptions(kInt64));
  for (auto& b : loader) correct = correct + sum(argmax(model.forward(b.x), 1) == b.y).to(kInt64);
  model.train();
  return correct.item() / double(ds.size());
}

XorRun train_xor_quadrants() {
  const int64_t misses_before = metrics().plan_cache_misses;
  data::TensorDataset train = xor_quadrants();
  manual_seed(0);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{2, 32, 32, 2});
  optim::Adam opt(model->parameters(), {.lr = 1e-2});
  data::DataLoader loader(train, 128, /*shuffle=*/true, /*seed=*/1);
  XorRun r;
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
    r.last_epoch_loss = epoch_loss.item() / loader.num_batches();
  }
  r.train_accuracy = accuracy(*model, train);
  r.plan_misses = metrics().plan_cache_misses - misses_before;
  return r;
}

}  // namespace sloth::testing
