// Transformer benchmarks (issue 13):
//   BM_TransformerBlockStep: one training step of one pre-norm transformer encoder block
//     (nn::TransformerEncoderLayer, batch_first, norm_first, d = 128, 4 heads, GELU MLP
//     512 = 4x, dropout 0, causal self-attention through the fused SDPA) on a [32, 64, 128]
//     batch: zero_grad, forward, mse_loss against a fixed target, backward, AdamW update
//     (lr 1e-3, weight decay 0.01), mark_step and the loss read back.
//   BM_SdpaForward/fused:0|1: scaled_dot_product_attention forward alone at the block's
//     sizes (q, k, v [32, 4, 64, 32], causal), synced: fused:1 is the fused kernel,
//     fused:0 the composite (matmul, masked_fill with the causal mask, softmax, matmul).
//   BM_SdpaForwardBackward/fused:0|1: the same plus the gradients of q, k, v.
//   bazel run -c opt //benchmarks:transformer_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <limits>

#include "benchmarks/bench_common.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {

constexpr int64_t kBatch = 32, kT = 64, kD = 128, kHeads = 4;

void BM_TransformerBlockStep(benchmark::State& state) {
  sloth::manual_seed(13);
  auto block = std::make_shared<sloth::nn::TransformerEncoderLayer>(
      kD, kHeads, 4 * kD, /*dropout=*/0.0, "gelu", 1e-5, /*batch_first=*/true,
      /*norm_first=*/true);
  sloth::optim::AdamW opt(block->parameters(), sloth::optim::AdamWOptions{.lr = 1e-3});
  sloth::Tensor x = sloth::randn({kBatch, kT, kD});
  sloth::Tensor target = sloth::randn({kBatch, kT, kD});
  sloth::mark_step();
  auto step = [&] {
    opt.zero_grad();
    sloth::Tensor loss = sloth::mse_loss(block->forward(x, {}, {}, /*is_causal=*/true), target);
    loss.backward();
    opt.step();
    sloth::mark_step();
    return loss.item();
  };
  const double first = step();
  double loss = first;
  sloth_bench::warm_up([&] { loss = step(); });
  sloth::reset_metrics();
  for (auto _ : state) loss = step();
  sloth::Metrics m = sloth::metrics();
  sloth_bench::check_trains(first, loss);
  const double n = static_cast<double>(state.iterations());
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(kBatch * kT) * n, benchmark::Counter::kIsRate);
  state.counters["os_allocs_per_step"] = m.os_allocations / n;
  state.counters["kernels_per_step"] = m.kernels_launched / n;
  state.counters["plan_misses"] = static_cast<double>(m.plan_cache_misses);
  state.counters["trace_ms_per_step"] = m.trace_s * 1e3 / n;
  state.counters["exec_ms_per_step"] = m.execute_s * 1e3 / n;
  state.counters["loss"] = loss;
}
BENCHMARK(BM_TransformerBlockStep)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_SdpaForward(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const int64_t hd = kD / kHeads;
  sloth::manual_seed(14);
  sloth::Tensor q = sloth::randn({kBatch, kHeads, kT, hd}), k = sloth::randn({kBatch, kHeads, kT, hd}),
                v = sloth::randn({kBatch, kHeads, kT, hd});
  sloth::sync({q, k, v});
  const sloth::Tensor masked =
      sloth::logical_not(sloth::tril(sloth::ones({kT, kT}, sloth::TensorOptions().dtype(sloth::kBool))));
  auto run = [&] {
    sloth::Tensor o;
    if (fused) {
      o = sloth::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    } else {
      sloth::Tensor s = sloth::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(double(hd)));
      s = sloth::masked_fill(s, masked, -std::numeric_limits<double>::infinity());
      o = sloth::matmul(sloth::softmax(s, -1), v);
    }
    sloth::sync({o});
    return o;
  };
  sloth_bench::warm_up(run);
  sloth::reset_metrics();
  for (auto _ : state) benchmark::DoNotOptimize(run());
  sloth::Metrics m = sloth::metrics();
  const double n = static_cast<double>(state.iterations());
  state.counters["bytes_alloc_per_run"] = m.bytes_allocated / n;
  state.counters["kernels_per_run"] = m.kernels_launched / n;
  state.counters["flops"] = benchmark::Counter(
      4.0 * kBatch * kHeads * kT * kT * hd * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SdpaForward)->Arg(1)->Arg(0)->ArgName("fused")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// Forward and backward of attention alone (the block's share of it): q, k, v require grad,
// loss = sum(o * w), synced with the three gradients. fused:1 is kSdpa (its derivative
// recomputes the probabilities with sloth ops), fused:0 the composite.
void BM_SdpaForwardBackward(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const int64_t hd = kD / kHeads;
  sloth::manual_seed(15);
  sloth::Tensor q = sloth::randn({kBatch, kHeads, kT, hd}).requires_grad_(),
                k = sloth::randn({kBatch, kHeads, kT, hd}).requires_grad_(),
                v = sloth::randn({kBatch, kHeads, kT, hd}).requires_grad_(),
                w = sloth::randn({kBatch, kHeads, kT, hd});
  sloth::sync({q, k, v, w});
  const sloth::Tensor masked =
      sloth::logical_not(sloth::tril(sloth::ones({kT, kT}, sloth::TensorOptions().dtype(sloth::kBool))));
  auto run = [&] {
    sloth::Tensor o;
    if (fused) {
      o = sloth::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    } else {
      sloth::Tensor s = sloth::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(double(hd)));
      s = sloth::masked_fill(s, masked, -std::numeric_limits<double>::infinity());
      o = sloth::matmul(sloth::softmax(s, -1), v);
    }
    auto g = sloth::autograd::grad({(o * w).sum()}, {q, k, v});
    sloth::sync(g);
    return g[0];
  };
  sloth_bench::warm_up(run);
  sloth::reset_metrics();
  for (auto _ : state) benchmark::DoNotOptimize(run());
  sloth::Metrics m = sloth::metrics();
  const double n = static_cast<double>(state.iterations());
  state.counters["bytes_alloc_per_run"] = m.bytes_allocated / n;
  state.counters["kernels_per_run"] = m.kernels_launched / n;
}
BENCHMARK(BM_SdpaForwardBackward)->Arg(1)->Arg(0)->ArgName("fused")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(1.0);

}  // namespace
