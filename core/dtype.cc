#include "core/dtype.h"

#include <ostream>

namespace sloth {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kUInt8: return "uint8";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) {
  switch (t) {
    case DType::kBool: return os << "Bool";
    case DType::kInt32: return os << "Int";
    case DType::kInt64: return os << "Long";
    case DType::kFloat32: return os << "Float";
    case DType::kFloat64: return os << "Double";
    case DType::kUInt8: return os << "Byte";
  }
  return os << "?";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // Within and across categories the larger rank holds the smaller one, which is exactly
  // torch.promote_types for these six types (uint8 + int32 -> int32, bool + uint8 -> uint8).
  return dtype_rank(a) > dtype_rank(b) ? a : b;
}

}  // namespace sloth
