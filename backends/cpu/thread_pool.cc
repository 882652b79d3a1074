#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/settings.h"
#include "lazy/profiler.h"

namespace sloth::cpu {
namespace {

thread_local bool t_in_pool = false;

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
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
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
    {
      std::lock_guard<std::mutex> l(mu_);
      task_ = &task;
      chunks_ = chunks;
      next_.store(0);
      done_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    int finished = drain();
    std::unique_lock<std::mutex> l(mu_);
    done_ += finished;
    // Waiting for active_ too means no worker still touches this job when the next starts.
    done_cv_.wait(l, [&] { return done_ == chunks_ && active_ == 0; });
    task_ = nullptr;
  }

 private:
  int drain() {
    int finished = 0;
    for (int c; (c = next_.fetch_add(1)) < chunks_;) {
      (*task_)(c);
      ++finished;
    }
    return finished;
  }
  void loop() {
    t_in_pool = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || (generation_ != seen && task_ != nullptr); });
        if (stop_) return;
        seen = generation_;
        ++active_;
      }
      int finished;
      if (lazy::profiling::on()) {
        // A worker's share of the current kernel, on its own row of the trace.
        lazy::profiling::Scope task(lazy::profiling::Kind::kTask, "task",
                                    lazy::profiling::current_kernel());
        finished = drain();
      } else {
        finished = drain();
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        done_ += finished;
        --active_;
        if (done_ == chunks_ && active_ == 0) done_cv_.notify_all();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex submit_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  int chunks_ = 0, done_ = 0, active_ = 0;
  std::atomic<int> next_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
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
