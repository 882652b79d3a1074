// The per-op loops of the tile interpreter, instantiated once per ISA: ew_dispatch.cc builds
// them for the baseline (AVX2) and ew_avx512.cc for AVX-512; op_fn() picks a table at run
// time. Which loop an op gets follows from its row of core/ops.def (category, `.compare`), and
// the element function from core/ew_semantics.h, so a new elementwise op needs no edit here.
// Include after defining SLOTH_EW_ISA (a namespace name) and SLOTH_EW_TABLE (the name of the
// table function this file defines).
#pragma once

#include <cstdint>

#include "backends/cpu/ew_dispatch.h"
#include "core/dtype.h"
#include "core/ew_semantics.h"
#include "core/op_table.h"

namespace sloth::cpu::ew {

inline namespace SLOTH_EW_ISA {

template <OpId op, typename T>
void unary_fn(void* o, const void* a, const void*, const void*, int64_t n) {
  T* __restrict out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  for (int64_t i = 0; i < n; ++i) out[i] = sloth::ew::unary<op, T>(x[i]);
}

// Binary ops are a load or two and one instruction per vector: unrolled, each iteration
// keeps several loads in flight, and the loop's speed no longer depends on where the linker
// happened to place it (rolled, the same machine code ran at very different speeds from one
// build to the next).
#define SLOTH_EW_UNROLL _Pragma("GCC unroll 4")

// A binary op's element: binary<op> or, for the table's compares, compare<op> (bool result).
template <OpId op, typename T> using BinaryResult = sloth::ew::Pick<op_facts(op).compare, bool, T>;
template <OpId op, typename T> inline BinaryResult<op, T> binary_elem(T a, T b) {
  if constexpr (op_facts(op).compare) return sloth::ew::compare<op, T>(a, b);
  else return sloth::ew::binary<op, T>(a, b);
}
template <OpId op, typename T>
void binary_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  BinaryResult<op, T>* out = static_cast<BinaryResult<op, T>*>(o);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  SLOTH_EW_UNROLL
  for (int64_t i = 0; i < n; ++i) out[i] = binary_elem<op, T>(x[i], y[i]);
}
template <OpId op, typename T>
void binary_vs_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  BinaryResult<op, T>* out = static_cast<BinaryResult<op, T>*>(o);
  const T* x = static_cast<const T*>(a);
  const T s = *static_cast<const T*>(b);
  SLOTH_EW_UNROLL
  for (int64_t i = 0; i < n; ++i) out[i] = binary_elem<op, T>(x[i], s);
}
template <OpId op, typename T>
void binary_sv_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  BinaryResult<op, T>* out = static_cast<BinaryResult<op, T>*>(o);
  const T s = *static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  SLOTH_EW_UNROLL
  for (int64_t i = 0; i < n; ++i) out[i] = binary_elem<op, T>(s, y[i]);
}
// C: operand 0's type (bool for where's condition, T for clamp's input).
template <OpId op, typename T, typename C>
void ternary_fn(void* o, const void* a, const void* b, const void* c, int64_t n) {
  T* out = static_cast<T*>(o);
  const C* x = static_cast<const C*>(a);
  const T *y = static_cast<const T*>(b), *z = static_cast<const T*>(c);
  for (int64_t i = 0; i < n; ++i) out[i] = sloth::ew::ternary<op, T>(x[i], y[i], z[i]);
}

// The loop of `op` in compute type T; nullptr for ops that are not elementwise and for modes
// an op has no loop for (scalar-operand forms exist for binary ops only).
template <OpId op, typename T>
OpFn loop_for(Mode mode, bool bool_operand0) {
  constexpr OpCategory cat = op_category(op);
  if constexpr (cat == OpCategory::Unary) {
    return mode == Mode::kVec ? &unary_fn<op, T> : nullptr;
  } else if constexpr (cat == OpCategory::Binary) {
    switch (mode) {
      case Mode::kVec: return &binary_fn<op, T>;
      case Mode::kVS: return &binary_vs_fn<op, T>;
      case Mode::kSV: return &binary_sv_fn<op, T>;
    }
    return nullptr;
  } else if constexpr (cat == OpCategory::Ternary) {
    if (mode != Mode::kVec) return nullptr;
    return bool_operand0 ? &ternary_fn<op, T, bool> : &ternary_fn<op, T, T>;
  } else {
    return nullptr;
  }
}

// `operand0` is the dtype operand 0 is read in (it differs from t for where's condition).
inline OpFn SLOTH_EW_TABLE(OpId op, DType t, Mode mode, DType operand0) {
  return visit_dtype(t, [&](auto z) -> OpFn {
    using T = decltype(z);
    const bool b0 = operand0 == DType::kBool;
    switch (op) {
#define OP(Id, ...) case OpId::k##Id: return loop_for<OpId::k##Id, T>(mode, b0);
#include "core/ops.def"
#undef OP
    }
    return nullptr;
  });
}

}  // inline namespace SLOTH_EW_ISA
}  // namespace sloth::cpu::ew
