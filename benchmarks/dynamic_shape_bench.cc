// Dynamic shapes (issue 15 part 2): steps whose sizes change every step, against steps of one
// fixed size. Sizes are symbols in plan-cache keys, so a new size instantiates the cached plan
// (no lowering or fusion; only the backend's compile) instead of planning again.
//   BM_MlpSteps/sizes:0|1|2: nn::MLP {784, 128, 10}, cross_entropy, SGD (momentum 0.9).
//     sizes:0 fixed batch 64; sizes:1 cycles through 100 distinct batch sizes 15..114 (mean
//     64.5) for 4 epochs: the first instantiates each size, later ones reuse the instances;
//     sizes:2 the same sizes, each timed step preceded by an untimed step of its size (what
//     a step of that size costs once compiled), so 1 vs 2 is the cost of new sizes alone;
//     sizes:3 the sizes of 1 with the plan cache cleared before every step (a full plan per
//     size: what a new size cost before plans were shape-polymorphic).
//   BM_TransformerSteps/sizes:0|1|2: nn::TransformerEncoderLayer (d 128, 4 heads, GELU MLP
//     512, pre-norm, causal, dropout 0), mse_loss, AdamW, batch 8; sizes:0 length 36; sizes:1
//     cycles through the lengths 8..64 (57 distinct, mean 36: two passes, the first
//     instantiates each length, the second reuses it); sizes:2 and 3 as for the MLP. Attention is
//     quadratic in the length, so 0 vs 1 also differs in work (mean S^2 is 1566 vs 1296).
// Counters: plans (plan-cache misses in the timed loop and in all), instantiations per step,
// plan and execute ms per step, us per sample (or token).
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
  const bool warm_each = state.range(0) == 2, replan = state.range(0) == 3;
  const Metrics start = metrics();
  size_t i = 0;
  const double first = step(batches[i++ % batches.size()]);
  double loss = first;
  sloth_bench::warm_up([&] { loss = step(batches[i++ % batches.size()]); });
  Metrics timed_plan{};  // plan/execute time and instantiations of the timed steps only
  double samples = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    const Batch& b = batches[i++ % batches.size()];
    if (warm_each) {
      state.PauseTiming();
      step(b);
      state.ResumeTiming();
    }
    if (replan) lazy::clear_plan_cache();
    const Metrics m0 = metrics();
    loss = step(b);
    const Metrics m1 = metrics();
    timed_plan.plan_s += m1.plan_s - m0.plan_s;
    timed_plan.execute_s += m1.execute_s - m0.execute_s;
    timed_plan.plan_instantiations += m1.plan_instantiations - m0.plan_instantiations;
    timed_plan.plan_cache_misses += m1.plan_cache_misses - m0.plan_cache_misses;
    samples += static_cast<double>(b.n);
    ++steps;
  }
  const Metrics end = metrics();
  sloth_bench::check_trains(first, loss);
  const double n = static_cast<double>(steps);
  state.counters["plans_timed"] = static_cast<double>(timed_plan.plan_cache_misses);
  state.counters["plans_all"] = static_cast<double>(end.plan_cache_misses - start.plan_cache_misses);
  state.counters["inst_per_step"] = static_cast<double>(timed_plan.plan_instantiations) / n;
  state.counters["plan_ms_per_step"] = timed_plan.plan_s * 1e3 / n;
  state.counters["exec_ms_per_step"] = timed_plan.execute_s * 1e3 / n;
  state.counters["us_per_sample"] = benchmark::Counter(samples * 1e-6, benchmark::Counter::kIsRate |
                                                                           benchmark::Counter::kInvert);
  state.counters["loss"] = loss;
}

void BM_MlpSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;  // sizes:1 and 2
  manual_seed(15);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{784, 128, 10});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.02, .momentum = 0.9});
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
BENCHMARK(BM_MlpSteps)->ArgName("sizes")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(400);

void BM_TransformerSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;  // sizes:1 and 2
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
BENCHMARK(BM_TransformerSteps)->ArgName("sizes")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(114);

}  // namespace
