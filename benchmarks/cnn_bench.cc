// One training step of the Fashion-MNIST CNN (examples/fashion_cnn.h, the model of
// `train_fashion_mnist --model=cnn`) at batch 128: forward in training mode (batch statistics,
// running-statistics update, dropout), cross_entropy, backward, AdamW (lr 1e-3, wd 1e-2), one
// mark_step and the loss read back. LibTorch's side is cnn_step() in libtorch_workloads.cc
// (compare.sh pairs them at 1 and 2 threads: SLOTH_NUM_THREADS and OPENBLAS_NUM_THREADS).
//   bazel run -c opt //benchmarks:cnn_bench
// Counters per step: os_allocs (0 in steady state), plan cache misses and hits, graphs run.
#include <benchmark/benchmark.h>

#include <memory>

#include "benchmarks/bench_common.h"
#include "examples/fashion_cnn.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {

void BM_CnnTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  sloth::manual_seed(13);
  auto model = std::make_shared<sloth::examples::FashionCnn>(0.3);
  sloth::optim::AdamW opt(model->parameters(), {.lr = 1e-3, .weight_decay = 1e-2});
  sloth::Tensor x = sloth::randn({batch, 1, 28, 28});
  sloth::Tensor y = sloth::randint(0, 10, {batch}, sloth::TensorOptions(sloth::kInt64));
  sloth::mark_step();
  auto step = [&] {
    sloth::Tensor loss = sloth::cross_entropy(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    sloth::mark_step();  // forward + backward + update + running statistics: one graph
    return loss.item();
  };
  double first = step(), loss = first;
  sloth_bench::warm_up([&] { loss = step(); });
  sloth::reset_metrics();
  for (auto _ : state) loss = step();
  sloth::Metrics m = sloth::metrics();
  sloth_bench::check_trains(first, loss);
  const double n = static_cast<double>(state.iterations());
  state.counters["os_allocs_per_step"] = m.os_allocations / n;
  state.counters["plan_misses"] = static_cast<double>(m.plan_cache_misses);
  state.counters["plan_hits_per_step"] = m.plan_cache_hits / n;
  state.counters["graphs_per_step"] = m.graphs_executed / n;
  state.counters["kernels_per_step"] = m.kernels_launched / n;
  state.counters["trace_ms_per_step"] = m.trace_s * 1e3 / n;
  state.counters["exec_ms_per_step"] = m.execute_s * 1e3 / n;
  state.counters["loss"] = loss;
}
BENCHMARK(BM_CnnTrainStep)->Arg(128)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(3.0);

}  // namespace
