// Prints a fused elementwise kernel's lazy form (lazy/ew_form.h) as one C++ loop over a tile
// for the run-time compiler (jit.h). The loop computes exactly what the tile interpreter's
// steps compute: the same core/ew_semantics.h functions (its text is embedded), the same
// compute types and conversions, one element at a time in registers.
#pragma once

#include <string>

#include "lazy/ew_form.h"

namespace sloth::cpu::jit {

// A translation unit defining extern "C" void <symbol>(void* const* p, int64_t n), where
// p[v] (indexed by value of the form) points at:
//   a loaded value   a tile of n elements to read (the interpreter loads operands);
//   a scalar value   one element, the same for the whole tile;
//   a stored value   where its n elements are written (an output, or the reduction's input);
//   anything else    nothing: the value lives in a machine register.
// Empty if a step has no C++ form (then the kernel keeps interpreting).
std::string tile_kernel_source(const lazy::EwForm& form, const std::string& symbol);

// Everything of `form` that tile_kernel_source reads (not its shape, slots or operands'
// numbering): forms with equal keys print the same source, so they share one compile
// (jit::shared_slot) whatever their sizes.
std::string tile_kernel_key(const lazy::EwForm& form);
// The same, written into `*out` (its capacity reused: a wide plan builds thousands of keys).
void tile_kernel_key(const lazy::EwForm& form, std::string* out);

}  // namespace sloth::cpu::jit
