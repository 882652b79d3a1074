// The built-in small float GEMM (backends/cpu/small_gemm.h) against OpenBLAS's cblas_sgemm on
// the same call, per shape and transpose variant: the products of a tiny MLP's training step
// (batch 16, 32-64-64-1), the main job's small ones (batch 128, 128-10) and a few odd sizes.
//   BM_SmallGemm/m/n/k/ta/tb/impl   impl 0: cblas_sgemm (one thread), 1: small_sgemm's AVX-512
//   kernels, 2: its AVX2 kernels (what it runs on CPUs without AVX-512)
// matmul.cc sends a product to small_sgemm where small_sgemm_takes() says so; the rule came
// from these rows (run them interleaved: --benchmark_enable_random_interleaving=true).
#include <cblas.h>

#include <random>
#include <vector>

#include "backends/cpu/blas_core.h"
#include "backends/cpu/small_gemm.h"
#include "benchmark/benchmark.h"

namespace {

void BM_SmallGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int64_t impl = state.range(5);
  const bool mine = impl == 1;
  // small_sgemm runs every shape; only those small_sgemm_takes() accepts are sent to it.
  state.counters["taken"] = impl == 2 ? sloth::cpu::small_sgemm_avx2_takes(ta, tb, m, n, k)
                                      : sloth::cpu::small_sgemm_takes(ta, tb, m, n, k);
  // small_sgemm is AVX-512 code (matmul.cc only calls it where small_sgemm_takes() found
  // the instructions); on other CPUs its rows would die with SIGILL.
  if (mine && !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))) {
    state.SkipWithError("small_sgemm needs AVX-512F (this CPU has none; matmul uses OpenBLAS)");
    return;
  }
  sloth::cpu::ensure_blas_core();
  sloth::cpu::blas_single_threaded();
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& x : a) x = u(gen);
  for (float& x : b) x = u(gen);
  for (auto _ : state) {
    if (impl == 2)
      sloth::cpu::small_sgemm_avx2(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data());
    else if (mine)
      sloth::cpu::small_sgemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data());
    else
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations(), benchmark::Counter::kIsRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  const std::vector<std::vector<int64_t>> rows = {
      // tiny MLP: forward x @ W^T, input gradients g @ W, weight gradients g^T @ x
      {16, 64, 32, 0, 1}, {16, 64, 64, 0, 1}, {16, 1, 64, 0, 1}, {16, 64, 1, 0, 0},
      {16, 64, 64, 0, 0}, {1, 64, 16, 1, 0}, {64, 64, 16, 1, 0}, {64, 32, 16, 1, 0},
      // 64^3 in each layout (the largest product the AVX2 kernels may take)
      {64, 64, 64, 0, 1}, {64, 64, 64, 0, 0}, {64, 64, 64, 1, 0},
      // main job (batch 128, 784-256-128-10): its products under 64^3
      {128, 10, 128, 0, 1}, {10, 128, 128, 1, 0}, {128, 128, 10, 0, 0},
      // odd sizes
      {24, 40, 50, 0, 1}, {48, 40, 50, 1, 1}, {5, 70, 3, 1, 0}};
  for (const auto& r : rows)
    for (int64_t impl : {0, 1, 2}) {
      std::vector<int64_t> args = r;
      args.push_back(impl);
      b->Args(args);
    }
  b->ArgNames({"m", "n", "k", "ta", "tb", "impl"});
}
BENCHMARK(BM_SmallGemm)->Apply(shapes)->Unit(benchmark::kNanosecond)->MinTime(0.2);

}  // namespace
