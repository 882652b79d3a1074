// Dynamic shapes (issue 15 part 2): steps whose sizes change every step, against steps of one
// fixed size. Sizes are symbols in plan-cache keys, so a new size instantiates the cached plan
// (no lowering or fusion; only the backend's compile) instead of planning again.
//   BM_MlpSteps/dynamic:0|1: nn::MLP {784, 128, 10}, cross_entropy, SGD (momentum 0.9);
//     dynamic:1 cycles through 100 distinct batch sizes 15..114 (mean 64.5; a plan keeps 64
//     executables, so every step instantiates: the worst case), dynamic:0 runs batch 64.
//   BM_TransformerSteps/dynamic:0|1: nn::TransformerEncoderLayer (d 128, 4 heads, GELU MLP
//     512, pre-norm, causal, dropout 0), mse_loss, AdamW, batch 8; dynamic:1 cycles through
//     the sequence lengths 8..64 (57 distinct, mean 36; two passes: the first instantiates
//     each length, the second reuses them), dynamic:0 runs length 36.
// Counters: ms/step, us/sample (or us/token), plans (plan-cache misses in the timed loop and
// in all), instantiations per step. Compare per sample: the sizes' mean equals the fixed size.
//   bazel run -c opt //benchmarks:dynamic_shape_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "benchmarks/bench_common.h"
#include "lazy/scheduler.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

struct Batch {
  Tensor x, y;
  int64_t n = 0;  // samples (or tokens)
};

template <class Step>
void run_steps(benchmark::State& state, const std::vector<Batch>& batches, Step&& step) {
  const Metrics start = metrics();
  size_t i = 0;
  const double first = step(batches[i++ % batches.size()]);
  double loss = first;
  sloth_bench::warm_up([&] { loss = step(batches[i++ % batches.size()]); });
  const Metrics warm = metrics();
  double samples = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    const Batch& b = batches[i++ % batches.size()];
    loss = step(b);
    samples += static_cast<double>(b.n);
    ++steps;
  }
  const Metrics end = metrics();
  sloth_bench::check_trains(first, loss);
  const double n = static_cast<double>(steps);
  state.counters["plans_timed"] = static_cast<double>(end.plan_cache_misses - warm.plan_cache_misses);
  state.counters["plans_all"] = static_cast<double>(end.plan_cache_misses - start.plan_cache_misses);
  state.counters["inst_per_step"] =
      static_cast<double>(end.plan_instantiations - warm.plan_instantiations) / n;
  state.counters["plan_ms_per_step"] = (end.plan_s - warm.plan_s) * 1e3 / n;
  state.counters["exec_ms_per_step"] = (end.execute_s - warm.execute_s) * 1e3 / n;
  state.counters["us_per_sample"] = benchmark::Counter(samples * 1e-6, benchmark::Counter::kIsRate |
                                                                           benchmark::Counter::kInvert);
  state.counters["loss"] = loss;
}

void BM_MlpSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;
  manual_seed(15);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{784, 128, 10});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  std::vector<Batch> batches;
  for (int64_t b = 15; b < 115; ++b) {
    const int64_t n = dynamic ? b : 64;
    // A learnable task: the label is the index of the largest of the first 10 features.
    Tensor x = randn({n, 784});
    const std::vector<float> xv = x.to_vector<float>();
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t c = 1; c < 10; ++c)
        if (xv[k * 784 + c] > xv[k * 784 + y[k]]) y[k] = c;
    batches.push_back({x, from_vector(y, {n}), n});
  }
  mark_step();
  lazy::clear_plan_cache();
  run_steps(state, batches, [&](const Batch& b) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(b.x), b.y);
    loss.backward();
    opt.step();
    mark_step();
    return loss.item();
  });
}
// A fixed number of steps (one run per benchmark, the same steps for both variants).
BENCHMARK(BM_MlpSteps)->ArgName("dynamic")->Arg(0)->Arg(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(400);

void BM_TransformerSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;
  constexpr int64_t kB = 8, kD = 128;
  manual_seed(16);
  auto block = std::make_shared<nn::TransformerEncoderLayer>(kD, 4, 4 * kD, /*dropout=*/0.0,
                                                             "gelu", 1e-5, /*batch_first=*/true,
                                                             /*norm_first=*/true);
  optim::AdamW opt(block->parameters(), optim::AdamWOptions{.lr = 1e-3});
  std::vector<Batch> batches;
  for (int64_t s = 8; s <= 64; ++s) {
    const int64_t len = dynamic ? s : 36;
    batches.push_back({randn({kB, len, kD}), randn({kB, len, kD}), kB * len});
  }
  mark_step();
  lazy::clear_plan_cache();
  run_steps(state, batches, [&](const Batch& b) {
    opt.zero_grad();
    Tensor loss = mse_loss(block->forward(b.x, {}, {}, /*is_causal=*/true), b.y);
    loss.backward();
    opt.step();
    mark_step();
    return loss.item();
  });
}
BENCHMARK(BM_TransformerSteps)->ArgName("dynamic")->Arg(0)->Arg(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(114);

}  // namespace
