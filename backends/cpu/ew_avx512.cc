// The tile interpreter's op loops compiled for AVX-512 (this file's library adds the ISA
// flags); ew_dispatch.cc uses this table when asked to and the CPU supports it.
#define SLOTH_EW_ISA avx512
#define SLOTH_EW_TABLE op_table_avx512
#include "backends/cpu/ew_loops.h"

namespace sloth::cpu::ew {
OpFn op_fn_avx512(OpId op, DType t, Mode mode, DType operand0) {
  return op_table_avx512(op, t, mode, operand0);
}
}  // namespace sloth::cpu::ew
