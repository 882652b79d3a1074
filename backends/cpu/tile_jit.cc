// The tile program's hand-off to the run-time compiler (jit.h): when a program is hot its
// lazy form is printed as one C++ loop (ew_codegen.h) and compiled in the background; runs
// use the compiled loop once it is ready.
#include "backends/cpu/ew_codegen.h"
#include "backends/cpu/tile_program.h"

namespace sloth::cpu {

// A program is compiled when it is hot: run again after its first run (it sits in a loop)
// with enough work per run to amortize a compile; SLOTH_JIT=sync compiles every program on
// first use.
constexpr int64_t kJitMinRuns = 2;
constexpr int64_t kJitMinWork = int64_t{1} << 18;  // elements x computing steps

// The compiled form of the program once it is ready (nullptr: interpret).
TileProgram::TileFn TileProgram::jit_fn(int64_t n) const {
  if (!jit_ || compute_steps_ == 0) return nullptr;
  void* f = jit_->fn.load(std::memory_order_acquire);
  if (f != nullptr) return jit::mode() == jit::Mode::kOff ? nullptr : reinterpret_cast<TileFn>(f);
  const jit::Mode mode = jit::mode();
  if (mode == jit::Mode::kOff) return nullptr;
  // Too little work per run to ever be compiled here (n is fixed per program): no count kept,
  // so a replayed step's tiny programs do no locked increment per run. make_hot() and other
  // programs of the same form may still have the form compiled (checked above).
  if (mode != jit::Mode::kSync && n * compute_steps_ < kJitMinWork) return nullptr;
  if (!jit_->requested.load(std::memory_order_relaxed)) {
    const int64_t runs = runs_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (mode == jit::Mode::kSync || runs >= kJitMinRuns) {
      request_jit();
      f = jit_->fn.load(std::memory_order_acquire);
    }
  }
  return reinterpret_cast<TileFn>(f);
}

// A replayed step runs its small programs thousands of times: the compiled loop (one pass,
// values in registers) beats the interpreter's pass per instruction even at a few hundred
// elements. Tiny programs (a bias of one element) are left interpreted.
void TileProgram::make_hot() const {
  constexpr int64_t kHotMinWork = 256;  // elements x computing steps
  if (!jit_ || compute_steps_ == 0 || jit::mode() == jit::Mode::kOff) return;
  if (n_ * compute_steps_ < kHotMinWork) return;
  if (jit_->fn.load(std::memory_order_acquire) == nullptr &&
      !jit_->requested.load(std::memory_order_relaxed))
    request_jit();
}

// The form is shared with the request (it is immutable), so the program may be destroyed
// while its compile waits in the queue.
void TileProgram::request_jit() const {
  jit::request(jit_, [form = form_] { return jit::tile_kernel_source(*form, "sloth_ew_tile"); },
               "sloth_ew_tile");
}

}  // namespace sloth::cpu
