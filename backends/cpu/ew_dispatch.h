// Picks the tile interpreter's per-op loops (ew_loops.h) for this machine's ISA, and the
// conversion loops between dtypes.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/op_table.h"

namespace sloth::cpu::ew {

// How a step's operands are passed: kVec = every operand is a tile; kVS = binary op whose
// second operand is a scalar (b points at one value); kSV = the first operand is the scalar.
enum class Mode : int { kVec = 0, kVS = 1, kSV = 2 };
using OpFn = void (*)(void* out, const void* a, const void* b, const void* c, int64_t n);

// The loop of `op` computing in `t` whose operand 0 is read as `operand0`; nullptr when the
// op has no loop in that mode.
OpFn op_fn(OpId op, DType t, Mode mode, DType operand0);

using ConvFn = void (*)(void* out, const void* in, int64_t n);
ConvFn conv_for(DType from, DType to);

}  // namespace sloth::cpu::ew
