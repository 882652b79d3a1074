// The profiler's recording side: timed events (step phases, kernels, pool tasks) kept per
// thread while a session is on, and the Chrome trace-event file they become. The scheduler
// and the backends record here; sloth/profiler.h is the public face (start, stop, summary).
//
// Off, a hook costs one relaxed atomic load (`on()`); on, an event is two clock reads and an
// append to the thread's own buffer (no lock shared with other threads while recording).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sloth::lazy::profiling {

// What a kernel did, computed once per kernel of a plan (shared by all its events).
struct KernelInfo {
  std::string name;    // the op, or the fused ops ("fused[mul,add,relu]")
  std::string shapes;  // its output shape(s), e.g. "[128,256]"
  std::string dtype;
  int64_t bytes = 0;   // read from outside the kernel + written
  double flops = 0;    // floating-point operations (a multiply-add is two)
};

enum class Kind : uint8_t { kPhase, kKernel, kTask };

struct Event {
  Kind kind;
  int32_t tid;               // the recording thread's number (thread_names()[tid])
  int64_t start_ns, dur_ns;  // since the session's start
  std::string name;          // phases and tasks; kernels take info->name
  std::string detail;        // phases: e.g. "plan cache hit"
  std::shared_ptr<const KernelInfo> info;  // kernels and tasks
};

struct Session {
  std::vector<Event> events;              // every thread's, in start order
  std::vector<std::string> thread_names;  // by tid
  int64_t wall_ns = 0;                    // start to stop
};

namespace internal {
extern std::atomic<bool> g_on;
}
inline bool on() { return internal::g_on.load(std::memory_order_relaxed); }

// Nanoseconds since the session started (steady clock).
int64_t now_ns();

// Starts a session (clears what an earlier one recorded); false if one is on already.
bool begin();
// Ends the session and returns its events; an empty session when none was on.
Session end();
// The events recorded so far, without stopping (summary() of a running session).
Session snapshot();

void record(Event e);
// Names the calling thread in the trace ("main" unless set).
void set_thread_name(std::string name);

// The kernel the pool's tasks belong to (set by the thread that hands work to the pool).
void set_current_kernel(std::shared_ptr<const KernelInfo> info);
std::shared_ptr<const KernelInfo> current_kernel();

// Times a region as one event of `kind` when a session is on.
class Scope {
 public:
  Scope(Kind kind, std::string name, std::shared_ptr<const KernelInfo> info = nullptr)
      : active_(on()) {
    if (!active_) return;
    kind_ = kind;
    name_ = std::move(name);
    info_ = std::move(info);
    start_ = now_ns();
  }
  void set_detail(std::string d) { detail_ = std::move(d); }
  // Records the event now (the destructor then does nothing).
  void finish();
  ~Scope() { finish(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_;
  Kind kind_ = Kind::kPhase;
  std::string name_, detail_;
  std::shared_ptr<const KernelInfo> info_;
  int64_t start_ = 0;
};

// The Chrome trace-event JSON of a session (opens in Perfetto or chrome://tracing): complete
// ("X") events in microseconds, thread-name metadata, kernel arguments (shapes, dtype,
// bytes, FLOPs, GB/s, GFLOP/s).
std::string to_chrome_json(const Session& s);

// Writes the trace of `s` to `path`; false (and `error` says why) when the file cannot be written.
bool write_chrome_json(const Session& s, const std::string& path, std::string* error);

// SLOTH_PROFILE=path: the first sync starts a session, written to `path` at exit (unless the
// program stopped it itself). The public face registers two hooks at its static init:
// `on_start` runs just before recording starts (it measures the machine's peaks, with syncs
// of its own) and `on_exit` gets the session after the file is written (it prints the summary).
void start_from_env_once();
using StartHook = void (*)();
using ExitReport = void (*)(const Session& s);
void set_env_hooks(StartHook on_start, ExitReport on_exit);

}  // namespace sloth::lazy::profiling
