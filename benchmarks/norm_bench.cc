// BatchNorm2d and GroupNorm training steps (forward, backward, running-stat update) at the
// sizes of the Fashion-MNIST CNN's first block (batch 128, 32 channels, 28x28).
// LibTorch's side: the same step with torch::nn::BatchNorm2d (see the report of issue 13).
#include <benchmark/benchmark.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

void BM_BatchNorm2dTrainStep(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  nn::BatchNorm2d bn(c);
  Tensor x = randn({n, c, hw, hw}).requires_grad_(true);
  Tensor g = randn({n, c, hw, hw});
  sync({x, g});
  reset_metrics();
  for (auto _ : state) {
    Tensor loss = sum(bn(x) * g);
    loss.backward();
    sync({x.grad(), bn->weight.grad(), bn->bias.grad(), bn->running_mean, bn->running_var});
    x.set_grad(Tensor());
    bn.zero_grad();
  }
  state.SetBytesProcessed(state.iterations() * n * c * hw * hw * 4);
  const double it = static_cast<double>(state.iterations());
  state.counters["trace_ms"] = metrics().trace_s * 1e3 / it;
  state.counters["execute_ms"] = metrics().execute_s * 1e3 / it;
  state.counters["kernels"] = static_cast<double>(metrics().kernels_launched) / it;
}
BENCHMARK(BM_BatchNorm2dTrainStep)->Args({128, 32, 28})->Args({128, 64, 14})->Unit(benchmark::kMillisecond);

void BM_BatchNorm2dEval(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  nn::BatchNorm2d bn(c);
  bn.eval();
  Tensor x = randn({n, c, hw, hw});
  sync({x});
  for (auto _ : state) {
    Tensor y = bn(x);
    sync({y});
  }
  state.SetBytesProcessed(state.iterations() * n * c * hw * hw * 4);
}
BENCHMARK(BM_BatchNorm2dEval)->Args({128, 32, 28})->Unit(benchmark::kMillisecond);

void BM_GroupNormTrainStep(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  nn::GroupNorm gn(8, c);
  Tensor x = randn({n, c, hw, hw}).requires_grad_(true);
  Tensor g = randn({n, c, hw, hw});
  sync({x, g});
  for (auto _ : state) {
    Tensor loss = sum(gn(x) * g);
    loss.backward();
    sync({x.grad(), gn->weight.grad(), gn->bias.grad()});
    x.set_grad(Tensor());
    gn.zero_grad();
  }
}
BENCHMARK(BM_GroupNormTrainStep)->Args({128, 32, 28})->Unit(benchmark::kMillisecond);

}  // namespace
