// The per-op loops of the tile interpreter, instantiated once per ISA: elementwise.cc builds
// them for the baseline (AVX2) and ew_avx512.cc for AVX-512; op_fn() in elementwise.cc picks
// a table at run time. Include after defining SLOTH_EW_ISA (a namespace name) and
// SLOTH_EW_TABLE (the name of the table function this file defines).
#pragma once

#include <cstdint>

#include "backends/cpu/ew_ops.h"
#include "core/dtype.h"

namespace sloth::cpu::ew {

// How a step's operands are passed: kVec = every operand is a tile; kVS = binary op whose
// second operand is a scalar (b points at one value); kSV = the first operand is the scalar.
enum class Mode : int { kVec = 0, kVS = 1, kSV = 2 };
using OpFn = void (*)(void* out, const void* a, const void* b, const void* c, int64_t n);

inline namespace SLOTH_EW_ISA {

template <OpId op, typename T>
void unary_fn(void* o, const void* a, const void*, const void*, int64_t n) {
  T* __restrict out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  for (int64_t i = 0; i < n; ++i) out[i] = unary<op, T>(x[i]);
}
template <OpId op, typename T>
void binary_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = binary<op, T>(x[i], y[i]);
}
template <OpId op, typename T>
void binary_vs_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  const T s = *static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = binary<op, T>(x[i], s);
}
template <OpId op, typename T>
void binary_sv_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T s = *static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = binary<op, T>(s, y[i]);
}
template <OpId op, typename T>
void compare_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  bool* out = static_cast<bool*>(o);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = compare<op, T>(x[i], y[i]);
}
template <OpId op, typename T>
void compare_vs_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  bool* out = static_cast<bool*>(o);
  const T* x = static_cast<const T*>(a);
  const T s = *static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = compare<op, T>(x[i], s);
}
template <typename T>
void where_fn(void* o, const void* c, const void* a, const void* b, int64_t n) {
  T* out = static_cast<T*>(o);
  const bool* cond = static_cast<const bool*>(c);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = cond[i] ? x[i] : y[i];
}
template <typename T>
void clamp_fn(void* o, const void* a, const void* b, const void* c, int64_t n) {
  T* out = static_cast<T*>(o);
  const T *x = static_cast<const T*>(a), *lo = static_cast<const T*>(b),
          *hi = static_cast<const T*>(c);
  for (int64_t i = 0; i < n; ++i) out[i] = min_<T>(max_<T>(x[i], lo[i]), hi[i]);
}

inline OpFn SLOTH_EW_TABLE(OpId op, DType t, Mode mode) {
  return visit_dtype(t, [&](auto z) -> OpFn {
    using T = decltype(z);
    if (mode == Mode::kVS) {
      switch (op) {
#define B(X) case OpId::k##X: return &binary_vs_fn<OpId::k##X, T>;
        B(Add) B(Sub) B(Mul) B(Div) B(Maximum) B(Minimum)
#undef B
#define C(X) case OpId::k##X: return &compare_vs_fn<OpId::k##X, T>;
        C(Eq) C(Ne) C(Lt) C(Le) C(Gt) C(Ge)
#undef C
        default: return nullptr;
      }
    }
    if (mode == Mode::kSV) {
      switch (op) {
#define B(X) case OpId::k##X: return &binary_sv_fn<OpId::k##X, T>;
        B(Add) B(Sub) B(Mul) B(Div) B(Maximum) B(Minimum)
#undef B
        default: return nullptr;
      }
    }
    switch (op) {
#define U(X) case OpId::k##X: return &unary_fn<OpId::k##X, T>;
      U(Neg) U(Abs) U(Exp) U(Log) U(Log1p) U(Sqrt) U(Rsqrt) U(Sin) U(Cos) U(Tanh) U(Sigmoid)
      U(Relu) U(Gelu) U(Silu) U(Erf) U(Square) U(Reciprocal) U(Sign) U(Floor) U(Ceil)
      U(Round) U(LogicalNot) U(Cast)
#undef U
#define B(X) case OpId::k##X: return &binary_fn<OpId::k##X, T>;
      B(Add) B(Sub) B(Mul) B(Div) B(Pow) B(Maximum) B(Minimum) B(LogicalAnd) B(LogicalOr)
#undef B
#define C(X) case OpId::k##X: return &compare_fn<OpId::k##X, T>;
      C(Eq) C(Ne) C(Lt) C(Le) C(Gt) C(Ge)
#undef C
      case OpId::kWhere: return &where_fn<T>;
      case OpId::kClamp: return &clamp_fn<T>;
      default: return nullptr;
    }
  });
}

}  // inline namespace SLOTH_EW_ISA
}  // namespace sloth::cpu::ew
