// The wall time of tests/train_smoke_test.cc's SyntheticTaskConverges run (the test asserts
// its loss and accuracy; timing belongs here): an MLP 2-32-32-2 trained with Adam (lr 1e-2)
// for 40 epochs of 1,024 XOR-of-quadrants points in batches of 128, a mark_step() per batch.
// One iteration is the whole run, from data to trained model (tests/support/xor_run.cc).
// Counters: the last epoch's mean loss, training accuracy and plan-cache misses.
//   bazel run //benchmarks:train_smoke_bench
#include <benchmark/benchmark.h>

#include "tests/support/xor_run.h"

namespace {
using namespace sloth;

void BM_TrainSmokeXor(benchmark::State& state) {
  sloth::testing::XorRun r;
  for (auto _ : state) {
    reset_metrics();
    r = sloth::testing::train_xor_quadrants();
  }
  state.counters["last_epoch_loss"] = r.last_epoch_loss;
  state.counters["train_accuracy"] = r.train_accuracy;
  state.counters["plan_misses"] = static_cast<double>(r.plan_misses);
}
BENCHMARK(BM_TrainSmokeXor)->UseRealTime()->Unit(benchmark::kSecond)->Iterations(3);

}  // namespace
