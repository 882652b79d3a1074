// A small pool of std::thread workers for the CPU backend. Work is split only when it is
// large (the callers check a threshold), so small graphs never pay a wake-up.
#pragma once

#include <cstdint>
#include <functional>

namespace sloth::cpu {

// Number of threads that take part in parallel_for (workers + the caller).
int num_threads();

// Runs fn(begin, end) over [0, n) split into at most num_threads() chunks of at least `grain`
// elements. Runs inline when one chunk suffices or when called from inside a pool task.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// While a ComputeBurst lives (the CPU backend holds one for each plan it runs), an idle worker
// polls for the next kernel for up to SLOTH_POOL_SPIN_US before it sleeps: a plan runs tens
// of kernels back to back, and a futex wake-up per kernel cost more than the small ones.
// Outside bursts idle workers block at once, so no worker spins while the program traces,
// reads data or runs code of its own (or another process's) on that core.
class ComputeBurst {
 public:
  ComputeBurst();
  ~ComputeBurst();
  ComputeBurst(const ComputeBurst&) = delete;
  ComputeBurst& operator=(const ComputeBurst&) = delete;
};

// Element count above which kernels bother to split work across threads.
inline constexpr int64_t kParallelThreshold = 32 * 1024;

}  // namespace sloth::cpu
