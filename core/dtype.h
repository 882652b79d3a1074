// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sloth {

enum class DType : uint8_t { kBool, kInt32, kInt64, kFloat32, kFloat64 };
inline constexpr DType kBool = DType::kBool, kInt32 = DType::kInt32, kInt64 = DType::kInt64,
                       kFloat32 = DType::kFloat32, kFloat64 = DType::kFloat64;
inline constexpr int kNumDTypes = 5;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBool: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
  }
  return 0;
}
const char* dtype_name(DType t);
constexpr bool is_floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
constexpr bool is_integral(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// Category order used by promotion: bool < integer < floating.
constexpr int dtype_category(DType t) { return t == DType::kBool ? 0 : is_integral(t) ? 1 : 2; }

// The smallest type that holds both (torch.promote_types).
DType promote_types(DType a, DType b);

// The default floating type (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::kFloat32;

// Maps a C++ element type to its DType.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };

// Calls f(T{}) with T the C++ type of `t`: one switch per kernel call, never per element.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kBool: return f(bool{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: break;
  }
  return f(double{});
}

}  // namespace sloth
