// The LibTorch-style training loop (zero_grad, forward, loss.item(), backward, opt.step())
// with and without mark_step() at the end of each step. Without it, each item() runs the
// previous step's backward and update together with this step's forward (DESIGN I9: the
// sync leaves every live tensor it computed holding data), so the two loops should run at
// the same speed. Compare them interleaved:
//   bazel run //benchmarks:sync_loop_bench -- --benchmark_repetitions=5 \
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Args: optimizer (0 SGD, 1 Adam), mark_step (1) or not (0).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "benchmarks/bench_common.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {

using namespace sloth;

std::unique_ptr<optim::Optimizer> make_opt(int kind, std::vector<Tensor> params) {
  if (kind == 0) return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.05});
  return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions{.lr = 1e-3});
}

void run_loop(benchmark::State& state, const std::shared_ptr<nn::Module>& model, const Tensor& x,
              const Tensor& y) {
  const bool marks = state.range(1) != 0;
  auto opt = make_opt(static_cast<int>(state.range(0)), model->parameters());
  auto step = [&] {
    opt->zero_grad();
    Tensor loss = mse_loss(model->forward(x), y);
    double l = loss.item();
    loss.backward();
    opt->step();
    if (marks) mark_step();
    return l;
  };
  const double first = step();
  for (int i = 0; i < 5; ++i) step();  // warm: plans cached, buffers pooled
  reset_metrics();
  double last = first;
  for (auto _ : state) last = step();
  Metrics m = metrics();
  sloth_bench::check_trains(first, last);
  const double n = static_cast<double>(state.iterations());
  state.counters["nodes_per_step"] = m.nodes_executed / n;
  state.counters["graphs_per_step"] = m.graphs_executed / n;
  state.counters["plan_misses"] = static_cast<double>(m.plan_cache_misses);
  state.counters["os_allocs_per_step"] = m.os_allocations / n;
  state.counters["live_ir_nodes"] = static_cast<double>(m.live_ir_nodes);
}

// The loop of issue #11: nn::Linear(4, 1) on a batch of 32 (overhead-bound: tracing, graph
// building, the plan lookup).
void BM_LoopLinear(benchmark::State& state) {
  mark_step();
  manual_seed(0);
  Tensor x = randn({32, 4}), y = randn({32, 1});
  nn::Linear fc(4, 1);
  run_loop(state, fc, x, y);
}
BENCHMARK(BM_LoopLinear)->ArgsProduct({{0, 1}, {1, 0}})->ArgNames({"adam", "mark_step"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

// A compute-bound step: MLP 784-256-10 on a batch of 64.
void BM_LoopMlp(benchmark::State& state) {
  mark_step();
  manual_seed(0);
  Tensor x = randn({64, 784}), y = randn({64, 10});
  nn::MLP mlp({784, 256, 10});
  run_loop(state, mlp, x, y);
}
BENCHMARK(BM_LoopMlp)->ArgsProduct({{0, 1}, {1, 0}})->ArgNames({"adam", "mark_step"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

}  // namespace
