// The scalar semantics of every elementwise op (PyTorch's), as inline functions the tile
// loops in elementwise.cc instantiate per compute type. Keeping them branch-light and
// template-only lets the compiler vectorize each instruction's loop.
#pragma once

#include <cmath>
#include <cstring>
#include <cstdint>
#include <type_traits>

// A run-time compiled kernel (jit.h) gets this header's text with OpId declared before it.
#ifndef SLOTH_JIT_TU
#include "core/op_table.h"
#endif

// The ISA-specific op loops (ew_loops.h) are compiled once per ISA; the inline namespace
// keeps each compilation's instantiations distinct so the linker never merges an AVX-512
// copy into the baseline path.
#ifndef SLOTH_EW_ISA
#define SLOTH_EW_ISA base
#endif
namespace sloth::cpu::ew {
inline namespace SLOTH_EW_ISA {

template <typename T> inline constexpr bool kFloat = std::is_floating_point_v<T>;

template <typename T> inline bool isnan_(T x) {
  if constexpr (kFloat<T>) return x != x;
  else return false;
}
// NaN-propagating max/min (torch.maximum / amax semantics).
template <typename T> inline T max_(T a, T b) {
  if constexpr (kFloat<T>) return (a != a || a > b) ? a : b;  // NaN b falls through to b
  else return a > b ? a : b;
}
template <typename T> inline T min_(T a, T b) {
  if constexpr (kFloat<T>) return (a != a || a < b) ? a : b;
  else return a < b ? a : b;
}

template <typename T> inline T ipow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  // In unsigned arithmetic: overflow wraps (as PyTorch's integer pow does) instead of being
  // undefined, and the base is not squared past the last bit.
  using U = std::make_unsigned_t<T>;
  U r = 1, b = static_cast<U>(base);
  while (exp) {
    if (exp & 1) r = static_cast<U>(r * b);
    exp >>= 1;
    if (exp) b = static_cast<U>(b * b);
  }
  return static_cast<T>(r);
}

// Integer add/sub/mul/neg wrap on overflow (two's complement, as in PyTorch) without undefined
// behaviour: computed in the unsigned type of the same width.
template <typename T> inline constexpr bool kWrapInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T> inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T> inline T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T> inline T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// exp for float32 that the compiler vectorizes (libm's expf is a call per element: softmax
// spent its time there). exp(x) = 2^n e^r with n = round(x / ln 2) and r reduced in two steps
// (Cody-Waite); e^r from Cephes' degree-6 polynomial, ~1 ulp. 2^n is applied as two factors so
// results that underflow to denormals stay right; out-of-range inputs are clamped first so the
// integer conversion is defined, and NaN is passed through.
inline float vexpf(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  xc = x != x ? 0.0f : xc;
  const float n = std::nearbyint(xc * 1.44269504088896341f);
  // Explicit FMAs (the backend is built with -ffp-contract=off, so nothing is contracted
  // behind our back and the interpreter and run-time compiled kernels agree bit for bit).
  const float r = std::fma(n, 2.12194440e-4f, std::fma(n, -0.693359375f, xc));
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r) + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1, s2;
  const int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const float y = p * s1 * s2;
  return x != x ? x : y;
}

// Float-only functions on an integer compute type never come from the shape rules (they
// promote to float); computing through double keeps those instantiations well-defined.
template <OpId op, typename T> inline T unary(T x) {
  using F = std::conditional_t<kFloat<T>, T, double>;
  F f = static_cast<F>(x);
  if constexpr (op == OpId::kNeg) {
    if constexpr (kWrapInt<T>) return wrap_sub(T(0), x);
    else return static_cast<T>(-x);
  }
  else if constexpr (op == OpId::kAbs) {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kFloat<T>) return std::fabs(x);
    else return x < 0 ? static_cast<T>(-x) : x;
  }
  else if constexpr (op == OpId::kExp) {
    if constexpr (std::is_same_v<F, float>) return static_cast<T>(vexpf(f));
    else return static_cast<T>(std::exp(f));
  }
  else if constexpr (op == OpId::kLog) return static_cast<T>(std::log(f));
  else if constexpr (op == OpId::kLog1p) return static_cast<T>(std::log1p(f));
  else if constexpr (op == OpId::kSqrt) return static_cast<T>(std::sqrt(f));
  else if constexpr (op == OpId::kRsqrt) return static_cast<T>(F(1) / std::sqrt(f));
  else if constexpr (op == OpId::kSin) return static_cast<T>(std::sin(f));
  else if constexpr (op == OpId::kCos) return static_cast<T>(std::cos(f));
  else if constexpr (op == OpId::kTanh) return static_cast<T>(std::tanh(f));
  else if constexpr (op == OpId::kSigmoid) return static_cast<T>(F(1) / (F(1) + std::exp(-f)));
  else if constexpr (op == OpId::kRelu) {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kFloat<T>) return (x != x || x > 0) ? x : T(0);  // relu(NaN) = NaN
    else return x > 0 ? x : T(0);
  }
  else if constexpr (op == OpId::kGelu)
    return static_cast<T>(F(0.5) * f * (F(1) + std::erf(f * F(0.70710678118654752440))));
  else if constexpr (op == OpId::kSilu) return static_cast<T>(f / (F(1) + std::exp(-f)));
  else if constexpr (op == OpId::kErf) return static_cast<T>(std::erf(f));
  else if constexpr (op == OpId::kSquare) return static_cast<T>(x * x);
  else if constexpr (op == OpId::kReciprocal) return static_cast<T>(F(1) / f);
  else if constexpr (op == OpId::kSign) {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kFloat<T>) return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
    else return static_cast<T>((T(0) < x) - (x < T(0)));
  }
  else if constexpr (op == OpId::kFloor) {
    if constexpr (kFloat<T>) return std::floor(x); else return x;
  }
  else if constexpr (op == OpId::kCeil) {
    if constexpr (kFloat<T>) return std::ceil(x); else return x;
  }
  else if constexpr (op == OpId::kRound) {
    if constexpr (kFloat<T>) return std::nearbyint(x); else return x;  // half to even
  }
  else if constexpr (op == OpId::kLogicalNot) return static_cast<T>(!x);
  else return x;  // Cast: the conversion already happened on load
}

template <OpId op, typename T> inline T binary(T a, T b) {
  if constexpr (op == OpId::kAdd) {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else if constexpr (kWrapInt<T>) return wrap_add(a, b);
    else return static_cast<T>(a + b);
  }
  else if constexpr (op == OpId::kSub) {
    if constexpr (kWrapInt<T>) return wrap_sub(a, b);
    else return static_cast<T>(a - b);
  }
  else if constexpr (op == OpId::kMul) {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else if constexpr (kWrapInt<T>) return wrap_mul(a, b);
    else return static_cast<T>(a * b);
  }
  else if constexpr (op == OpId::kDiv) {
    if constexpr (kFloat<T>) return a / b;
    else return static_cast<T>(static_cast<double>(a) / static_cast<double>(b));
  }
  else if constexpr (op == OpId::kPow) {
    if constexpr (kFloat<T>) return std::pow(a, b);
    else if constexpr (std::is_same_v<T, bool>) return a || !b;
    else return ipow<T>(a, b);
  }
  else if constexpr (op == OpId::kMaximum) return max_<T>(a, b);
  else if constexpr (op == OpId::kMinimum) return min_<T>(a, b);
  else if constexpr (op == OpId::kLogicalAnd) return static_cast<T>(a && b);
  else if constexpr (op == OpId::kLogicalOr) return static_cast<T>(a || b);
  else return a;
}

template <OpId op, typename T> inline bool compare(T a, T b) {
  if constexpr (op == OpId::kEq) return a == b;
  else if constexpr (op == OpId::kNe) return a != b;
  else if constexpr (op == OpId::kLt) return a < b;
  else if constexpr (op == OpId::kLe) return a <= b;
  else if constexpr (op == OpId::kGt) return a > b;
  else return a >= b;
}

}  // inline namespace SLOTH_EW_ISA
}  // namespace sloth::cpu::ew
