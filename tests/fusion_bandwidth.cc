// Fused elementwise chains against a STREAM triad in the same binary (issue 5's target: a
// fused chain reaches >= 85% of triad bytes/s). Run with SLOTH_NUM_THREADS=1 or 2; the triad
// uses the same number of threads.
//   bazel run //tests:fusion_bandwidth
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "sloth/sloth.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Median wall ms; *cpu gets the median process CPU ms (a fairer figure on a shared machine).
template <typename F>
double median_ms(F&& f, int reps, double* cpu = nullptr) {
  std::vector<double> t, c;
  f();  // warm
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    double c0 = cpu_ms();
    f();
    c.push_back(cpu_ms() - c0);
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  if (cpu) *cpu = c[c.size() / 2];
  return t[t.size() / 2];
}

}  // namespace

int main() {
  using namespace sloth;
  const int64_t n = 16 << 20;
  int threads = 2;
  if (const char* v = std::getenv("SLOTH_NUM_THREADS")) threads = std::max(1, std::atoi(v));
  const int reps = std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 15;

  std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 3.f);
  auto triad = [&] {
    std::vector<std::thread> ts;
    auto body = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 0.5f * c[i];
    };
    int64_t per = n / threads;
    for (int t = 1; t < threads; ++t) ts.emplace_back(body, t * per, t == threads - 1 ? n : (t + 1) * per);
    body(0, threads == 1 ? n : per);
    for (auto& t : ts) t.join();
  };
  double tri_cpu = 0;
  double tri = median_ms(triad, reps, &tri_cpu);
  double tri_gbs = 3.0 * n * 4 / tri / 1e6;
  std::printf("threads %d  triad: %.2f ms (cpu %.2f ms)  %.1f GB/s\n", threads, tri, tri_cpu, tri_gbs);

  // The chain as a hand-fused loop (5 inputs, 1 output), same thread count.
  std::vector<float> d(n, 0.5f), e(n, 1.5f), f(n, 0.f);
  auto hand = [&] {
    std::vector<std::thread> ts;
    auto body = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float v = a[i] * b[i] + c[i];
        f[i] = (v > 0 ? v : 0.f) * d[i] - e[i] / 2;
      }
    };
    int64_t per = n / threads;
    for (int t = 1; t < threads; ++t) ts.emplace_back(body, t * per, t == threads - 1 ? n : (t + 1) * per);
    body(0, threads == 1 ? n : per);
    for (auto& t : ts) t.join();
  };
  double hand_cpu = 0;
  double hand_ms = median_ms(hand, reps, &hand_cpu);
  std::printf("hand-fused relu(a*b+c)*d-e/2: %.2f ms (cpu %.2f ms)  %.1f GB/s\n", hand_ms, hand_cpu,
              6.0 * n * 4 / hand_ms / 1e6);

  std::vector<Tensor> in;
  for (int i = 0; i < 17; ++i) {
    in.push_back(randn({n}));
  }
  sync(in);
  const int only = std::getenv("K") ? std::atoi(std::getenv("K")) : 0;  // K=6: just that chain
  for (int k : {1, 2, 4, 6, 8, 16}) {
    if (only && k != only) continue;
    int inputs = 0;
    auto chain = [&] {
      // k ops over distinct inputs where possible: x = in0; x = x op in_j ...
      Tensor x = in[0];
      inputs = 1;
      if (k == 6) {  // the chain: relu(a*b+c)*d - e/2 (5 inputs)
        x = relu(in[0] * in[1] + in[2]) * in[3] - in[4] / 2.0;
        inputs = 5;
      } else {
        for (int j = 0; j < k; ++j) {
          if (j % 2 == 0 && inputs < 4) x = x * in[inputs++];
          else x = j % 4 == 1 ? relu(x) : x + 1.0;
        }
      }
      return x;
    };
    auto step = [&] {
      Tensor y = chain();
      sync({y});
    };
    double cpu = 0;
    double ms = median_ms(step, reps, &cpu);
    double bytes = (inputs + 1.0) * n * 4;
    double gbs = bytes / ms / 1e6;
    // Per-byte CPU cost against the triad's (3 arrays): the figure that survives a busy host.
    double cpu_ratio = (3.0 * n * 4 / tri_cpu) / (bytes / cpu);
    std::printf("k=%-2d inputs=%d  %.2f ms (cpu %.2f)  %.1f GB/s  %.0f%% of triad (cpu-time basis %.0f%%)\n",
                k, inputs, ms, cpu, gbs, 100 * gbs / tri_gbs, 100 / cpu_ratio);
  }
  std::printf("%s", metrics().to_string().c_str());
  return 0;
}
