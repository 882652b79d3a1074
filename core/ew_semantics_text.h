// core/ew_semantics.h as text, for code compiled at run time (the CPU's compiled tile kernels,
// every NVRTC kernel of the CUDA backend): compiling the very text the host build included is
// what keeps every backend's element semantics identical.
#pragma once

#include <string>

namespace sloth {

// OpId (the same enumerators in the same order as core/op_table.h, from core/ops.def), then
// ew_semantics.h with SLOTH_EW_EMBEDDED defined. Standalone: the host compiler and NVRTC both
// accept it as the start of a translation unit.
const std::string& ew_semantics_source();

// "OpId::k<Id>" of an op, as the embedded text spells it.
const char* ew_op_name(int op_index);

}  // namespace sloth
