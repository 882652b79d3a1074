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

// Element count above which kernels bother to split work across threads.
inline constexpr int64_t kParallelThreshold = 32 * 1024;

}  // namespace sloth::cpu
