// sloth::Scalar: a number as the user wrote it (LibTorch's c10::Scalar). The kind matters,
// not only the value: arange(6) is int64 but arange(6.0) float32, full({2}, true) is bool, and
// an int64 tensor times 2 stays int64 while times 2.0 becomes float32. Integers are held as
// int64_t, so a value above 2^53 stays exact until a consumer chooses to go through double.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace sloth {

class Scalar {
 public:
  enum class Kind : uint8_t { kBool, kInt, kFloat };

  Scalar() : Scalar(int64_t{0}) {}
  // Implicit on purpose: every API taking a Scalar accepts a plain C++ number, and each C++
  // type has an exact-match constructor, so `x * 2`, `x / v.size()` and `x * 0.5f` are never
  // ambiguous.
  Scalar(bool v) : kind_(Kind::kBool) { v_.b = v; }
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(int64_t v) : kind_(Kind::kInt) { v_.i = v; }
  Scalar(double v) : kind_(Kind::kFloat) { v_.d = v; }
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  // The remaining integer types (unsigned, size_t, short, long long where int64_t is long).
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                 !std::is_same_v<T, int> && !std::is_same_v<T, int64_t>,
                             int> = 0>
  Scalar(T v) : kind_(Kind::kInt) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (v > static_cast<T>(std::numeric_limits<int64_t>::max()))
        fail("Scalar: %d is larger than the largest int64; pass it as a double", v);
    }
    v_.i = static_cast<int64_t>(v);
  }
  template <typename T, std::enable_if_t<std::is_same_v<T, long double>, int> = 0>
  Scalar(T v) : Scalar(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  bool is_boolean() const { return kind_ == Kind::kBool; }
  // As c10::Scalar::isIntegral: bool counts only when asked to.
  bool is_integral(bool include_bool = false) const {
    return kind_ == Kind::kInt || (include_bool && kind_ == Kind::kBool);
  }
  bool is_floating() const { return kind_ == Kind::kFloat; }

  // The dtype a lone number of this kind has (c10::Scalar::type()): bool, int64 or float64.
  // Promotion then treats a floating number as the default float (see core/op_rules.cc).
  DType type() const {
    return kind_ == Kind::kBool ? DType::kBool : kind_ == Kind::kInt ? DType::kInt64 : DType::kFloat64;
  }

  // The value as T: a plain C++ conversion (a double to an integer truncates toward zero, as
  // PyTorch's fill_ on an int64 tensor). Use fits() first where overflow must be an error.
  template <typename T>
  T to() const {
    static_assert(std::is_arithmetic_v<T>, "Scalar::to<T>: T must be a C++ number type");
    switch (kind_) {
      case Kind::kBool: return static_cast<T>(v_.b);
      case Kind::kInt: return static_cast<T>(v_.i);
      case Kind::kFloat: break;
    }
    return static_cast<T>(v_.d);
  }

  // Whether converting to `d` is exact enough for PyTorch not to call it an overflow
  // (c10::checked_convert): integers must be in range (NaN and inf never are), float32 takes
  // any value of float32's range plus inf and NaN, float64 and bool take anything.
  bool fits(DType d) const;
  // True when the value goes through a double unchanged: every bool and float, and integers
  // up to 2^53 in magnitude. Lazy scalar operands travel as doubles (lazy::Node::scalar), so
  // callers that must be exact above that take another path (factories.cc).
  bool exact_in_double() const {
    constexpr int64_t k = int64_t{1} << 53;
    return kind_ != Kind::kInt || (v_.i >= -k && v_.i <= k);
  }

  // The value as `d`'s C++ type would hold it, as a Scalar of that kind: what fill_ and
  // masked_fill store (2.5 into int64 is 2, into bool true). Check fits(d) first.
  Scalar converted_to(DType d) const;

  // "3", "2.5", "true": for error messages.
  std::string to_string() const;

 private:
  Kind kind_;
  union {
    bool b;
    int64_t i;
    double d;
  } v_;
};

}  // namespace sloth
