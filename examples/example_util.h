// Small pieces the training examples share: --device parsing, a progress bar, durations.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "sloth/sloth.h"

namespace sloth::examples {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s.rfind("cuda", 0) == 0) {
    int index = s.size() > 5 && s[4] == ':' ? std::stoi(s.substr(5)) : 0;
    if (!cuda_is_available())
      throw Error("--device=" + s + ": CUDA is not available (build with --config=cuda on a "
                  "machine with a GPU), use --device=cpu");
    return Device::cuda(index);
  }
  throw Error("--device: expected cpu or cuda[:N], got '" + s + "'");
}

inline std::string format_time(double s) {
  char buf[32];
  if (s >= 60) snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

// "\r<prefix> [=====>    ] done/total  loss 0.1234  <rate>  ETA 12.3s" on one line.
inline void progress_bar(const std::string& prefix, int64_t done, int64_t total, double loss,
                         const std::string& rate, double eta_s) {
  const int width = 30;
  int filled = int(width * done / std::max<int64_t>(total, 1));
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  printf("\r%s [%s] %lld/%lld  loss %.4f  %s  ETA %s   ", prefix.c_str(), bar.c_str(),
         (long long)done, (long long)total, loss, rate.c_str(), format_time(eta_s).c_str());
  fflush(stdout);
}

inline void print_runtime_metrics() {
  Metrics m = metrics();
  printf("runtime: plans compiled (cache misses) %lld, plan cache hits %lld, graphs %lld\n",
         (long long)m.plan_cache_misses, (long long)m.plan_cache_hits,
         (long long)m.graphs_executed);
  printf("metrics: %s\n", m.to_string().c_str());
}

}  // namespace sloth::examples
