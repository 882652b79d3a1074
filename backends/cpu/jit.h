// Run-time compilation of hot fused kernels to machine code. The tile interpreter runs a fused
// kernel as one loop per instruction over L1 tiles; for long chains those passes, not memory,
// become the limit. A hot kernel's whole program is printed as one C++ loop (ew_codegen.h),
// compiled by the host's C++ compiler into a shared object, cached on disk by a hash of the
// source and the compiler, and loaded with dlopen. The interpreter stays the fallback: until
// the code is ready, when no compiler is found, or when compilation fails.
//
// Its settings (core/settings.h, README.md): SLOTH_JIT (off | on | sync), SLOTH_JIT_CXX,
// SLOTH_JIT_DIR, SLOTH_JIT_ISA, and SLOTH_LOG=jit to print each compile, cache hit and failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sloth::cpu::jit {

enum class Mode : uint8_t { kOff, kOn, kSync };
Mode mode();
// For tests: overrides SLOTH_JIT for the rest of the process.
void set_mode(Mode m);

// Loads `symbol` from the shared object built from `source`: from the disk cache when an
// identical source was compiled before by the same compiler, else by running the compiler.
// Errors say what failed (no compiler, the compiler's first error lines, dlopen's message).
absl::StatusOr<void*> load(const std::string& source, const std::string& symbol);

// A compiled function a kernel may switch to once it is ready; shared with the background
// compiler so a kernel can be destroyed while its compile is still queued.
struct Slot {
  std::atomic<void*> fn{nullptr};
  std::atomic<bool> requested{false};
  std::atomic<bool> failed{false};
};
// Compiles on the background thread (kOn) or right here (kSync); either way `slot->fn` is set
// when the code is ready. `source_fn` runs on the compiling thread, so printing the source
// costs the caller nothing.
void request(std::shared_ptr<Slot> slot, std::function<std::string()> source_fn,
             std::string symbol);
// The slot shared by every kernel whose source is determined by `key` (a program's form,
// which holds no sizes): programs of one form share one compile, so an executable made for
// new sizes (lazy/plan_instance.h) runs compiled code from its first run.
// Looked up by view: a caller may build its key in a reused buffer.
std::shared_ptr<Slot> shared_slot(std::string_view key);
// Blocks until every queued compile has finished (tests and benchmarks that want the
// compiled path measured, not the warm-up).
void wait_idle();

struct Stats {
  int64_t compiled = 0;     // shared objects built by the compiler
  int64_t disk_hits = 0;    // loaded from the disk cache without compiling
  int64_t failed = 0;       // compiles or loads that failed (the kernel keeps interpreting)
  double compile_s = 0;     // wall time spent in the compiler
  int64_t compiled_runs = 0;  // kernel runs that used compiled code
  int64_t direct_calls = 0;   // ... called by a frozen run without the program (compiled_call.h)
};
void note_compiled_run(int64_t n = 1, int64_t direct = 0);
Stats stats();

}  // namespace sloth::cpu::jit
