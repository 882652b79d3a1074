// Fused elementwise chains over 16M floats (bytes/s) next to a STREAM triad measured in the
// same binary: the machine's memory-bandwidth limit.
//   bazel run //benchmarks:elementwise_bench
// Counter bytes_per_second = (inputs + 1 output) * 4 * N / time (write-allocate not counted).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "backends/cpu/jit.h"
#include "benchmarks/bench_common.h"
#include "sloth/sloth.h"

namespace {

using sloth_bench::kChainN;

void set_bytes(benchmark::State& state, int64_t arrays) {
  state.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(arrays * 4 * kChainN) * state.iterations(), benchmark::Counter::kIsRate);
}

// ---------------- STREAM triad a[i] = b[i] + s * c[i] (no OpenMP) ----------------

struct FreeDeleter { void operator()(float* p) const { std::free(p); } };
using Buf = std::unique_ptr<float[], FreeDeleter>;
Buf alloc(int64_t n) {
  return Buf(static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64)));
}

void triad_range(float* __restrict a, const float* __restrict b, const float* __restrict c,
                 float s, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

// Runs fn(lo, hi) over [0, n) on `threads` threads (the caller is one of them).
template <typename F>
void split(int threads, int64_t n, F fn) {
  if (threads <= 1) { fn(0, n); return; }
  int64_t per = (n / threads + 15) / 16 * 16;
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) {
    int64_t lo = std::min(n, t * per), hi = std::min(n, lo + per);
    if (t == threads - 1) hi = n;
    ts.emplace_back([=] { fn(lo, hi); });
  }
  fn(0, std::min(n, per));
  for (auto& t : ts) t.join();
}

void BM_StreamTriad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t n = kChainN;
  Buf a = alloc(n), b = alloc(n), c = alloc(n);
  // First touch by the thread that will use each half.
  split(threads, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) { a[i] = 0; b[i] = 1.0f + (i % 7); c[i] = 0.5f * (i % 5); }
  });
  const float s = 3.0f;
  for (auto _ : state) {
    split(threads, n, [&](int64_t lo, int64_t hi) { triad_range(a.get(), b.get(), c.get(), s, lo, hi); });
    benchmark::DoNotOptimize(a.get());
    benchmark::ClobberMemory();
  }
  sloth_bench::check_close("triad", a[12345], b[12345] + s * c[12345]);
  set_bytes(state, 3);
}
BENCHMARK(BM_StreamTriad)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

// ---------------- sloth fused chains ----------------

struct Inputs {
  sloth::Tensor a, b, c, d, e;
  Inputs() {
    sloth::manual_seed(1);
    a = sloth::randn({kChainN});
    b = sloth::randn({kChainN});
    c = sloth::randn({kChainN});
    d = sloth::randn({kChainN});
    e = sloth::randn({kChainN});
    sloth::mark_step();
  }
};
Inputs& inputs() {
  static Inputs* in = new Inputs();
  return *in;
}

// A few elements of the result against a scalar reference.
void check_chain(int k, const sloth::Tensor& y) {
  auto& in = inputs();
  const int64_t idx[] = {0, 1, 777, kChainN / 2 + 3, kChainN - 1};
  for (int64_t i : idx) {
    float a = static_cast<float>(in.a.select(0, i).item()), b = static_cast<float>(in.b.select(0, i).item()),
          c = static_cast<float>(in.c.select(0, i).item());
    sloth_bench::check_close("chain", y.select(0, i).item(), sloth_bench::chain_ref(k, a, b, c));
  }
}

// jit:1 measures the run-time compiled kernel (compiled before timing starts), jit:0 the tile
// interpreter; the default (SLOTH_JIT unset) is jit:1 after the first runs of a hot kernel.
void set_jit(benchmark::State& state, const std::function<void()>& warm) {
  namespace jit = sloth::cpu::jit;
  const bool on = state.range(1) != 0;
  jit::set_mode(on ? jit::Mode::kSync : jit::Mode::kOff);
  warm();  // compiles (or loads from the disk cache) outside the timed loop
  const int64_t runs = jit::stats().compiled_runs;
  warm();
  if (on && jit::stats().compiled_runs == runs) state.SkipWithError("no compiled kernel ran");
}

void BM_SlothChain(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  auto& in = inputs();
  sloth::Tensor y;
  set_jit(state, [&] {
    y = sloth_bench::chain(k, in.a, in.b, in.c);
    sloth::mark_step();
  });
  for (auto _ : state) {
    y = sloth_bench::chain(k, in.a, in.b, in.c);
    sloth::mark_step();  // sync: the chain runs here
  }
  check_chain(k, y);
  set_bytes(state, sloth_bench::chain_inputs(k) + 1);
  state.counters["ops"] = k;
}
BENCHMARK(BM_SlothChain)->ArgsProduct({{1, 2, 4, 8, 16}, {0, 1}})->ArgNames({"k", "jit"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

// relu(a*b + c) * d - e / 2: 5 inputs + 1 output = 6 arrays.
void BM_SlothChain6(benchmark::State& state) {
  auto& in = inputs();
  sloth::Tensor y;
  set_jit(state, [&] {
    y = sloth_bench::chain6(in.a, in.b, in.c, in.d, in.e);
    sloth::mark_step();
  });
  for (auto _ : state) {
    y = sloth_bench::chain6(in.a, in.b, in.c, in.d, in.e);
    sloth::mark_step();
  }
  for (int64_t i : {int64_t{5}, kChainN - 2}) {
    double a = in.a.select(0, i).item(), b = in.b.select(0, i).item(), c = in.c.select(0, i).item(),
           d = in.d.select(0, i).item(), e = in.e.select(0, i).item();
    sloth_bench::check_close("chain6", y.select(0, i).item(), std::max(a * b + c, 0.0) * d - e / 2);
  }
  set_bytes(state, 6);
}
BENCHMARK(BM_SlothChain6)->Arg(0)->Arg(1)->ArgName("jit")->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
