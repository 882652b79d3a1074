// softmax and layer_norm over [4096, 1024]; matmul 1024x1024 in sloth against cblas_sgemm
// called directly (same OpenBLAS, same environment).
//   bazel run //benchmarks:ops_bench
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <vector>

#include "backends/cpu/jit.h"
#include "benchmarks/bench_common.h"
#include "sloth/sloth.h"

namespace {

constexpr int64_t kRows = 4096, kCols = 1024;

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Softmax(benchmark::State& state) {
  sloth::manual_seed(2);
  sloth::Tensor x = sloth::randn({kRows, kCols});
  sloth::mark_step();
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::softmax(x, -1)}); });
  for (auto _ : state) {
    y = sloth::softmax(x, -1);
    sloth::mark_step();
  }
  sloth_bench::check_close("softmax row sum", y.select(0, 17).sum().item(), 1.0);
  set_bytes(state, 2.0 * 4 * kRows * kCols);  // read x, write y
}
BENCHMARK(BM_Softmax)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_LayerNorm(benchmark::State& state) {
  sloth::manual_seed(3);
  sloth::Tensor x = sloth::randn({kRows, kCols}) * 3.0 + 1.0;
  sloth::Tensor w = sloth::rand({kCols}) + 0.5, b = sloth::randn({kCols});
  sloth::mark_step();
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::layer_norm(x, {kCols}, w, b)}); });
  for (auto _ : state) {
    y = sloth::layer_norm(x, {kCols}, w, b);
    sloth::mark_step();
  }
  // Row 5 normalized then un-affined: ((y - b) / w) has mean 0, variance 1.
  sloth::Tensor z = (y.select(0, 5) - b) / w;
  sloth_bench::check_close("layer_norm mean", z.mean().item(), 0.0, 1e-3);
  sloth_bench::check_close("layer_norm var", (z * z).mean().item(), 1.0, 1e-2);
  set_bytes(state, 2.0 * 4 * kRows * kCols);
}
BENCHMARK(BM_LayerNorm)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

constexpr int64_t kN = 1024;
void set_flops(benchmark::State& state, int64_t n) {
  state.counters["flops"] = benchmark::Counter(2.0 * n * n * n * state.iterations(),
                                               benchmark::Counter::kIsRate);
}

void BM_MatmulSloth(benchmark::State& state) {
  const int64_t n = state.range(0);
  sloth::manual_seed(4);
  sloth::Tensor a = sloth::randn({n, n}), b = sloth::randn({n, n});
  sloth::mark_step();
  sloth::Tensor c;
  for (auto _ : state) {
    c = sloth::matmul(a, b);
    sloth::mark_step();
  }
  // One element against a dot product.
  double want = 0;
  std::vector<float> ar = a.select(0, 3).to_vector<float>(), bc = b.select(1, 9).to_vector<float>();
  for (int64_t k = 0; k < n; ++k) want += double(ar[k]) * bc[k];
  sloth_bench::check_close("matmul", c.select(0, 3).select(0, 9).item(), want, 1e-3);
  set_flops(state, n);
}
BENCHMARK(BM_MatmulSloth)->Arg(kN)->ArgName("n")->UseRealTime()->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

void BM_MatmulCblas(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; ++i) { a[i] = std::sin(0.001 * i); b[i] = std::cos(0.002 * i); }
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
BENCHMARK(BM_MatmulCblas)->Arg(kN)->ArgName("n")->UseRealTime()->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace
