// The wall time of tests/train_smoke_test.cc's SyntheticTaskConverges run (the test asserts
// its loss and accuracy; timing belongs here): an MLP 2-32-32-2 trained with Adam (lr 1e-2)
// for 40 epochs of 1,024 XOR-of-quadrants points in batches of 128, a mark_step() per batch.
// One iteration is the whole run, from data to trained model; keep it in step with the test.
// Counters: the last epoch's mean loss, training accuracy and plan-cache misses.
//   bazel run //benchmarks:train_smoke_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

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

double accuracy(nn::Module& model, const data::Dataset& ds) {
  NoGradGuard g;
  model.eval();
  data::DataLoader loader(ds, 500);
  Tensor correct = zeros({}, TensorOptions(kInt64));
  for (auto& b : loader) correct = correct + sum(argmax(model.forward(b.x), 1) == b.y).to(kInt64);
  model.train();
  return correct.item() / double(ds.size());
}

void BM_TrainSmokeXor(benchmark::State& state) {
  double last = 0, acc = 0;
  int64_t misses = 0;
  for (auto _ : state) {
    reset_metrics();
    data::TensorDataset train = xor_quadrants();
    manual_seed(0);
    auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{2, 32, 32, 2});
    optim::Adam opt(model->parameters(), {.lr = 1e-2});
    data::DataLoader loader(train, 128, /*shuffle=*/true, /*seed=*/1);
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
    acc = accuracy(*model, train);
    misses = metrics().plan_cache_misses;
  }
  state.counters["last_epoch_loss"] = last;
  state.counters["train_accuracy"] = acc;
  state.counters["plan_misses"] = static_cast<double>(misses);
}
BENCHMARK(BM_TrainSmokeXor)->UseRealTime()->Unit(benchmark::kSecond)->Iterations(3);

}  // namespace
