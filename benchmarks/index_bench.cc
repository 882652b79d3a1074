// The index ops on the CPU backend at embedding sizes: a 10000 x 128 float table and 4096
// int64 indices. index_select is an embedding lookup, index_add its backward; gather and
// scatter_add walk one index per element (4096 x 128 index into the table's rows).
//   bazel run //benchmarks:index_bench
#include <benchmark/benchmark.h>

#include <vector>

#include "benchmarks/bench_common.h"
#include "sloth/sloth.h"

namespace {

constexpr int64_t kTable = 10000, kWidth = 128, kLookups = 4096;

struct Data {
  sloth::Tensor table, idx, rows, idx2d, src2d, classes;
  Data() {
    sloth::manual_seed(11);
    table = sloth::randn({kTable, kWidth});
    idx = sloth::randint(0, kTable, {kLookups});
    rows = sloth::randn({kLookups, kWidth});
    idx2d = sloth::randint(0, kTable, {kLookups, kWidth});
    src2d = sloth::randn({kLookups, kWidth});
    classes = sloth::randint(0, 1000, {kLookups});
    sloth::mark_step();
  }
};

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_IndexSelect(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::index_select(d.table, 0, d.idx)}); });
  for (auto _ : state) {
    y = sloth::index_select(d.table, 0, d.idx);
    sloth::mark_step();
  }
  const int64_t r = d.idx.select(0, 5).to_vector<int64_t>()[0];
  sloth_bench::check_close("index_select row", y.select(0, 5).sum().item(),
                           d.table.select(0, r).sum().item());
  set_bytes(state, 2.0 * 4 * kLookups * kWidth);
}
BENCHMARK(BM_IndexSelect)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_IndexAdd(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::index_add(d.table, 0, d.idx, d.rows)}); });
  for (auto _ : state) {
    y = sloth::index_add(d.table, 0, d.idx, d.rows);
    sloth::mark_step();
  }
  sloth_bench::check_close("index_add total", y.sum().item(),
                           d.table.sum().item() + d.rows.sum().item(), 1e-2);
  set_bytes(state, 4.0 * (2 * kTable * kWidth + 2 * kLookups * kWidth));
}
BENCHMARK(BM_IndexAdd)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_IndexPut(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::index_put(d.table, d.idx, d.rows)}); });
  for (auto _ : state) {
    y = sloth::index_put(d.table, d.idx, d.rows);
    sloth::mark_step();
  }
  set_bytes(state, 4.0 * (2 * kTable * kWidth + kLookups * kWidth));
}
BENCHMARK(BM_IndexPut)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_Gather(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::gather(d.table, 0, d.idx2d)}); });
  for (auto _ : state) {
    y = sloth::gather(d.table, 0, d.idx2d);
    sloth::mark_step();
  }
  set_bytes(state, 4.0 * 3 * kLookups * kWidth);  // index (8 bytes), write
}
BENCHMARK(BM_Gather)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_ScatterAdd(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::scatter_add(d.table, 0, d.idx2d, d.src2d)}); });
  for (auto _ : state) {
    y = sloth::scatter_add(d.table, 0, d.idx2d, d.src2d);
    sloth::mark_step();
  }
  sloth_bench::check_close("scatter_add total", y.sum().item(),
                           d.table.sum().item() + d.src2d.sum().item(), 1e-2);
  set_bytes(state, 4.0 * (2 * kTable * kWidth + 3 * kLookups * kWidth));
}
BENCHMARK(BM_ScatterAdd)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_OneHot(benchmark::State& state) {
  Data d;
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::one_hot(d.classes, 1000)}); });
  for (auto _ : state) {
    y = sloth::one_hot(d.classes, 1000);
    sloth::mark_step();
  }
  set_bytes(state, 8.0 * kLookups * 1000);
}
BENCHMARK(BM_OneHot)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);

}  // namespace
