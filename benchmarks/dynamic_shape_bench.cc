// Dynamic shapes (issue 15 part 2): steps whose sizes change every step, against steps of one
// fixed size. Sizes are symbols in plan-cache keys, so a new size instantiates the cached plan
// (no lowering or fusion; only the backend's compile) instead of planning again.
//   BM_MlpSteps: nn::MLP {784, 128, 10}, cross_entropy, SGD (momentum 0.9), 400 timed steps.
//     sizes:0 fixed batch 64 (100 batches of 64, cycled);
//     sizes:1 cycles through 100 distinct batch sizes 15..114 (mean 64.5): the timed loop's
//       first epoch instantiates each size (the 5 warm-up steps saw the first 5), the other
//       three reuse the instances;
//     sizes:2 the sizes of 1, each timed step preceded by an untimed step of its size (on
//       another batch of that size, so the timed step reads new data as in any loop): a
//       fixed-size step at each size of the mix, so 1 vs 2 is the cost of changing sizes;
//     sizes:3 the sizes of 1 with the plan cache cleared before every step (a full plan per
//       size: what a new size cost before plans were shape-polymorphic);
//     sizes:4 the sizes of 1 after an untimed epoch that instantiated and ran every size:
//       the steady state of a long run (sizes change every step, all already compiled);
//     sizes:5 as 4, each timed step (its size changed) followed by a timed step of the same
//       size on another batch: changed_vs_same is the median over the pairs of the ratio of
//       the two, each pair measured back to back (on a shared machine the load changes far
//       less within a pair than between runs, so this is the stable form of 4 vs 2);
//       plan_us_* and exec_us_* split the two medians into planning (graph walk, plan-cache
//       and instance lookup) and running; the rest of a step is recording and autograd.
//   BM_TransformerSteps: nn::TransformerEncoderLayer (d 128, 4 heads, GELU MLP 512, pre-norm,
//     causal, dropout 0), mse_loss, AdamW, batch 8, 114 timed steps. sizes:0 length 36;
//     sizes:1 cycles through the lengths 8..64 (57 distinct, mean 36; the timed loop
//     instantiates 52 of them on its first pass, then reuses them); 2, 3, 4 as for the MLP.
//     Its plans (plans_all, every row but 3): AdamW's state (flushed on its first step) and the
//     step. The first length equals the batch (8); no op forces the two equal, so the step's
//     plan is made at stand-in sizes that keep them apart (lazy/size_provenance.h) and serves
//     every later length (a plan made at the coincidence could not: that was a third plan).
//     The first and later steps are one plan (roots are ordered by structure,
//     lazy/root_order.h), which took a plan of their own before.
// Comparing fairly. 4 vs 2 is the exact comparison: the same steps at the same sizes, only
// the order differs (2: each at a warm fixed size; 4: the size changes every step, every size
// already compiled). 0 vs 4 compares with the one fixed size the issue asks for: the mix has
// the fixed size's mean (batch 64.5 vs 64; length 36 vs 36), so work linear in the size
// (GEMMs over rows, elementwise ops, per-step overheads) averages to the fixed step's. What
// does not: the transformer's attention scores are S x S, and the mix's mean S^2 is 1567 vs
// 1296 at S = 36 (+21%); counting FLOPs per layer (projections and MLP 24*B*S*D^2, attention
// 4*B*S^2*D, backward alike), attention is 4.5% of a step at S = 36 and the mix does +0.9%
// more work. GEMM efficiency is not linear in the rows either (short sequences make small
// GEMMs), which 2 vs 0 shows: that gap is the mix's work, not the cost of changing sizes.
// 1 vs 0 is also given per sample or token (us_per_sample).
// Counters: plans (plan-cache misses in the timed loop and in all), instantiations per step,
// plan and execute ms per step, us per sample (or token), and the mean ms of the timed steps
// that instantiated a new size (new_size_ms) and of the others (seen_size_ms).
//   bazel run -c opt //benchmarks:dynamic_shape_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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

// `alt`: other batches of the same sizes as `batches` (sizes:2 warms each size with one, so
// the timed step reads new data as every step of a real loop does, not the warm step's).
template <class Step>
void run_steps(benchmark::State& state, const std::vector<Batch>& batches,
               const std::vector<Batch>& alt, Step&& step) {
  const bool warm_each = state.range(0) == 2, replan = state.range(0) == 3;
  const Metrics start = metrics();
  size_t i = 0;
  const double first = step(batches[i++ % batches.size()]);
  double loss = first;
  const bool paired = state.range(0) == 5;
  std::vector<double> changed_ms, same_ms, ratios, plan_us[2], exec_us[2];  // sizes:5
  // sizes:4, 5: every size instantiated and run once before timing (the steady state).
  if (state.range(0) >= 4)
    while (i < batches.size()) loss = step(batches[i++ % batches.size()]);
  sloth_bench::warm_up([&] { loss = step(batches[i++ % batches.size()]); });
  Metrics timed_plan{};  // plan/execute time and instantiations of the timed steps only
  double samples = 0, new_s = 0, seen_s = 0;
  int64_t steps = 0, new_steps = 0, seen_steps = 0;
  for (auto _ : state) {
    const Batch& b = batches[i % batches.size()];
    const Batch& warm = alt[i++ % alt.size()];
    if (warm_each) {
      state.PauseTiming();
      step(warm);
      state.ResumeTiming();
    }
    if (replan) lazy::clear_plan_cache();
    const Metrics m0 = metrics();
    const auto t0 = std::chrono::steady_clock::now();
    loss = step(b);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Metrics m1 = metrics();
    // Steps that instantiated a plan for a new size, and the others.
    const bool fresh = m1.plan_instantiations > m0.plan_instantiations;
    (fresh ? new_s : seen_s) += dt;
    ++(fresh ? new_steps : seen_steps);
    timed_plan.plan_s += m1.plan_s - m0.plan_s;
    timed_plan.execute_s += m1.execute_s - m0.execute_s;
    timed_plan.plan_instantiations += m1.plan_instantiations - m0.plan_instantiations;
    timed_plan.plan_cache_misses += m1.plan_cache_misses - m0.plan_cache_misses;
    samples += static_cast<double>(b.n);
    ++steps;
    if (paired) {  // the same size again right away, on another batch of it
      const Metrics m2 = metrics();
      const auto t1 = std::chrono::steady_clock::now();
      loss = step(warm);
      const double dy = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      const Metrics m3 = metrics();
      changed_ms.push_back(dt * 1e3);
      same_ms.push_back(dy * 1e3);
      ratios.push_back(dt / dy);
      // Where the difference is: planning (graph walk, cache and instance lookup) or running.
      plan_us[0].push_back((m1.plan_s - m0.plan_s) * 1e6);
      plan_us[1].push_back((m3.plan_s - m2.plan_s) * 1e6);
      exec_us[0].push_back((m1.execute_s - m0.execute_s) * 1e6);
      exec_us[1].push_back((m3.execute_s - m2.execute_s) * 1e6);
    }
  }
  if (paired) {
    auto median = [](std::vector<double> v) {
      std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    state.counters["changed_ms"] = median(changed_ms);
    state.counters["same_ms"] = median(same_ms);
    state.counters["changed_vs_same"] = median(ratios);
    state.counters["plan_us_changed"] = median(plan_us[0]);
    state.counters["plan_us_same"] = median(plan_us[1]);
    state.counters["exec_us_changed"] = median(exec_us[0]);
    state.counters["exec_us_same"] = median(exec_us[1]);
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
  state.counters["new_size_ms"] = new_steps ? new_s * 1e3 / static_cast<double>(new_steps) : 0;
  state.counters["seen_size_ms"] = seen_steps ? seen_s * 1e3 / static_cast<double>(seen_steps) : 0;
}

void BM_MlpSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;  // sizes:1..4
  manual_seed(15);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{784, 128, 10});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.02, .momentum = 0.9});
  std::vector<Batch> batches, alt;
  for (auto* set : {&batches, &alt})
    for (int64_t b = 15; b < 115; ++b) {
      const int64_t n = dynamic ? b : 64;
      // A learnable task: the label is the index of the largest of the first 10 features.
      Tensor x = randn({n, 784});
      const std::vector<float> xv = x.to_vector<float>();
      std::vector<int64_t> y(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k)
        for (int64_t c = 1; c < 10; ++c)
          if (xv[k * 784 + c] > xv[k * 784 + y[k]]) y[k] = c;
      set->push_back({x, from_vector(y, {n}), n});
    }
  mark_step();
  lazy::clear_plan_cache();
  run_steps(state, batches, alt, [&](const Batch& b) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(b.x), b.y);
    loss.backward();
    opt.step();
    mark_step();
    return loss.item();
  });
}
// A fixed number of steps (one run per benchmark, the same steps for both variants).
BENCHMARK(BM_MlpSteps)->ArgName("sizes")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(400);

void BM_TransformerSteps(benchmark::State& state) {
  const bool dynamic = state.range(0) != 0;  // sizes:1..4
  constexpr int64_t kB = 8, kD = 128;
  manual_seed(16);
  auto block = std::make_shared<nn::TransformerEncoderLayer>(kD, 4, 4 * kD, /*dropout=*/0.0,
                                                             "gelu", 1e-5, /*batch_first=*/true,
                                                             /*norm_first=*/true);
  optim::AdamW opt(block->parameters(), optim::AdamWOptions{.lr = 1e-3});
  std::vector<Batch> batches, alt;
  for (auto* set : {&batches, &alt})
    for (int64_t s = 8; s <= 64; ++s) {
      const int64_t len = dynamic ? s : 36;
      set->push_back({randn({kB, len, kD}), randn({kB, len, kD}), kB * len});
    }
  mark_step();
  lazy::clear_plan_cache();
  run_steps(state, batches, alt, [&](const Batch& b) {
    opt.zero_grad();
    Tensor loss = mse_loss(block->forward(b.x, {}, {}, /*is_causal=*/true), b.y);
    loss.backward();
    opt.step();
    mark_step();
    return loss.item();
  });
}
BENCHMARK(BM_TransformerSteps)->ArgName("sizes")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(114);

}  // namespace
