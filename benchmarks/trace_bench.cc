// Trace-path costs: recording an op (ns/op, no sync in the timed region), view-heavy code
// against the same computation without views (functionalization overhead), the flush
// latency of a 100-node graph with a warm plan cache (µs), and how the graph machinery scales
// (planning a new graph of 1e3..1e5 nodes, recording with many live tensors, long loops with
// automatic flushes; see "graphs that scale" at the end).
//   bazel run //benchmarks:trace_bench
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "benchmarks/bench_common.h"
#include "lazy/node.h"
#include "lazy/scheduler.h"
#include "sloth/sloth.h"

namespace {

constexpr int kBatch = 1000;  // ops recorded between two (untimed) flushes

void per_op(benchmark::State& state, int64_t ops_per_iter) {
  // Seconds per op (printed with an SI prefix: "45.3n" = 45.3 ns).
  state.counters["per_op"] = benchmark::Counter(
      static_cast<double>(ops_per_iter) * state.iterations(),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(ops_per_iter * state.iterations());
}

struct NoAutoFlush {
  NoAutoFlush() { sloth::set_auto_flush_limit(int64_t{1} << 40); }
  ~NoAutoFlush() { sloth::set_auto_flush_limit(20000); }  // the default
};

// c = a + b recorded and dropped (the common "temporary" case).
void BM_RecordAdd_Independent(benchmark::State& state) {
  NoAutoFlush nf;
  sloth::Tensor a = sloth::randn({16}), b = sloth::randn({16});
  sloth::mark_step();
  std::vector<sloth::Tensor> keep(kBatch);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) keep[i] = a + b;  // kept alive: nothing freed in the loop
    state.PauseTiming();
    sloth::mark_step();
    for (auto& t : keep) t = sloth::Tensor();
    state.ResumeTiming();
  }
  per_op(state, kBatch);
}
BENCHMARK(BM_RecordAdd_Independent)->UseRealTime()->Unit(benchmark::kMicrosecond);

// y = y + b: a 1000-node dependent chain.
void BM_RecordAdd_Chain(benchmark::State& state) {
  NoAutoFlush nf;
  sloth::Tensor a = sloth::randn({16}), b = sloth::randn({16});
  sloth::mark_step();
  sloth::Tensor y;
  for (auto _ : state) {
    y = a;
    for (int i = 0; i < kBatch; ++i) y = y + b;
    state.PauseTiming();
    sloth::mark_step();
    state.ResumeTiming();
  }
  per_op(state, kBatch);
}
BENCHMARK(BM_RecordAdd_Chain)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Scalar op (no second tensor): y = y * 1.0001.
void BM_RecordMulScalar_Chain(benchmark::State& state) {
  NoAutoFlush nf;
  sloth::Tensor a = sloth::randn({16});
  sloth::mark_step();
  sloth::Tensor y;
  for (auto _ : state) {
    y = a;
    for (int i = 0; i < kBatch; ++i) y = y * 1.0001;
    state.PauseTiming();
    sloth::mark_step();
    state.ResumeTiming();
  }
  per_op(state, kBatch);
}
BENCHMARK(BM_RecordMulScalar_Chain)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Recording with autograd: a requires grad.
void BM_RecordAdd_Chain_RequiresGrad(benchmark::State& state) {
  NoAutoFlush nf;
  sloth::Tensor a = sloth::randn({16}, sloth::TensorOptions().requires_grad());
  sloth::Tensor b = sloth::randn({16});
  sloth::mark_step();
  sloth::Tensor y;
  for (auto _ : state) {
    y = a;
    for (int i = 0; i < kBatch; ++i) y = y + b;
    state.PauseTiming();
    y = sloth::Tensor();  // drop the autograd graph
    sloth::mark_step();
    state.ResumeTiming();
  }
  per_op(state, kBatch);
}
BENCHMARK(BM_RecordAdd_Chain_RequiresGrad)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---------------- views vs no views ----------------
// Same math: add bt[64,8] (as its transpose [8,64]) into the 8 row-blocks of a [64,64] matrix.
// Views: base.slice(0, 8j, 8j+8).t().add_(bt)  -- slice + transpose + in-place through a view.
// No views: blocks[j] = blocks[j] + b8         -- 8 separate [8,64] tensors, out of place.
constexpr int kBlocks = 8;
constexpr int kRounds = 50;  // 400 block updates per iteration

// Correctness of the view path (checked once, outside any timing).
void check_views_once() {
  sloth::Tensor base = sloth::zeros({64, 64});
  sloth::Tensor bt = sloth::ones({64, 8});
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < kBlocks; ++j) base.slice(0, 8 * j, 8 * j + 8).t().add_(bt);
  sloth::mark_step();
  sloth_bench::check_close("views", base.sum().item(), 3.0 * 64 * 64);
}

void BM_Views_Record(benchmark::State& state) {
  static const bool checked = (check_views_once(), true);
  (void)checked;
  NoAutoFlush nf;
  sloth::Tensor base = sloth::zeros({64, 64});
  sloth::Tensor bt = sloth::randn({64, 8});
  sloth::mark_step();
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r)
      for (int j = 0; j < kBlocks; ++j) base.slice(0, 8 * j, 8 * j + 8).t().add_(bt);
    state.PauseTiming();
    sloth::mark_step();
    state.ResumeTiming();
  }
  per_op(state, kRounds * kBlocks);  // per block update (3 API calls: slice, t, add_)
  state.SetLabel("per block update: slice+t+add_");
}
BENCHMARK(BM_Views_Record)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_NoViews_Record(benchmark::State& state) {
  NoAutoFlush nf;
  std::vector<sloth::Tensor> blocks;
  for (int j = 0; j < kBlocks; ++j) blocks.push_back(sloth::zeros({8, 64}));
  sloth::Tensor b8 = sloth::randn({8, 64});
  sloth::mark_step();
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r)
      for (int j = 0; j < kBlocks; ++j) blocks[j] = blocks[j] + b8;
    state.PauseTiming();
    sloth::mark_step();
    state.ResumeTiming();
  }
  per_op(state, kRounds * kBlocks);
  state.SetLabel("per block update: add");
}
BENCHMARK(BM_NoViews_Record)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same two, end to end (record + flush + execute inside the timed loop).
void BM_Views_RecordAndRun(benchmark::State& state) {
  sloth::Tensor base = sloth::zeros({64, 64});
  sloth::Tensor bt = sloth::randn({64, 8});
  sloth::mark_step();
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r)
      for (int j = 0; j < kBlocks; ++j) base.slice(0, 8 * j, 8 * j + 8).t().add_(bt);
    sloth::mark_step();
  }
  per_op(state, kRounds * kBlocks);
}
BENCHMARK(BM_Views_RecordAndRun)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_NoViews_RecordAndRun(benchmark::State& state) {
  std::vector<sloth::Tensor> blocks;
  for (int j = 0; j < kBlocks; ++j) blocks.push_back(sloth::zeros({8, 64}));
  sloth::Tensor b8 = sloth::randn({8, 64});
  sloth::mark_step();
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r)
      for (int j = 0; j < kBlocks; ++j) blocks[j] = blocks[j] + b8;
    sloth::mark_step();
  }
  per_op(state, kRounds * kBlocks);
}
BENCHMARK(BM_NoViews_RecordAndRun)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---------------- flush latency: 100-node graph, warm plan cache ----------------

// 100 elementwise nodes over small tensors (fuse into one kernel).
sloth::Tensor graph_elementwise(const sloth::Tensor& x, const sloth::Tensor& w) {
  sloth::Tensor y = x;
  for (int i = 0; i < 100; ++i) y = (i % 2) ? y * w : y + 0.5;
  return y;
}
// 100 nodes of mixed kinds: 10 blocks of matmul, add, relu, sum(dim), mul, sub, exp, div, neg, mean.
sloth::Tensor graph_mixed(const sloth::Tensor& x, const sloth::Tensor& w) {
  sloth::Tensor y = x;
  for (int i = 0; i < 10; ++i) {
    sloth::Tensor h = sloth::relu(sloth::matmul(y, w) + x);        // 3
    sloth::Tensor s = sloth::sum(h, {1}, true);                     // 1
    y = sloth::neg(sloth::exp(h * 0.01 - s * 0.001) / 2.0) + 1.0;   // 6
  }
  return y;
}

template <sloth::Tensor (*G)(const sloth::Tensor&, const sloth::Tensor&)>
void BM_Flush100(benchmark::State& state) {
  const int64_t n = state.range(0);
  sloth::Tensor x = sloth::randn({n, n}), w = sloth::randn({n, n}) * 0.1;
  sloth::mark_step();
  sloth::Tensor y;
  for (int i = 0; i < 5; ++i) { y = G(x, w); sloth::mark_step(); }  // warm the plan cache
  sloth::reset_metrics();
  for (auto _ : state) {
    y = G(x, w);  // record (not timed)
    auto t0 = std::chrono::steady_clock::now();
    sloth::mark_step();
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  sloth::Metrics m = sloth::metrics();
  state.counters["plan_hits"] = static_cast<double>(m.plan_cache_hits);
  state.counters["plan_misses"] = static_cast<double>(m.plan_cache_misses);
  state.counters["kernels_per_flush"] =
      m.graphs_executed ? static_cast<double>(m.kernels_launched) / m.graphs_executed : 0;
}
BENCHMARK_TEMPLATE(BM_Flush100, graph_elementwise)->Arg(4)->Arg(64)->ArgName("side")
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_Flush100, graph_mixed)->Arg(4)->Arg(16)->ArgName("side")
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Record + flush of the same 100-node elementwise graph, all timed.
void BM_RecordAndFlush100(benchmark::State& state) {
  sloth::Tensor x = sloth::randn({4, 4}), w = sloth::randn({4, 4});
  sloth::mark_step();
  sloth::Tensor y;
  for (int i = 0; i < 5; ++i) { y = graph_elementwise(x, w); sloth::mark_step(); }
  for (auto _ : state) {
    y = graph_elementwise(x, w);
    sloth::mark_step();
  }
}
BENCHMARK(BM_RecordAndFlush100)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---------------- graphs that scale ----------------
// Planning a NEW graph (a plan-cache miss: build_graph, lowering, fusion, backend compile with
// its memory planner), per node, for a deep chain and a wide program; recording with many
// live tensors; and a long loop that never syncs (automatic flushes all in).

// acc = acc + s, n times: one output, an n-deep chain.
std::vector<sloth::Tensor> graph_chain(int64_t n, const sloth::Tensor& a, const sloth::Tensor& s) {
  sloth::Tensor acc = a;
  for (int64_t i = 0; i < n; ++i) acc = acc + s;
  return {acc};
}
// out[i] = s * i, n times: n independent small ops, each output live.
std::vector<sloth::Tensor> graph_wide(int64_t n, const sloth::Tensor& a, const sloth::Tensor& s) {
  (void)a;
  std::vector<sloth::Tensor> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = s * static_cast<double>(i);
  return out;
}

// base.slice(0, 8j, 8j + 8).t().add_(bt), n times over 8 row blocks of one [64, 64] tensor:
// in-place writes through views, each functionalized into a scatter of the base (n is the
// number of writes; ~4 nodes each). Many size classes of one value (8): the dynamic-shape
// analysis must not be quadratic in them.
std::vector<sloth::Tensor> graph_view_writes(int64_t n, const sloth::Tensor& a, const sloth::Tensor& s) {
  (void)a;
  sloth::Tensor base = sloth::zeros({64, 64});
  sloth::Tensor bt = sloth::ones({64, 8}) * s.sum();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = i % 8;
    base.slice(0, 8 * j, 8 * j + 8).t().add_(bt);
  }
  return {base};
}

// n/10 blocks of a small model's ops (matmul, broadcast add, relu, sum over a dim, exp,
// softmax, cat, transpose): the op mix of a training step, scaled up.
std::vector<sloth::Tensor> graph_model_ops(int64_t n, const sloth::Tensor& a, const sloth::Tensor& s) {
  sloth::Tensor w = s.reshape({4, 4}), y = a.reshape({4, 4});
  std::vector<sloth::Tensor> out;
  for (int64_t i = 0; i < n / 10; ++i) {
    sloth::Tensor h = sloth::relu(sloth::matmul(y, w) + s.reshape({1, 16}).slice(1, 0, 4));
    sloth::Tensor p = sloth::softmax(h, 1) * sloth::exp(h.sum({1}, true) * 0.01);
    y = sloth::cat({p, h.t()}, 0).slice(0, 0, 4) + 0.5;
    if (i % 16 == 15) out.push_back(y);
  }
  out.push_back(y);
  return out;
}

// Time of the plan phase of one sync (metrics().plan_s) with an empty plan cache, per node.
template <std::vector<sloth::Tensor> (*G)(int64_t, const sloth::Tensor&, const sloth::Tensor&)>
void BM_PlanNew(benchmark::State& state) {
  NoAutoFlush nf;
  const int64_t n = state.range(0);
  sloth::Tensor a = sloth::randn({16}), s = sloth::randn({16});
  sloth::mark_step();
  double plan_cpu = 0;  // the planning thread's CPU time (wall time counts waits for a core)
  int64_t ir_nodes = 0;  // pending IR nodes the sync plans (n counts G's units of work)
  for (auto _ : state) {
    const int64_t before = sloth::lazy::pending_nodes();
    std::vector<sloth::Tensor> out = G(n, a, s);
    ir_nodes = sloth::lazy::pending_nodes() - before;
    sloth::lazy::clear_plan_cache();
    sloth::reset_metrics();
    sloth::mark_step();
    sloth::Metrics m = sloth::metrics();
    if (m.plan_cache_misses != 1) std::abort();
    state.SetIterationTime(m.plan_s);
    plan_cpu += m.plan_cpu_s;
    state.PauseTiming();
    out.clear();  // freeing is not planning
    state.ResumeTiming();
  }
  state.counters["per_node"] = benchmark::Counter(
      static_cast<double>(n) * state.iterations(),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["per_node_cpu"] = plan_cpu / (static_cast<double>(n) * state.iterations());
  state.counters["ir_nodes"] = static_cast<double>(ir_nodes);
  state.counters["per_ir_node_cpu"] = plan_cpu / (static_cast<double>(ir_nodes) * state.iterations());
}
BENCHMARK_TEMPLATE(BM_PlanNew, graph_chain)->Arg(1000)->Arg(10000)->Arg(100000)->ArgName("nodes")
    ->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_PlanNew, graph_wide)->Arg(1000)->Arg(10000)->Arg(100000)->ArgName("nodes")
    ->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_PlanNew, graph_model_ops)->Arg(1000)->Arg(10000)->Arg(40000)->ArgName("nodes")
    ->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_PlanNew, graph_view_writes)->Arg(100)->Arg(1000)->Arg(4000)->ArgName("writes")
    ->UseManualTime()->Unit(benchmark::kMillisecond);

// Recording out[i] = s * i (a scalar operand) while all n outputs stay live; arg 1: s
// requires grad (each op also records its autograd node).
void BM_RecordScalar_Live(benchmark::State& state) {
  NoAutoFlush nf;
  const int64_t n = state.range(0);
  const bool grad = state.range(1) != 0;
  sloth::Tensor s = sloth::randn({16}, sloth::TensorOptions().requires_grad(grad));
  sloth::mark_step();
  std::vector<sloth::Tensor> keep(n);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) keep[i] = s * static_cast<double>(i);
    state.PauseTiming();
    for (auto& t : keep) t = sloth::Tensor();  // dropped unsynced: pending IR freed
    state.ResumeTiming();
  }
  per_op(state, n);
}
// A warm-up before the timed runs: on a shared 2-core VM, the first 1e5-op iteration of a
// process took 0.5-0.6 s instead of ~12 ms in about one run of five (stop 40), with the same
// profile as a normal run (the whole vCPU slowed, not extra work), and the harness then
// stopped at that one iteration and reported 5-7 us per op. The rows are steady-state costs.
BENCHMARK(BM_RecordScalar_Live)->ArgsProduct({{1000, 10000, 100000}, {0, 1}})
    ->ArgNames({"live", "grad"})->UseRealTime()->Unit(benchmark::kMicrosecond)
    ->MinWarmUpTime(0.2);

// Recording a chain while 1e5 other pending tensors are live.
void BM_RecordChain_ManyLive(benchmark::State& state) {
  NoAutoFlush nf;
  sloth::Tensor a = sloth::randn({16}), s = sloth::randn({16});
  sloth::mark_step();
  std::vector<sloth::Tensor> others = graph_wide(state.range(0), a, s);
  sloth::Tensor y;
  for (auto _ : state) {
    y = a;
    for (int i = 0; i < kBatch; ++i) y = y + s;
    state.PauseTiming();
    y = sloth::Tensor();
    state.ResumeTiming();
  }
  per_op(state, kBatch);
}
BENCHMARK(BM_RecordChain_ManyLive)->Arg(100000)->ArgName("live")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinWarmUpTime(0.2);  // as BM_RecordScalar_Live

// acc = acc + s, 1e5 times, never synced by the program: the automatic flushes (default limit)
// run inside the loop. Arg cold=1 clears the plan cache before each run (a fresh program).
void BM_AutoFlushChain(benchmark::State& state) {
  constexpr int64_t kOps = 100000;
  const bool cold = state.range(0) != 0;
  sloth::Tensor a = sloth::zeros({16}), s = sloth::ones({16});
  sloth::mark_step();
  sloth::reset_metrics();
  sloth::Tensor acc;
  for (auto _ : state) {
    state.PauseTiming();
    if (cold) sloth::lazy::clear_plan_cache();
    acc = a;
    state.ResumeTiming();
    for (int64_t i = 0; i < kOps; ++i) acc = acc + s;
    state.PauseTiming();
    sloth_bench::check_close("auto-flush chain", acc.sum().item(), 16.0 * kOps);
    state.ResumeTiming();
  }
  sloth::Metrics m = sloth::metrics();
  state.counters["auto_flushes_per_run"] =
      static_cast<double>(m.auto_flushes) / static_cast<double>(state.iterations());
  per_op(state, kOps);
}
BENCHMARK(BM_AutoFlushChain)->Arg(0)->Arg(1)->ArgName("cold")->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
