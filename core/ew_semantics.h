// The scalar semantics of every elementwise op (PyTorch's), written once for every backend:
//  - the CPU tile interpreter instantiates these functions in its per-op loops
//    (backends/cpu/ew_loops.h), once per compute type and ISA;
//  - the CPU's run-time compiled kernels and every NVRTC kernel of the CUDA backend embed this
//    file's text (//core:ew_semantics_text) and call the same functions by op id, so the
//    backends cannot disagree on what an op computes.
// A new elementwise op's element function goes here and nowhere else in the backends.
//
// The text is compiled three ways: by the host compiler as part of the build, by the host
// compiler again in a run-time compiled kernel, and by NVRTC as device code. So it uses no
// library beyond the math shim below (NVRTC has no <type_traits> or <cstring>): own traits,
// and math through sloth::ew::m, which maps to <cmath> on the host and to CUDA's math
// functions and intrinsics on the device. Keeping the functions branch-light and
// template-only lets the host compiler vectorize each op's loop.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define SLOTH_EW_DEVICE 1
#define SLOTH_EW_FN __device__ __forceinline__
#else
#define SLOTH_EW_FN inline
#include <cmath>
#include <cstring>
#endif

// An embedded copy gets OpId declared before this text (//core:ew_semantics_text).
#ifndef SLOTH_EW_EMBEDDED
#include "core/op_table.h"
#endif

// The CPU's op loops are compiled once per ISA (backends/cpu/ew_avx512.cc); the inline
// namespace keeps each compilation's instantiations distinct, so the linker never merges an
// AVX-512 copy into the baseline path.
#ifndef SLOTH_EW_ISA
#define SLOTH_EW_ISA base
#endif

namespace sloth::ew {
inline namespace SLOTH_EW_ISA {

// ---- traits (the few the functions need; no <type_traits> under NVRTC) ------------------------
template <typename A, typename B> struct SameT { static constexpr bool value = false; };
template <typename A> struct SameT<A, A> { static constexpr bool value = true; };
template <typename A, typename B> inline constexpr bool kSame = SameT<A, B>::value;
template <typename T> inline constexpr bool kFloat = kSame<T, float> || kSame<T, double>;
template <typename T> inline constexpr bool kBool = kSame<T, bool>;
template <bool c, typename A, typename B> struct PickT { using type = A; };
template <typename A, typename B> struct PickT<false, A, B> { using type = B; };
template <bool c, typename A, typename B> using Pick = typename PickT<c, A, B>::type;
template <typename T> struct UnsignedT;
template <> struct UnsignedT<unsigned char> { using type = unsigned char; };
template <> struct UnsignedT<int> { using type = unsigned int; };
template <> struct UnsignedT<long> { using type = unsigned long; };
template <> struct UnsignedT<long long> { using type = unsigned long long; };
template <typename T> using Unsigned = typename UnsignedT<T>::type;

// ---- math shim: float and double overloads of what the ops call ------------------------------
namespace m {
#ifdef SLOTH_EW_DEVICE
#define SLOTH_EW_MATH1(name, f32, f64)                          \
  SLOTH_EW_FN float name(float x) { return ::f32(x); }         \
  SLOTH_EW_FN double name(double x) { return ::f64(x); }
#define SLOTH_EW_MATH2(name, f32, f64)                                    \
  SLOTH_EW_FN float name(float x, float y) { return ::f32(x, y); }       \
  SLOTH_EW_FN double name(double x, double y) { return ::f64(x, y); }
SLOTH_EW_FN float fma(float x, float y, float z) { return ::fmaf(x, y, z); }
SLOTH_EW_FN double fma(double x, double y, double z) { return ::fma(x, y, z); }
SLOTH_EW_FN float float_from_bits(int b) { return __int_as_float(b); }
#else
#define SLOTH_EW_MATH1(name, f32, f64)                          \
  SLOTH_EW_FN float name(float x) { return std::name(x); }     \
  SLOTH_EW_FN double name(double x) { return std::name(x); }
#define SLOTH_EW_MATH2(name, f32, f64)                                    \
  SLOTH_EW_FN float name(float x, float y) { return std::name(x, y); }   \
  SLOTH_EW_FN double name(double x, double y) { return std::name(x, y); }
SLOTH_EW_FN float fma(float x, float y, float z) { return std::fma(x, y, z); }
SLOTH_EW_FN double fma(double x, double y, double z) { return std::fma(x, y, z); }
SLOTH_EW_FN float float_from_bits(int b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
#endif
SLOTH_EW_MATH1(fabs, fabsf, fabs)
SLOTH_EW_MATH1(exp, expf, exp)
SLOTH_EW_MATH1(log, logf, log)
SLOTH_EW_MATH1(log1p, log1pf, log1p)
SLOTH_EW_MATH1(sqrt, sqrtf, sqrt)
SLOTH_EW_MATH1(sin, sinf, sin)
SLOTH_EW_MATH1(cos, cosf, cos)
SLOTH_EW_MATH1(tanh, tanhf, tanh)
SLOTH_EW_MATH1(erf, erff, erf)
SLOTH_EW_MATH1(floor, floorf, floor)
SLOTH_EW_MATH1(ceil, ceilf, ceil)
SLOTH_EW_MATH1(trunc, truncf, trunc)
// Round half to even: nearbyint in the default rounding mode (rint on the device: the same
// result, CUDA has no rounding modes to honour).
SLOTH_EW_MATH1(nearbyint, rintf, rint)
SLOTH_EW_MATH2(pow, powf, pow)
SLOTH_EW_MATH2(fmod, fmodf, fmod)
SLOTH_EW_MATH2(copysign, copysignf, copysign)
#undef SLOTH_EW_MATH1
#undef SLOTH_EW_MATH2
}  // namespace m

template <typename T> SLOTH_EW_FN bool isnan_(T x) {
  if constexpr (kFloat<T>) return x != x;
  else return false;
}
// NaN-propagating max/min (torch.maximum / amax semantics).
template <typename T> SLOTH_EW_FN T max_(T a, T b) {
  if constexpr (kFloat<T>) return (a != a || a > b) ? a : b;  // NaN b falls through to b
  else return a > b ? a : b;
}
template <typename T> SLOTH_EW_FN T min_(T a, T b) {
  if constexpr (kFloat<T>) return (a != a || a < b) ? a : b;
  else return a < b ? a : b;
}

template <typename T> SLOTH_EW_FN T ipow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  // In unsigned arithmetic: overflow wraps (as PyTorch's integer pow does) instead of being
  // undefined, and the base is not squared past the last bit.
  using U = Unsigned<T>;
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
template <typename T> inline constexpr bool kWrapInt = !kFloat<T> && !kBool<T>;
template <typename T> SLOTH_EW_FN T wrap_add(T a, T b) {
  using U = Unsigned<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T> SLOTH_EW_FN T wrap_sub(T a, T b) {
  using U = Unsigned<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T> SLOTH_EW_FN T wrap_mul(T a, T b) {
  using U = Unsigned<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// exp for float32 that the host compiler vectorizes (libm's expf is a call per element:
// softmax spent its time there). exp(x) = 2^n e^r with n = round(x / ln 2) and r reduced in two
// steps (Cody-Waite); e^r from Cephes' degree-6 polynomial, ~1 ulp. 2^n is applied as two
// factors so results that underflow to denormals stay right; out-of-range inputs are clamped
// first so the integer conversion is defined, and NaN is passed through.
SLOTH_EW_FN float vexpf(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  xc = x != x ? 0.0f : xc;
  const float n = m::nearbyint(xc * 1.44269504088896341f);
  // Explicit FMAs (the CPU backend is built with -ffp-contract=off, so nothing is contracted
  // behind our back and the interpreter and run-time compiled kernels agree bit for bit).
  const float r = m::fma(n, 2.12194440e-4f, m::fma(n, -0.693359375f, xc));
  float p = 1.9875691500e-4f;
  p = m::fma(p, r, 1.3981999507e-3f);
  p = m::fma(p, r, 8.3334519073e-3f);
  p = m::fma(p, r, 4.1665795894e-2f);
  p = m::fma(p, r, 1.6666665459e-1f);
  p = m::fma(p, r, 5.0000001201e-1f);
  p = m::fma(p * r, r, r) + 1.0f;
  const int ni = static_cast<int>(n);
  const int n1 = ni >> 1, n2 = ni - n1;
  const float s1 = m::float_from_bits((n1 + 127) << 23), s2 = m::float_from_bits((n2 + 127) << 23);
  const float y = p * s1 * s2;
  return x != x ? x : y;
}

// erf for float32 that the host compiler vectorizes (libm's erff is a call per element: GELU
// spent 7% of a transformer step there). Both branches of N. Juffa's erff approximation are
// computed and one is selected, so the loop has no branch: |x| <= 0.9277 uses an odd
// polynomial x + x p(x^2); above it erf = 1 - exp(q(|x|)) with vexpf. Max error 1.02 ulp
// against double erf over every float (tests/erf_test.cc); |x| is clamped at 10 (erf = 1
// there) so the polynomial stays finite; NaN passes through the small branch.
SLOTH_EW_FN float verff(float x) {
  float t = m::fabs(x);
  t = t > 10.0f ? 10.0f : t;
  const float s = x * x, ts = t * t;
  float r = m::fma(-1.72853470e-5f, t, 3.83197126e-4f);
  const float u = m::fma(-3.88396438e-3f, t, 2.42546219e-2f);
  r = m::fma(r, ts, u);
  r = m::fma(r, t, -1.06777877e-1f);
  r = m::fma(r, t, -6.34846687e-1f);
  r = m::fma(r, t, -1.28717512e-1f);
  r = m::fma(r, t, -t);
  r = 1.0f - vexpf(r);
  r = x < 0.0f ? -r : r;
  float q = -5.96761703e-4f;
  q = m::fma(q, s, 4.99119423e-3f);
  q = m::fma(q, s, -2.67681349e-2f);
  q = m::fma(q, s, 1.12819925e-1f);
  q = m::fma(q, s, -3.76125336e-1f);
  q = m::fma(q, s, 1.28379166e-1f);
  q = m::fma(q, x, x);
  return t > 0.927734375f ? r : q;
}

// Conversion between compute types (core/dtype.h's convert_to, for generated kernels): a
// floating value becomes uint8 through int64, so integral values wrap mod 256 as PyTorch's
// int64 -> uint8 (numbers reach kernels as doubles) instead of being undefined.
template <typename D, typename S> SLOTH_EW_FN D cvt(S x) {
  if constexpr (kSame<D, unsigned char> && kFloat<S>) return static_cast<D>(static_cast<long long>(x));
  else return static_cast<D>(x);
}

// Float-only functions on an integer compute type never come from the shape rules (they
// promote to float); computing through double keeps those instantiations well-defined.
template <OpId op, typename T> SLOTH_EW_FN T unary(T x) {
  using F = Pick<kFloat<T>, T, double>;
  F f = static_cast<F>(x);
  if constexpr (op == OpId::kNeg) {
    if constexpr (kWrapInt<T>) return wrap_sub(T(0), x);
    else return static_cast<T>(-x);
  }
  else if constexpr (op == OpId::kAbs) {
    if constexpr (kBool<T>) return x;
    else if constexpr (kFloat<T>) return m::fabs(x);
    else return x < 0 ? static_cast<T>(-x) : x;
  }
  else if constexpr (op == OpId::kExp) {
    if constexpr (kSame<F, float>) return static_cast<T>(vexpf(f));
    else return static_cast<T>(m::exp(f));
  }
  else if constexpr (op == OpId::kLog) return static_cast<T>(m::log(f));
  else if constexpr (op == OpId::kLog1p) return static_cast<T>(m::log1p(f));
  else if constexpr (op == OpId::kSqrt) return static_cast<T>(m::sqrt(f));
  else if constexpr (op == OpId::kRsqrt) return static_cast<T>(F(1) / m::sqrt(f));
  else if constexpr (op == OpId::kSin) return static_cast<T>(m::sin(f));
  else if constexpr (op == OpId::kCos) return static_cast<T>(m::cos(f));
  else if constexpr (op == OpId::kTanh) return static_cast<T>(m::tanh(f));
  else if constexpr (op == OpId::kSigmoid) return static_cast<T>(F(1) / (F(1) + m::exp(-f)));
  else if constexpr (op == OpId::kRelu) {
    if constexpr (kBool<T>) return x;
    else if constexpr (kFloat<T>) return (x != x || x > 0) ? x : T(0);  // relu(NaN) = NaN
    else return x > 0 ? x : T(0);
  }
  else if constexpr (op == OpId::kGelu)
  {
    if constexpr (kSame<F, float>) return static_cast<T>(0.5f * f * (1.0f + verff(f * 0.70710678118654752440f)));
    else return static_cast<T>(F(0.5) * f * (F(1) + m::erf(f * F(0.70710678118654752440))));
  }
  else if constexpr (op == OpId::kSilu) return static_cast<T>(f / (F(1) + m::exp(-f)));
  else if constexpr (op == OpId::kErf) {
    if constexpr (kSame<F, float>) return static_cast<T>(verff(f));
    else return static_cast<T>(m::erf(f));
  }
  else if constexpr (op == OpId::kSquare) return static_cast<T>(x * x);
  else if constexpr (op == OpId::kReciprocal) return static_cast<T>(F(1) / f);
  else if constexpr (op == OpId::kSign) {
    if constexpr (kBool<T>) return x;
    else if constexpr (kFloat<T>) return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
    else return static_cast<T>((T(0) < x) - (x < T(0)));
  }
  else if constexpr (op == OpId::kFloor) {
    if constexpr (kFloat<T>) return m::floor(x); else return x;
  }
  else if constexpr (op == OpId::kCeil) {
    if constexpr (kFloat<T>) return m::ceil(x); else return x;
  }
  else if constexpr (op == OpId::kRound) {
    if constexpr (kFloat<T>) return m::nearbyint(x); else return x;  // half to even
  }
  else if constexpr (op == OpId::kTrunc) {
    if constexpr (kFloat<T>) return m::trunc(x); else return x;
  }
  else if constexpr (op == OpId::kLogicalNot) return static_cast<T>(!x);
  else return x;  // Cast: the conversion already happened on load
}

template <OpId op, typename T> SLOTH_EW_FN T binary(T a, T b) {
  if constexpr (op == OpId::kAdd) {
    if constexpr (kBool<T>) return a || b;
    else if constexpr (kWrapInt<T>) return wrap_add(a, b);
    else return static_cast<T>(a + b);
  }
  else if constexpr (op == OpId::kSub) {
    if constexpr (kWrapInt<T>) return wrap_sub(a, b);
    else return static_cast<T>(a - b);
  }
  else if constexpr (op == OpId::kMul) {
    if constexpr (kBool<T>) return a && b;
    else if constexpr (kWrapInt<T>) return wrap_mul(a, b);
    else return static_cast<T>(a * b);
  }
  else if constexpr (op == OpId::kDiv) {
    if constexpr (kFloat<T>) return a / b;
    else return static_cast<T>(static_cast<double>(a) / static_cast<double>(b));
  }
  else if constexpr (op == OpId::kPow) {
    if constexpr (kFloat<T>) return m::pow(a, b);
    else if constexpr (kBool<T>) return a || !b;
    else return ipow<T>(a, b);
  }
  else if constexpr (op == OpId::kMaximum) return max_<T>(a, b);
  else if constexpr (op == OpId::kMinimum) return min_<T>(a, b);
  else if constexpr (op == OpId::kRemainder || op == OpId::kFmod) {
    // Integers: b == 0 gives 0 (no trap), and b == -1 is 0 (INT_MIN % -1 traps on x86).
    T r;
    if constexpr (kFloat<T>) r = m::fmod(a, b);
    else if constexpr (kBool<T>) return a;  // the rule rejects bool
    else r = (b == 0 || (T(-1) < T(0) && b == T(-1))) ? T(0) : static_cast<T>(a % b);
    if constexpr (op == OpId::kRemainder) {
      if (r != 0 && ((b < T(0)) != (r < T(0)))) r = static_cast<T>(r + b);
    }
    return r;
  }
  else if constexpr (op == OpId::kFloorDivide) {
    if constexpr (kFloat<T>) {
      // PyTorch's div_floor_floating: floor of the exact quotient (a - fmod(a, b)) / b, so
      // 5.0 // 0.1 is 49 (not 50 from floor(5.0 / 0.1)); b == 0 divides (inf or nan).
      if (b == T(0)) return a / b;
      const T mod = m::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return m::copysign(T(0), a / b);
      T f = m::floor(div);
      if (div - f > T(0.5)) f += T(1);
      return f;
    } else if constexpr (kBool<T>) {
      return a;  // the rule rejects bool
    } else {
      if (b == 0) return T(0);
      if (T(-1) < T(0) && b == T(-1)) return wrap_sub(T(0), a);  // INT_MIN / -1 wraps
      T q = static_cast<T>(a / b);
      if ((a % b != 0) && ((a < T(0)) != (b < T(0)))) q = static_cast<T>(q - 1);
      return q;
    }
  }
  else if constexpr (op == OpId::kLogicalAnd) return static_cast<T>(a && b);
  else if constexpr (op == OpId::kLogicalOr) return static_cast<T>(a || b);
  else return a;
}

// Binary ops whose table row says `.compare = true`: a bool result, compared in T.
template <OpId op, typename T> SLOTH_EW_FN bool compare(T a, T b) {
  if constexpr (op == OpId::kEq) return a == b;
  else if constexpr (op == OpId::kNe) return a != b;
  else if constexpr (op == OpId::kLt) return a < b;
  else if constexpr (op == OpId::kLe) return a <= b;
  else if constexpr (op == OpId::kGt) return a > b;
  else return a >= b;
}

// Ternary ops; operand 0 is C (where's condition is bool, clamp's input is T).
template <OpId op, typename T, typename C> SLOTH_EW_FN T ternary(C a, T b, T c) {
  if constexpr (op == OpId::kWhere) return a ? b : c;
  else return min_<T>(max_<T>(a, b), c);  // Clamp
}

}  // inline namespace SLOTH_EW_ISA
}  // namespace sloth::ew
