// LibTorch side of benchmarks/norm_bench.cc (BatchNorm2d and GroupNorm training steps), for a
// side-by-side run. Not a Bazel target; compile against Debian's libtorch-dev:
//   g++ -O3 -std=c++17 -o /tmp/libtorch_norm tools/libtorch_norm_bench.cc \
//     -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10
//   /tmp/libtorch_norm 1   # threads (1 or 2); prints the best of 27 steps
#include <torch/torch.h>
#include <chrono>
#include <cstdio>
int main(int argc, char** argv) {
  torch::set_num_threads(argc > 1 ? atoi(argv[1]) : 2);
  for (auto [n, c, hw] : {std::tuple{128, 32, 28}, std::tuple{128, 64, 14}}) {
    torch::nn::BatchNorm2d bn(c);
    auto x = torch::randn({n, c, hw, hw}).requires_grad_(true);
    auto g = torch::randn({n, c, hw, hw});
    double best = 1e9;
    for (int r = 0; r < 30; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      auto loss = (bn(x) * g).sum();
      loss.backward();
      x.mutable_grad() = torch::Tensor();
      bn->zero_grad();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 2) best = std::min(best, ms);
    }
    std::printf("libtorch BN2d train step [%d,%d,%d,%d]: best %.2f ms\n", n, c, hw, hw, best);
  }
  {
    torch::nn::GroupNorm gn(8, 32);
    auto x = torch::randn({128, 32, 28, 28}).requires_grad_(true);
    auto g = torch::randn({128, 32, 28, 28});
    double best = 1e9;
    for (int r = 0; r < 30; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      auto loss = (gn(x) * g).sum();
      loss.backward();
      x.mutable_grad() = torch::Tensor();
      gn->zero_grad();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 2) best = std::min(best, ms);
    }
    std::printf("libtorch GroupNorm train step: best %.2f ms\n", best);
  }
}
