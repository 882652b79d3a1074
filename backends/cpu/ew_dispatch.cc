#include "backends/cpu/ew_dispatch.h"

#include "core/settings.h"

#include <cstdlib>
#include <cstring>

#define SLOTH_EW_TABLE op_table_base
#include "backends/cpu/ew_loops.h"

namespace sloth::cpu::ew {

OpFn op_fn_avx512(OpId op, DType t, Mode mode, DType operand0);  // ew_avx512.cc

namespace {

// Op loops per ISA: the baseline (AVX2) table compiled here, the AVX-512 one in
// ew_avx512.cc. AVX-512 is opt-in (SLOTH_EW_ISA=avx512, when the CPU has it): measured
// slower than AVX2 on the machines this was tuned on (tests/fusion_bandwidth).
bool use_avx512() {
  static const bool v = [] {
    if (settings().ew_isa != Isa::kAvx512) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return v;
}

template <typename S, typename D>
void conv_fn(void* o, const void* i, int64_t n) {
  D* out = static_cast<D*>(o);
  const S* in = static_cast<const S*>(i);
  for (int64_t j = 0; j < n; ++j) out[j] = convert_to<D>(in[j]);
}

}  // namespace

OpFn op_fn(OpId op, DType t, Mode mode, DType operand0) {
  return use_avx512() ? op_fn_avx512(op, t, mode, operand0)
                      : op_table_base(op, t, mode, operand0);
}

ConvFn conv_for(DType from, DType to) {
  return visit_dtype(from, [&](auto s) {
    return visit_dtype(to, [&](auto d) -> ConvFn { return &conv_fn<decltype(s), decltype(d)>; });
  });
}

}  // namespace sloth::cpu::ew
