#include "backends/cpu/jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/settings.h"

extern char** environ;

namespace sloth::cpu::jit {
namespace {

// The flags the interpreter's op loops are built with (backends/cpu/BUILD), so a compiled
// kernel computes bit for bit what the interpreter computes. -ffp-contract=off: the
// interpreter stores every instruction's result, so it can never fuse a multiply of one
// instruction with an add of the next into an FMA; the compiled loop must not either.
const char* const kFlags[] = {"-std=c++20",        "-O3",    "-mavx2",  "-mfma",
                              "-fno-math-errno",   "-fno-trapping-math",
                              "-ffp-contract=off", "-fPIC",  "-shared", "-w"};

// The flags for this machine: the AVX2 baseline, plus AVX-512 code where the CPU has it
// and SLOTH_JIT_ISA does not say avx2 (the results are the same: every op is an IEEE basic
// operation or the same libm call, whatever the vector width).
const std::vector<std::string>& flags() {
  // Never destroyed (here and below): the detached compiler thread may still use them while
  // static destructors run at exit.
  static const auto& f = *new std::vector<std::string>([] {
    std::vector<std::string> f(std::begin(kFlags), std::end(kFlags));
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512 && settings().jit_isa == Isa::kAvx512)
      f.insert(f.end(), {"-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq",
                         "-mprefer-vector-width=512"});
    return f;
  }());
  return f;
}

bool log_on() { return settings().log_on("jit"); }

std::atomic<int> mode_override{-1};

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The compiler and a stamp of its identity (path, size, mtime): the disk cache is keyed by it,
// so upgrading the compiler recompiles.
struct Compiler {
  std::string path, id, error;
};
const Compiler& compiler() {
  static const auto& c = *new Compiler([] {
    Compiler c;
    std::vector<std::string> names;
    if (!settings().jit_cxx.empty()) names = {settings().jit_cxx};
    else names = {"c++", "g++", "clang++"};
    const char* path_env = std::getenv("PATH");
    std::vector<std::string> dirs =
        absl::StrSplit(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin", ':');
    for (const std::string& n : names) {
      std::vector<std::string> cands;
      if (n.find('/') != std::string::npos) cands = {n};
      else for (const std::string& d : dirs) if (!d.empty()) cands.push_back(d + "/" + n);
      for (const std::string& p : cands) {
        struct stat st;
        if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) {
          c.path = p;
          c.id = absl::StrFormat("%s:%d:%d", p, static_cast<int64_t>(st.st_size),
                                 static_cast<int64_t>(st.st_mtime));
          return c;
        }
      }
    }
    c.error = absl::StrFormat("no C++ compiler found (tried %s; set SLOTH_JIT_CXX)",
                              absl::StrJoin(names, ", "));
    return c;
  }());
  return c;
}

bool make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string p = path.substr(0, i);
    if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  // Objects in it are loaded into this process: only a directory this user owns and nobody
  // else can write qualifies (a /tmp path another user created first does not).
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && ::access(path.c_str(), W_OK) == 0;
}

const std::string& cache_dir() {
  static const auto& dir = *new std::string([] {
    std::vector<std::string> cands;
    if (!settings().jit_dir.empty()) cands.push_back(settings().jit_dir);
    if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v)
      cands.push_back(std::string(v) + "/sloth/jit");
    if (const char* v = std::getenv("HOME"); v && *v) cands.push_back(std::string(v) + "/.cache/sloth/jit");
    cands.push_back(absl::StrFormat("/tmp/sloth-jit-%d", static_cast<int>(::getuid())));
    for (const std::string& d : cands)
      if (make_dirs(d)) return d;
    return std::string();
  }());
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

// Runs the compiler; its output goes to `log`. Returns the exit status (or -1 if it did not
// start).
int run_compiler(const std::string& src, const std::string& so, const std::string& log) {
  std::vector<std::string> args = {compiler().path};
  for (const std::string& f : flags()) args.push_back(f);
  args.insert(args.end(), {"-o", so, src});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  // A compiler that hangs must not hold the queue forever: killed after kCompileTimeoutS.
  constexpr int kCompileTimeoutS = 120;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCompileTimeoutS);
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::mutex mu;  // guards stats_, loaded_
Stats stats_;
absl::flat_hash_map<uint64_t, void*>& loaded() {  // key -> dlopen handle (kept for the process)
  static auto* m = new absl::flat_hash_map<uint64_t, void*>();
  return *m;
}

absl::StatusOr<void*> symbol_in(void* handle, const std::string& symbol, const std::string& so) {
  void* f = ::dlsym(handle, symbol.c_str());
  if (f == nullptr) return absl::InternalError(absl::StrFormat("jit: %s has no symbol %s", so, symbol));
  return f;
}

absl::StatusOr<void*> load_uncounted(const std::string& source, const std::string& symbol,
                                     bool* compiled) {
  const Compiler& cc = compiler();
  if (cc.path.empty()) return absl::UnavailableError("jit: " + cc.error);
  const std::string& dir = cache_dir();
  if (dir.empty()) return absl::UnavailableError("jit: no writable cache directory (set SLOTH_JIT_DIR)");
  uint64_t key = 1469598103934665603ull;
  for (const std::string& f : flags()) key = fnv1a(key, f);
  key = fnv1a(fnv1a(key, cc.id), source);
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = loaded().find(key);
    if (it != loaded().end()) return symbol_in(it->second, symbol, "(loaded)");
  }
  const std::string base = absl::StrFormat("%s/%016x", dir, key);
  const std::string so = base + ".so", cc_file = base + ".cc";
  // A cached object is used only if the source stored next to it is this source (a hash
  // collision or a half-written cache entry then costs a compile, never a wrong kernel).
  bool have = is_file(so) && is_file(cc_file) && read_file(cc_file) == source;
  if (!have) {
    // Private names while building, renamed into place when complete: other processes
    // sharing the cache never load a partial object.
    static std::atomic<int> seq{0};
    const std::string tmp = absl::StrFormat("%s.tmp%d_%d", base, static_cast<int>(::getpid()),
                                            seq.fetch_add(1));
    if (!write_file(tmp + ".cc", source))
      return absl::UnavailableError(absl::StrFormat("jit: cannot write %s.cc", tmp));
    int rc = run_compiler(tmp + ".cc", tmp + ".so", tmp + ".log");
    if (rc != 0) {
      std::string log = read_file(tmp + ".log");
      if (log.size() > 2000) log.resize(2000);
      ::unlink((tmp + ".so").c_str());
      return absl::InternalError(absl::StrFormat(
          "jit: %s failed (%s) on %s.cc (kept, with %s.log):\n%s", cc.path,
          rc == -2 ? std::string("timed out") : absl::StrFormat("exit %d", rc), tmp, tmp, log));
    }
    ::unlink((tmp + ".log").c_str());
    if (::rename((tmp + ".cc").c_str(), cc_file.c_str()) != 0 ||
        ::rename((tmp + ".so").c_str(), so.c_str()) != 0)
      return absl::UnavailableError(absl::StrFormat("jit: cannot rename into %s", dir));
    *compiled = true;
  }
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return absl::InternalError(absl::StrFormat("jit: dlopen: %s", ::dlerror()));
  {
    std::lock_guard<std::mutex> l(mu);
    loaded().emplace(key, h);  // never closed: kernels may hold its functions
  }
  return symbol_in(h, symbol, so);
}

// The background compiler: one thread, started on first use, compiling in request order.
struct Queue {
  std::mutex m;
  std::condition_variable cv, idle;
  std::deque<std::function<void()>> jobs;
  int busy = 0;
  bool started = false;
};
Queue& queue() {
  static auto* q = new Queue();  // never destroyed: the detached worker outlives main
  return *q;
}

void compile_into(const std::shared_ptr<Slot>& slot, const std::function<std::string()>& source_fn,
                  const std::string& symbol) {
  const std::string source = source_fn();
  absl::StatusOr<void*> f = source.empty()
      ? absl::StatusOr<void*>(absl::UnimplementedError("jit: the kernel has no C++ form"))
      : load(source, symbol);
  if (f.ok()) {
    slot->fn.store(*f, std::memory_order_release);
  } else {
    slot->failed.store(true, std::memory_order_release);
    if (log_on()) std::fprintf(stderr, "[sloth jit] %s\n", std::string(f.status().message()).c_str());
  }
}

}  // namespace

Mode mode() {
  int o = mode_override.load(std::memory_order_relaxed);
  if (o >= 0) return static_cast<Mode>(o);
  switch (settings().jit) {
    case Settings::Jit::kOff: return Mode::kOff;
    case Settings::Jit::kSync: return Mode::kSync;
    case Settings::Jit::kOn: break;
  }
  return Mode::kOn;
}

void set_mode(Mode m) { mode_override.store(static_cast<int>(m), std::memory_order_relaxed); }

absl::StatusOr<void*> load(const std::string& source, const std::string& symbol) {
  auto t0 = std::chrono::steady_clock::now();
  bool compiled = false;
  absl::StatusOr<void*> r = load_uncounted(source, symbol, &compiled);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> l(mu);
  if (!r.ok()) ++stats_.failed;
  else if (compiled) ++stats_.compiled, stats_.compile_s += s;
  else ++stats_.disk_hits;
  if (log_on() && r.ok())
    std::fprintf(stderr, "[sloth jit] %s %s (%.0f ms)\n", compiled ? "compiled" : "cache hit",
                 symbol.c_str(), s * 1e3);
  return r;
}

void request(std::shared_ptr<Slot> slot, std::function<std::string()> source_fn,
             std::string symbol) {
  if (slot->requested.exchange(true)) return;
  if (mode() == Mode::kSync) {
    compile_into(slot, source_fn, symbol);
    return;
  }
  Queue& q = queue();
  std::lock_guard<std::mutex> l(q.m);
  q.jobs.push_back([slot = std::move(slot), source_fn = std::move(source_fn),
                    symbol = std::move(symbol)] { compile_into(slot, source_fn, symbol); });
  ++q.busy;
  if (!q.started) {
    q.started = true;
    std::thread([&q] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> l(q.m);
          q.cv.wait(l, [&] { return !q.jobs.empty(); });
          job = std::move(q.jobs.front());
          q.jobs.pop_front();
        }
        job();
        std::lock_guard<std::mutex> l(q.m);
        if (--q.busy == 0) q.idle.notify_all();
      }
    }).detach();
  }
  q.cv.notify_one();
}

std::shared_ptr<Slot> shared_slot(std::string_view key) {
  static std::mutex m;
  static auto* slots = new absl::flat_hash_map<std::string, std::shared_ptr<Slot>>();
  std::lock_guard<std::mutex> l(m);
  // Found by view (the common case: a wide plan's thousands of programs share a few forms);
  // the key is copied only when it is new.
  if (auto it = slots->find(absl::string_view(key.data(), key.size())); it != slots->end())
    return it->second;
  auto s = std::make_shared<Slot>();
  slots->emplace(std::string(key), s);
  return s;
}

void wait_idle() {
  Queue& q = queue();
  std::unique_lock<std::mutex> l(q.m);
  q.idle.wait(l, [&] { return q.busy == 0; });
}

std::atomic<int64_t> compiled_runs{0};
std::atomic<int64_t> direct_calls{0};
void note_compiled_run(int64_t n, int64_t direct) {
  compiled_runs.fetch_add(n, std::memory_order_relaxed);
  if (direct > 0) direct_calls.fetch_add(direct, std::memory_order_relaxed);
}

Stats stats() {
  std::lock_guard<std::mutex> l(mu);
  Stats s = stats_;
  s.compiled_runs = compiled_runs.load(std::memory_order_relaxed);
  s.direct_calls = direct_calls.load(std::memory_order_relaxed);
  return s;
}

}  // namespace sloth::cpu::jit
