// Probe of the trace path: ns (and, under callgrind, instructions) per recorded op, with no
// sync in the timed region. Usage: trace_probe [ops] [mode: 0 both, 1 tensor+tensor,
// 2 tensor*double, 3 tensor+tensor with a chain that requires grad]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "sloth/sloth.h"

int main(int argc, char** argv) {
  using namespace sloth;
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  const int mode = argc > 2 ? std::atoi(argv[2]) : 0;
  set_auto_flush_limit(int64_t{1} << 40);
  Tensor x = ones({16});
  mark_step();
  Tensor w = ones({16}, TensorOptions().requires_grad());
  for (int rep = 0; rep < 3; ++rep) {
    if (mode == 3) {
      Tensor y = w;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) y = y + x;
      auto t1 = std::chrono::steady_clock::now();
      std::printf("requires_grad chain: %.1f ns/op\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
      continue;
    }
    if (mode != 2) {
      Tensor y = x;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) y = y + x;
      auto t1 = std::chrono::steady_clock::now();
      std::printf("tensor+tensor: %.1f ns/op\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
    }
    if (mode != 1) {
      Tensor z = x;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) z = z * 1.5;
      auto t1 = std::chrono::steady_clock::now();
      std::printf("tensor*double: %.1f ns/op\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
    }
  }
}
