// Prints a fused elementwise tile program as one C++ loop for the run-time compiler (jit.h).
// The loop computes exactly what the tile interpreter's steps compute: the same ew_ops.h
// functions, the same compute types and conversions, one element at a time in registers.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/dtype.h"
#include "core/op_table.h"

namespace sloth::cpu::jit {

// A value of the program. p[v] (the kernel's pointer argument, indexed by value) points at:
//   kMemory  a tile of n elements to read (an operand the interpreter loaded);
//   kConst   one element, the same for the whole tile (a bound scalar);
//   kLocal   nothing: the value lives in a register; if `store`, p[v] is where its n
//            elements are written (an output, or a reduction's input).
struct TileValue {
  enum class Role : uint8_t { kLocal, kMemory, kConst };
  DType dtype;
  Role role;
  bool store = false;
};
// One computing step: a conversion of in[0] to vals[out].dtype, or op over in[] computed in
// `compute` (the interpreter's compute type).
struct TileStep {
  bool convert = false;
  OpId op{};
  DType compute = DType::kFloat32;
  int out = -1;
  int in[3] = {-1, -1, -1};
};

// A translation unit defining extern "C" void <symbol>(void* const* p, int64_t n).
// Empty if a step has no C++ form (then the kernel keeps interpreting).
std::string tile_kernel_source(std::span<const TileValue> vals, std::span<const TileStep> steps,
                               const std::string& symbol);

}  // namespace sloth::cpu::jit
