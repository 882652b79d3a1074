// Quick probe of the trace path: ns per recorded op (no sync in the timed region).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "sloth/sloth.h"

int main(int argc, char** argv) {
  using namespace sloth;
  set_auto_flush_limit(int64_t{1} << 40);
  Tensor x = ones({16});
  mark_step();
  for (int rep = 0; rep < 3; ++rep) {
    Tensor y = x;
    auto t0 = std::chrono::steady_clock::now();
    const int n = argc > 1 ? atoi(argv[1]) : 200000;
    for (int i = 0; i < n; ++i) y = y + x;
    auto t1 = std::chrono::steady_clock::now();
    std::printf("tensor+tensor: %.1f ns/op\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
    y = Tensor();
    Tensor z = x;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) z = z * 1.5;
    t1 = std::chrono::steady_clock::now();
    std::printf("tensor*double: %.1f ns/op\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
    z = Tensor();
    mark_step();
  }
}
