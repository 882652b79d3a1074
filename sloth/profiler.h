// The profiler: a Chrome trace-event file of what sloth ran (open it in Perfetto or
// chrome://tracing) and a table of the kernels that took the time.
//
//   sloth::profiler::start("trace.json");
//   for (...) train_step();
//   sloth::profiler::stop();                       // writes trace.json
//   std::cout << sloth::profiler::summary();       // top kernels, GB/s, GFLOP/s, % of peak
//
// SLOTH_PROFILE=trace.json profiles a whole program (from its first sync to exit) without a
// code change. The trace holds, per step, the trace (recording ops), plan and execute phases
// and, per kernel, its name (the op or the fused ops), output shapes, dtype, time, bytes moved
// and FLOPs, with each CPU worker's share on its own row. CUDA steps show their phases only.
#pragma once

#include <string>

namespace sloth::profiler {

// Starts recording. Throws sloth::Error, and records nothing, when a session is already on or
// `path` cannot be written (it is created, empty, right away).
void start(const std::string& path);
// Stops recording and writes the trace to start()'s path. Throws sloth::Error when no session
// was started.
void stop();
bool running();

// The kernels of the running session (or else the last stopped one) by total time: calls,
// time, share of kernel time, GB/s and GFLOP/s, and the share of the machine's peak (the
// larger of the two ratios). Also the step phases' totals. At most `top` rows.
std::string summary(int top = 20);

// What the machine reaches here: a float32 GEMM through sloth (GFLOP/s) and a STREAM triad
// (GB/s), measured once per process (at the first start() or summary()) and cached.
struct Peaks {
  double gemm_gflops = 0;
  double triad_gbps = 0;
};
Peaks machine_peaks();

}  // namespace sloth::profiler
