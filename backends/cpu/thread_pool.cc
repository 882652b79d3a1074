#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/float_env.h"
#include "core/settings.h"
#include "lazy/profiler.h"

namespace sloth::cpu {
namespace {

thread_local bool t_in_pool = false;
std::atomic<int> g_bursts{0};  // live ComputeBursts

// Jobs are published through one atomic word, (generation << 32) | next chunk: a thread
// claims a chunk with a compare-exchange that also checks the generation, so a worker that
// wakes late can never run a chunk of a job other than the one it read. The task pointer
// and chunk count of a generation are only replaced after all its chunks were claimed and
// run, so whoever claims a chunk read that generation's task.
//
// Waiting polls first: inside a ComputeBurst a worker that just finished polls for the next
// job for SLOTH_POOL_SPIN_US before it sleeps (a training step runs tens of kernels back to
// back, each a job; sleeping in between put a futex wake-up and a task switch on each); once
// the burst ends it sleeps at once. The caller polls for its job's last chunks before it
// sleeps. Sleeping is std::atomic::wait (a futex).
int64_t spin_ns() {
  static const int64_t ns = settings().pool_spin_us * 1000;
  return ns;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() or kSpinNs passed; returns pred().
template <typename Pred>
bool spin_until(Pred pred) {
  const int64_t limit = spin_ns();
  if (limit == 0) return pred();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 63 &&
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                .count() > limit)
      return pred();
  }
}

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this, i] {
        lazy::profiling::set_thread_name("cpu worker " + std::to_string(i + 1));
        loop();
      });
  }
  ~Pool() {
    stop_.store(true);
    state_.fetch_add(uint64_t{1} << 32);  // a new generation with no chunks wakes everyone
    state_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // One job at a time: the backend runs one plan at a time per thread, and a caller that
  // finds the pool busy (another thread's plan) simply runs its chunks itself.
  void run(int chunks, const std::function<void(int)>& task) {
    std::unique_lock<std::mutex> submit(submit_mu_, std::try_to_lock);
    if (!submit.owns_lock()) {
      for (int c = 0; c < chunks; ++c) task(c);
      return;
    }
    task_.store(&task, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> 32) + 1;
    state_.store(gen << 32, std::memory_order_release);
    state_.notify_all();
    drain(gen);
    auto all_done = [&] { return done_.load(std::memory_order_acquire) == chunks; };
    if (!spin_until(all_done))
      for (int d; (d = done_.load(std::memory_order_acquire)) != chunks;) done_.wait(d);
  }

 private:
  // Claims and runs chunks of generation `gen` until none is left; returns how many it ran.
  int drain(uint64_t gen) {
    int ran = 0;
    uint64_t v = state_.load(std::memory_order_acquire);
    for (;;) {
      if ((v >> 32) != gen) return ran;
      const int chunks = chunks_.load(std::memory_order_relaxed);
      const int c = static_cast<int>(v & 0xffffffffu);
      if (c >= chunks) return ran;
      const std::function<void(int)>* task = task_.load(std::memory_order_relaxed);
      if (!state_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;  // v now holds the current word
      (*task)(c);
      ++ran;
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_all();
      v = state_.load(std::memory_order_acquire);
    }
  }
  void loop() {
    t_in_pool = true;
    uint64_t seen = state_.load() >> 32;
    for (;;) {
      uint64_t v = state_.load(std::memory_order_acquire);
      if ((v >> 32) == seen) {
        // Poll only while a plan runs (a burst): between plans the worker sleeps at once.
        auto next_job = [&] { return (state_.load(std::memory_order_acquire) >> 32) != seen; };
        if (!spin_until([&] { return next_job() || g_bursts.load(std::memory_order_relaxed) == 0; }) ||
            !next_job()) {
          while (((v = state_.load(std::memory_order_acquire)) >> 32) == seen) state_.wait(v);
        }
        v = state_.load(std::memory_order_acquire);
      }
      if (stop_.load()) return;
      seen = v >> 32;
      sloth::internal::sync_float_env();  // the submitting thread's flush-denormal mode
      if (lazy::profiling::on()) {
        // A worker's share of the current kernel, on its own row of the trace.
        const int64_t t0 = lazy::profiling::now_ns();
        if (drain(seen) > 0)
          lazy::profiling::record({.kind = lazy::profiling::Kind::kTask, .tid = 0, .start_ns = t0,
                                   .dur_ns = lazy::profiling::now_ns() - t0, .name = "task",
                                   .detail = "", .info = lazy::profiling::current_kernel()});
      } else {
        drain(seen);
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex submit_mu_;
  std::atomic<uint64_t> state_{0};
  std::atomic<const std::function<void(int)>*> task_{nullptr};
  std::atomic<int> chunks_{0}, done_{0};
  std::atomic<bool> stop_{false};
};

Pool& pool() {
  // Leaked on purpose: joining threads during static destruction races with other statics.
  // SLOTH_NUM_THREADS caps the threads (benchmarks compare 1 and 2 threads in one binary).
  static Pool* p = [] {
    int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (settings().num_threads > 0) n = std::min(n, settings().num_threads);
    return new Pool(n - 1);
  }();
  return *p;
}

}  // namespace

int num_threads() { return pool().size(); }

ComputeBurst::ComputeBurst() { g_bursts.fetch_add(1, std::memory_order_relaxed); }
ComputeBurst::~ComputeBurst() { g_bursts.fetch_sub(1, std::memory_order_relaxed); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(num_threads(), (n + grain - 1) / grain);
  if (chunks <= 1 || t_in_pool) {
    fn(0, n);
    return;
  }
  // Chunk boundaries are multiples of `grain` so callers can align them to their tiles.
  int64_t per = ((n + chunks - 1) / chunks + grain - 1) / grain * grain;
  bool was = t_in_pool;
  t_in_pool = true;
  pool().run(static_cast<int>(chunks), [&](int c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) fn(b, e);
  });
  t_in_pool = was;
}

}  // namespace sloth::cpu
