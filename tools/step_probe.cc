// Probe of an overhead-bound training step (tiny MLP 32-64-64-1, batch 16): time per phase.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "benchmarks/bench_common.h"
#include "sloth/sloth.h"

int main(int argc, char** argv) {
  using namespace sloth;
  using Clock = std::chrono::steady_clock;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  sloth_bench::Mlp mlp({32, 64, 64, 1});
  Tensor x = randn({16, 32}), y = randn({16, 1});
  mark_step();
  double t_trace = 0, t_sync = 0, t_item = 0, t_fwd = 0, t_bwd = 0;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    Tensor loss = mse_loss(mlp.forward(x), y);
    auto ta = Clock::now();
    loss.backward();
    auto tb = Clock::now();
    mlp.sgd_step();
    auto t1 = Clock::now();
    if (s >= steps / 10) {
      t_fwd += std::chrono::duration<double, std::micro>(ta - t0).count();
      t_bwd += std::chrono::duration<double, std::micro>(tb - ta).count();
    }
    mark_step();
    auto t2 = Clock::now();
    volatile double l = loss.item();
    (void)l;
    auto t3 = Clock::now();
    if (s >= steps / 10) {
      t_trace += std::chrono::duration<double, std::micro>(t1 - t0).count();
      t_sync += std::chrono::duration<double, std::micro>(t2 - t1).count();
      t_item += std::chrono::duration<double, std::micro>(t3 - t2).count();
    }
  }
  int n = steps - steps / 10;
  std::printf("per step: trace %.1f us (forward %.1f, backward %.1f, optimizer %.1f), mark_step %.1f us, "
              "item %.1f us\n%s\n", t_trace / n, t_fwd / n, t_bwd / n, (t_trace - t_fwd - t_bwd) / n,
              t_sync / n, t_item / n, metrics().to_string().c_str());
}
