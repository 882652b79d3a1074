#include "lazy/profiler.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/settings.h"

namespace sloth::lazy::profiling {
namespace internal {
std::atomic<bool> g_on{false};
}
namespace {

using Clock = std::chrono::steady_clock;

// One buffer per thread that ever recorded. Buffers live as long as the process (a pool
// worker's outlives nothing; a short-lived thread's is kept so its events still count), and
// each has its own lock, taken by its thread per event and by end()/snapshot(): uncontended
// while recording.
struct Buffer {
  std::mutex mu;
  int32_t tid = 0;
  std::string name;
  std::vector<Event> events;
};

struct Registry {
  std::mutex mu;
  std::vector<Buffer*> buffers;
  Clock::time_point t0 = Clock::now();
  std::mutex current_mu;
  std::shared_ptr<const KernelInfo> current;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

Buffer& my_buffer() {
  thread_local Buffer* b = [] {
    auto* nb = new Buffer();
    Registry& r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    nb->tid = static_cast<int32_t>(r.buffers.size());
    nb->name = "thread " + std::to_string(nb->tid);
    r.buffers.push_back(nb);
    return nb;
  }();
  return *b;
}

Session collect(bool clear) {
  Registry& r = registry();
  Session s;
  s.wall_ns = now_ns();
  std::lock_guard<std::mutex> l(r.mu);
  s.thread_names.resize(r.buffers.size());
  for (Buffer* b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    s.thread_names[b->tid] = b->name;
    if (clear) {
      std::move(b->events.begin(), b->events.end(), std::back_inserter(s.events));
      b->events.clear();
    } else {
      s.events.insert(s.events.end(), b->events.begin(), b->events.end());
    }
  }
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return s;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPhase: return "phase";
    case Kind::kKernel: return "kernel";
    case Kind::kTask: return "task";
  }
  return "?";
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - registry().t0).count();
}

bool begin() {
  Registry& r = registry();
  if (internal::g_on.load()) return false;
  {
    std::lock_guard<std::mutex> l(r.mu);
    for (Buffer* b : r.buffers) {
      std::lock_guard<std::mutex> bl(b->mu);
      b->events.clear();
    }
    r.t0 = Clock::now();
  }
  set_thread_name("main");  // the thread that starts the session
  internal::g_on.store(true);
  return true;
}

Session end() {
  if (!internal::g_on.exchange(false)) return Session{};
  Session s = collect(/*clear=*/true);
  set_current_kernel(nullptr);
  return s;
}

Session snapshot() { return collect(/*clear=*/false); }

void record(Event e) {
  Buffer& b = my_buffer();
  e.tid = b.tid;
  std::lock_guard<std::mutex> l(b.mu);
  b.events.push_back(std::move(e));
}

void set_thread_name(std::string name) {
  Buffer& b = my_buffer();
  std::lock_guard<std::mutex> l(b.mu);
  b.name = std::move(name);
}

void set_current_kernel(std::shared_ptr<const KernelInfo> info) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.current_mu);
  r.current = std::move(info);
}

std::shared_ptr<const KernelInfo> current_kernel() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.current_mu);
  return r.current;
}

void Scope::finish() {
  if (!active_) return;
  active_ = false;
  if (!on()) return;
  Event e{.kind = kind_, .tid = 0, .start_ns = start_, .dur_ns = now_ns() - start_,
          .name = std::move(name_), .detail = std::move(detail_), .info = std::move(info_)};
  record(std::move(e));
}

std::string to_chrome_json(const Session& s) {
  using nlohmann::json;
  json events = json::array();
  for (size_t t = 0; t < s.thread_names.size(); ++t)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", t},
                      {"args", {{"name", s.thread_names[t]}}}});
  for (const Event& e : s.events) {
    json ev = {{"name", e.info && e.kind != Kind::kPhase ? e.info->name : e.name},
               {"cat", kind_name(e.kind)},
               {"ph", "X"},
               {"pid", 1},
               {"tid", e.tid},
               {"ts", static_cast<double>(e.start_ns) / 1e3},
               {"dur", static_cast<double>(e.dur_ns) / 1e3}};
    json args = json::object();
    if (!e.detail.empty()) args["detail"] = e.detail;
    if (e.info && e.kind == Kind::kKernel) {
      const KernelInfo& k = *e.info;
      const double s_dur = std::max<double>(1.0, static_cast<double>(e.dur_ns)) * 1e-9;
      args["shapes"] = k.shapes;
      args["dtype"] = k.dtype;
      args["bytes"] = k.bytes;
      args["flops"] = k.flops;
      args["GB/s"] = static_cast<double>(k.bytes) / s_dur * 1e-9;
      args["GFLOP/s"] = k.flops / s_dur * 1e-9;
    } else if (e.info && e.kind == Kind::kTask) {
      args["kernel"] = e.info->name;
    }
    if (!args.empty()) ev["args"] = std::move(args);
    events.push_back(std::move(ev));
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
              {"otherData", {{"producer", "sloth profiler"},
                             {"wall_ms", static_cast<double>(s.wall_ns) / 1e6}}}};
  return doc.dump();
}

bool write_chrome_json(const Session& s, const std::string& path, std::string* error) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    if (error) *error = std::strerror(errno);
    return false;
  }
  f << to_chrome_json(s);
  f.close();
  if (!f) {
    if (error) *error = "write failed";
    return false;
  }
  return true;
}

namespace {
std::atomic<StartHook> g_start_hook{nullptr};
std::atomic<ExitReport> g_exit_report{nullptr};
// 0: not yet, 1: starting (the start hook's own syncs come back here and pass), 2: done.
std::atomic<int> g_env_state{0};
}  // namespace

void set_env_hooks(StartHook on_start, ExitReport on_exit) {
  g_start_hook.store(on_start);
  g_exit_report.store(on_exit);
}

void start_from_env_once() {
  if (g_env_state.load(std::memory_order_acquire) != 0) return;
  int expected = 0;
  if (!g_env_state.compare_exchange_strong(expected, 1)) return;
  if (!settings().profile.empty()) {
    if (StartHook h = g_start_hook.load()) h();
    if (begin())
      std::atexit([] {
        // Only if the program did not stop (and so write) the session itself.
        if (!on()) return;
        Session s = end();
        std::string err;
        if (!write_chrome_json(s, settings().profile, &err))
          std::fprintf(stderr, "[sloth] SLOTH_PROFILE: cannot write %s: %s\n",
                       settings().profile.c_str(), err.c_str());
        else
          std::fprintf(stderr, "[sloth] profile written to %s (%zu events)\n",
                       settings().profile.c_str(), s.events.size());
        if (ExitReport r = g_exit_report.load()) r(s);
      });
  }
  g_env_state.store(2, std::memory_order_release);
}

}  // namespace sloth::lazy::profiling
