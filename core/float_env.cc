#include "core/float_env.h"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sloth {
namespace {

// The setting and its generation: a thread applies the setting when its generation differs
// from the one it last applied (0: never set, the hardware default stands).
std::atomic<bool> g_on{false};
std::atomic<uint32_t> g_generation{0};
thread_local uint32_t t_applied = 0;

constexpr bool kSupported =
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    true;
#else
    false;
#endif

void apply(bool on) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned kFtzDaz = 0x8040;  // MXCSR: flush to zero (bit 15), denormals are zero (6)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kFtzDaz) : (csr & ~kFtzDaz));
#elif defined(__aarch64__)
  uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  constexpr uint64_t kFz = uint64_t{1} << 24;
  fpcr = on ? (fpcr | kFz) : (fpcr & ~kFz);
  asm volatile("msr fpcr, %0" : : "r"(fpcr));
#else
  (void)on;
#endif
}

}  // namespace

bool set_flush_denormal(bool on) {
  if (!kSupported) return false;
  g_on.store(on, std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_release);
  internal::sync_float_env();  // the calling thread at once, like PyTorch
  return true;
}

bool flush_denormal() { return g_on.load(std::memory_order_relaxed); }

namespace internal {
void sync_float_env() {
  const uint32_t gen = g_generation.load(std::memory_order_acquire);
  if (gen == t_applied) return;
  apply(g_on.load(std::memory_order_relaxed));
  t_applied = gen;
}
}  // namespace internal

}  // namespace sloth
