// A frozen run's direct call of an elementwise program's compiled loop (frozen_run.h): the
// pointer array the loop reads (ew_codegen.cc) filled from the run's slot pointers and
// scalars, without the program's own run (which reads its binding, registers and steps: for
// a step of ~30 small kernels, most of the cost of running one).
//
// Programs it takes (TileProgram::compiled_call): no fused reduction, one thread's worth of
// elements, outputs stored through the cache, and every operand either read in place (same
// dtype, contiguous along the loop) or broadcast so that one tile of it serves every tile (a
// scalar tensor such as a learning rate held as data, or a bias repeating along rows with a
// period dividing the tile). Those are filled once per run into the call's own buffers, and
// the loop runs tile by tile; without them it runs over all elements in one call.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/tile_io.h"

namespace sloth::cpu {

struct CompiledCall {
  static constexpr int kMaxValues = 64;  // the program's values (the pointer array's length)
  CompiledFn fn = nullptr;               // null until the program's form is compiled
  int64_t n = 0;                         // elements
  int64_t tile = 0;                      // elements per call when some operand is filled
  struct Mem {  // p[val] = the slot's data, `es` bytes per element: an operand or an output
    int32_t val, slot;
    int64_t es;
  };
  struct Scalar {  // p[val] points to the scalar slot's value as `dtype`
    int32_t val, slot;
    DType dtype;
  };
  struct Fill {  // p[val] = a buffer of `tile` elements loaded from the slot's data
    int32_t val, slot;
    tile::LoadFn load;
    tile::LoadArgs args;  // base set per run; shape and strides point into the binding
    int64_t period;       // > 0: the elements repeat with this period (loaded once, copied)
    int64_t es;           // bytes per element in the buffer
    // period 0: one element broadcast (a learning rate held as data). The buffer is filled
    // again only when that element's bytes change (src_es of them, as last read).
    int64_t src_es = 0;
    bool filled = false;
    uint64_t last_bits = 0;
  };
  std::vector<Mem> mem;
  std::vector<Scalar> scalars;
  std::vector<Fill> fills;
  std::vector<double> fill_buf;  // fills.size() x tile elements of up to 8 bytes

  // Runs the loop over `slot_ptr`'s data, reading scalars from `env`.
  void run(Env& env, char* const* slot_ptr);
};

}  // namespace sloth::cpu
