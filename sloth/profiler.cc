#include "sloth/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/error.h"
#include "lazy/metrics.h"
#include "lazy/profiler.h"
#include "sloth/lazy_api.h"
#include "sloth/ops.h"
#include "sloth/tensor.h"

namespace sloth::profiler {
namespace {

namespace prof = lazy::profiling;

struct State {
  std::mutex mu;
  std::string path;                  // of the running session
  std::optional<prof::Session> last;  // the last stopped session
};

State& state() {
  static auto* s = new State();
  return *s;
}

// Best of `reps` timed runs of fn (after one warm-up run), in seconds.
template <class F>
double best_seconds(int reps, F fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

Peaks measure_peaks() {
  // Through sloth itself (its GEMM path and its elementwise loop over all worker threads),
  // with constant inputs: the user's random stream and metrics are left as they were.
  const lazy::Counters saved = lazy::counters();
  Peaks p;
  {
    const int64_t n = 1024;
    Tensor a = full({n, n}, 0.5), b = full({n, n}, 0.25);
    sync({a, b});
    const double s = best_seconds(5, [&] { sync({matmul(a, b)}); });
    p.gemm_gflops = 2.0 * n * n * n / s * 1e-9;
  }
  {
    const int64_t n = int64_t{8} << 20;  // 32 MiB per array: well past the caches
    Tensor b = full({n}, 1.0), c = full({n}, 2.0);
    sync({b, c});
    const double s = best_seconds(5, [&] { sync({b + c * 3.0}); });
    p.triad_gbps = 3.0 * 4.0 * static_cast<double>(n) / s * 1e-9;
  }
  lazy::counters() = saved;
  return p;
}

struct Row {
  std::string name, shapes;
  int64_t calls = 0, ns = 0, bytes = 0;
  double flops = 0;
};

std::string fit(const std::string& s, size_t w) {
  return s.size() <= w ? s : s.substr(0, w - 3) + "...";
}

}  // namespace

Peaks machine_peaks() {
  static const Peaks p = measure_peaks();
  return p;
}

void start(const std::string& path) {
  State& st = state();
  std::lock_guard<std::mutex> l(st.mu);
  if (prof::on())
    throw Error(absl::StrFormat(
        "profiler::start(\"%s\"): a profiling session is already running (to \"%s\"); call "
        "profiler::stop() first", path, st.path));
  {
    std::ofstream f(path, std::ios::trunc);
    if (!f)
      throw Error(absl::StrFormat(
          "profiler::start(\"%s\"): cannot create the trace file; give a path in an existing, "
          "writable directory", path));
  }
  machine_peaks();  // measured before recording starts, so they are not in the trace
  st.path = path;
  prof::begin();
}

void stop() {
  State& st = state();
  std::lock_guard<std::mutex> l(st.mu);
  if (!prof::on())
    throw Error("profiler::stop(): no profiling session is running; call "
                "profiler::start(path) first (or set SLOTH_PROFILE=path)");
  prof::Session s = prof::end();
  std::string err;
  const bool ok = prof::write_chrome_json(s, st.path, &err);
  st.last = std::move(s);
  if (!ok)
    throw Error(absl::StrFormat("profiler::stop(): cannot write the trace to \"%s\": %s", st.path,
                                err));
}

bool running() { return prof::on(); }

namespace {

std::string format_summary(const prof::Session& s, int top) {
  const Peaks peaks = machine_peaks();
  std::map<std::pair<std::string, std::string>, Row> rows;
  std::map<std::string, std::pair<int64_t, int64_t>> phases;  // name -> (count, ns)
  int64_t kernel_ns = 0, kernel_calls = 0;
  for (const prof::Event& e : s.events) {
    if (e.kind == prof::Kind::kPhase) {
      auto& ph = phases[e.name];
      ++ph.first;
      ph.second += e.dur_ns;
    } else if (e.kind == prof::Kind::kKernel && e.info) {
      Row& r = rows[{e.info->name, e.info->shapes}];
      r.name = e.info->name;
      r.shapes = e.info->shapes;
      ++r.calls;
      r.ns += e.dur_ns;
      r.bytes += e.info->bytes;
      r.flops += e.info->flops;
      kernel_ns += e.dur_ns;
      ++kernel_calls;
    }
  }
  std::vector<Row> sorted;
  for (auto& [k, r] : rows) sorted.push_back(std::move(r));
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.ns > b.ns; });

  std::string out = absl::StrFormat(
      "sloth profile: %.3f s recorded, %d kernel calls, %.3f s in kernels\n"
      "machine peaks (measured at start): GEMM %.1f GFLOP/s, triad %.1f GB/s\n",
      static_cast<double>(s.wall_ns) * 1e-9, kernel_calls,
      static_cast<double>(kernel_ns) * 1e-9, peaks.gemm_gflops, peaks.triad_gbps);
  for (const char* ph : {"trace", "plan", "execute"}) {
    auto it = phases.find(ph);
    if (it != phases.end())
      out += absl::StrFormat("  %-8s %6d steps %10.3f ms\n", ph, it->second.first,
                             static_cast<double>(it->second.second) * 1e-6);
  }
  out += absl::StrFormat("%-44s %-22s %6s %10s %6s %9s %8s %8s %6s\n", "kernel", "shapes", "calls",
                         "total ms", "share", "avg us", "GB/s", "GFLOP/s", "%peak");
  for (int i = 0; i < static_cast<int>(sorted.size()) && i < top; ++i) {
    const Row& r = sorted[i];
    const double sec = std::max<double>(1.0, static_cast<double>(r.ns)) * 1e-9;
    const double gbps = static_cast<double>(r.bytes) / sec * 1e-9, gflops = r.flops / sec * 1e-9;
    const double peak = 100.0 * std::max(peaks.triad_gbps > 0 ? gbps / peaks.triad_gbps : 0.0,
                                         peaks.gemm_gflops > 0 ? gflops / peaks.gemm_gflops : 0.0);
    out += absl::StrFormat("%-44s %-22s %6d %10.3f %5.1f%% %9.1f %8.2f %8.2f %5.0f%%\n",
                           fit(r.name, 44), fit(r.shapes, 22), r.calls,
                           static_cast<double>(r.ns) * 1e-6,
                           kernel_ns > 0 ? 100.0 * static_cast<double>(r.ns) / kernel_ns : 0.0,
                           static_cast<double>(r.ns) * 1e-3 / static_cast<double>(r.calls), gbps,
                           gflops, peak);
  }
  return out;
}

// SLOTH_PROFILE: the table goes to stderr when the program exits.
// SLOTH_PROFILE: peaks measured before recording starts; the table goes to stderr at exit.
const bool env_hooks_registered = [] {
  prof::set_env_hooks([] { machine_peaks(); },
                      [](const prof::Session& s) {
                        std::fprintf(stderr, "%s", format_summary(s, 25).c_str());
                      });
  return true;
}();

}  // namespace

std::string summary(int top) {
  prof::Session s;
  {
    State& st = state();
    std::lock_guard<std::mutex> l(st.mu);
    if (prof::on()) s = prof::snapshot();
    else if (st.last) s = *st.last;
  }
  return format_summary(s, top);
}

}  // namespace sloth::profiler
