// Why: machines of this project set OPENBLAS_CORETYPE=Haswell in the environment, so a
// DYNAMIC_ARCH OpenBLAS runs its AVX2 kernels (~105 GFLOP/s per thread for sgemm) on CPUs whose
// AVX-512 kernels reach ~195. LibTorch users get the same slow choice; we re-select. Without
// the variable, OpenBLAS's detection may not know the CPU model (virtual machines report a
// generic one) and fall back on Prescott's SSE3 kernels: on an AVX-512 CPU we then name
// SkylakeX.
//
// How (OpenBLAS's driver/others/dynamic.c, 0.3.x): gotoblas_dynamic_init() returns at once if a
// core is set; else it reads OPENBLAS_CORETYPE (force_coretype) or detects the CPU
// (get_coretype, falling back on the CPU's AVX-512/AVX2 support), then runs the chosen table's
// init (its blocking sizes). gotoblas_dynamic_quit() only clears the pointer. Every BLAS call
// reads the table through that pointer, and the work buffers are sized for the largest core,
// so quit + init with the variable unset re-selects safely as long as no BLAS call runs in
// between: we do it once, under std::call_once, before sloth's first GEMM (other sloth GEMMs
// wait on the once-flag). A program that calls BLAS from its own threads at that moment, or
// reads OPENBLAS_CORETYPE concurrently, should set SLOTH_BLAS_CORE=env.
#include "backends/cpu/blas_core.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <strings.h>

#include "core/settings.h"

// Weak: with another BLAS (or a static OpenBLAS without DYNAMIC_ARCH) these are null and
// nothing changes.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
}

namespace sloth::cpu {
namespace {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool is_avx512_core(const char* name) {
  return strcasecmp(name, "SkylakeX") == 0 || strcasecmp(name, "Cooperlake") == 0 ||
         strcasecmp(name, "SapphireRapids") == 0;
}

// Re-initialises OpenBLAS's core table with OPENBLAS_CORETYPE set to `type` (unset when
// null) and returns the core it chose. The variable is put back as `restore` (unset when null).
std::string reinit_core(const char* type, const char* restore) {
  if (type != nullptr) setenv("OPENBLAS_CORETYPE", type, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (restore != nullptr) setenv("OPENBLAS_CORETYPE", restore, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  return openblas_get_corename();
}

void select_core() {
  if (settings().blas_core != Settings::BlasCore::kAuto) return;
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !openblas_get_corename) return;
  if (!cpu_has_avx512()) return;  // OpenBLAS's own choice stands
  const std::string before = openblas_get_corename();
  if (is_avx512_core(before.c_str())) return;
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = forced != nullptr ? forced : "";
  const char* restore = forced != nullptr ? saved.c_str() : nullptr;
  // The environment forced a narrower core: OpenBLAS's own detection first.
  std::string after = forced != nullptr ? reinit_core(nullptr, restore) : before;
  // Its detection does not know this CPU model and fell back on an older core (a virtual
  // machine's generic "Intel Xeon Processor" got Prescott's SSE3 kernels: a training step
  // of 16 x 32-64-64-1 spent 40% of its time in them, 2x its time with SkylakeX's): the
  // CPU has AVX-512, so name the AVX-512 core.
  if (!is_avx512_core(after.c_str())) after = reinit_core("SkylakeX", restore);
  if (!is_avx512_core(after.c_str())) (void)reinit_core(restore, restore);  // keep the first choice
  if (settings().log_on("blas"))
    std::fprintf(stderr, "sloth: BLAS core %s (OPENBLAS_CORETYPE=%s; OpenBLAS chose %s)\n",
                 openblas_get_corename(), forced != nullptr ? saved.c_str() : "(unset)",
                 before.c_str());
}

}  // namespace

void ensure_blas_core() {
  static std::once_flag once;
  std::call_once(once, select_core);
}

// OpenBLAS's thread count (weak: absent with another BLAS, then nothing changes).
extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
}

// sloth's pool owns the threads: OpenBLAS runs single-threaded and large GEMMs are split
// across the pool (matmul.cc's gemm), batches of small ones go one per task (run_matmul,
// conv.cc). OpenBLAS's own workers spin and yield between calls, taking the cores from the
// pool's threads: on the CNN training step at 2 threads that was ~10% of the time in the
// scheduler.
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads) openblas_set_num_threads(1);
  });
}

const char* blas_core_name() { return openblas_get_corename ? openblas_get_corename() : ""; }

}  // namespace sloth::cpu
