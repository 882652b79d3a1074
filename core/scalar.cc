#include "core/scalar.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sloth {

bool Scalar::fits(DType d) const {
  switch (d) {
    case DType::kBool:
    case DType::kFloat64: return true;
    case DType::kFloat32: {
      if (kind_ != Kind::kFloat || !std::isfinite(v_.d)) return true;
      return std::fabs(v_.d) <= static_cast<double>(std::numeric_limits<float>::max());
    }
    case DType::kUInt8:
      if (kind_ == Kind::kBool) return true;
      // c10's overflows<uint8_t>: an integer may be negative down to -255 (-1 fills 255), a
      // floating value must lie in [0, 255] (-0.5 and 255.5 are errors, NaN too).
      if (kind_ == Kind::kInt) return v_.i >= -255 && v_.i <= 255;
      return v_.d >= 0.0 && v_.d <= 255.0;
    case DType::kInt32:
    case DType::kInt64: {
      const bool i32 = d == DType::kInt32;
      const int64_t lo = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
      const int64_t hi = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
      if (kind_ == Kind::kBool) return true;
      if (kind_ == Kind::kInt) return v_.i >= lo && v_.i <= hi;
      // Truncation toward zero must land in [lo, hi]: v in (lo - 1, hi + 1). Both bounds are
      // powers of two, so exact in double; for int64, lo - 1 rounds to lo, itself in range.
      if (!std::isfinite(v_.d)) return false;
      const double dlo = static_cast<double>(lo), dhi = -dlo;
      return (i32 ? v_.d > dlo - 1 : v_.d >= dlo) && v_.d < dhi;
    }
  }
  return true;
}

Scalar Scalar::converted_to(DType d) const {
  switch (d) {
    case DType::kBool: return Scalar(to<bool>());
    case DType::kInt32: return Scalar(static_cast<int64_t>(to<int32_t>()));
    case DType::kInt64: return Scalar(to<int64_t>());
    case DType::kUInt8: return Scalar(static_cast<int64_t>(to<uint8_t>()));
    case DType::kFloat32: return Scalar(static_cast<double>(to<float>()));
    case DType::kFloat64: break;
  }
  return Scalar(to<double>());
}

std::string Scalar::to_string() const {
  switch (kind_) {
    case Kind::kBool: return v_.b ? "true" : "false";
    case Kind::kInt: return absl::StrCat(v_.i);
    case Kind::kFloat: break;
  }
  return absl::StrFormat("%g", v_.d);
}

}  // namespace sloth
