#include "core/dtype.h"

namespace sloth {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "?";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // The enum is ordered so that within and across categories the larger value holds the
  // smaller one, which is exactly torch.promote_types for these five types.
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

}  // namespace sloth
