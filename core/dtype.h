// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <type_traits>

namespace sloth {

// kUInt8 comes last so the values of the older five (hashed into plan caches, exchanged
// between ranks) did not change; promotion uses dtype_rank, not the enum's order.
enum class DType : uint8_t { kBool, kInt32, kInt64, kFloat32, kFloat64, kUInt8 };
inline constexpr DType kBool = DType::kBool, kInt32 = DType::kInt32, kInt64 = DType::kInt64,
                       kFloat32 = DType::kFloat32, kFloat64 = DType::kFloat64,
                       kUInt8 = DType::kUInt8;
inline constexpr int kNumDTypes = 6;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBool: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kUInt8: return 1;
  }
  return 0;
}
const char* dtype_name(DType t);
// Prints LibTorch's ScalarType names ("Float", "Long", "Byte", ...), so `std::cout << t.dtype()`
// ported from LibTorch compiles and prints what it printed there.
std::ostream& operator<<(std::ostream& os, DType t);
constexpr bool is_floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
constexpr bool is_integral(DType t) {
  return t == DType::kUInt8 || t == DType::kInt32 || t == DType::kInt64;
}

// torch.promote_types order of sloth's dtypes: bool < uint8 < int32 < int64 < float32 <
// float64 (with no int8/int16 in the set, the larger rank always holds the smaller).
constexpr int dtype_rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 2;
    case DType::kInt64: return 3;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 5;
  }
  return 0;
}

// Category order used by promotion: bool < integer < floating.
constexpr int dtype_category(DType t) { return t == DType::kBool ? 0 : is_integral(t) ? 1 : 2; }

// The smallest type that holds both (torch.promote_types).
DType promote_types(DType a, DType b);

// The default floating type (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::kFloat32;

// Maps a C++ element type to its DType.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };

// One element converted to another dtype's C++ type. A floating value becomes uint8 through
// int64, so integral values wrap mod 256 as PyTorch's int64 -> uint8 does (a number written
// as -1 or 300 reaches the kernels as a double), instead of an undefined double -> uint8
// conversion. core/ew_semantics.h's cvt() is the same rule for generated kernels.
template <typename D, typename S>
constexpr D convert_to(S v) {
  if constexpr (sizeof(D) == 1 && !std::is_same_v<D, bool> && std::is_floating_point_v<S>)
    return static_cast<D>(static_cast<int64_t>(v));
  else
    return static_cast<D>(v);
}

// Calls f(T{}) with T the C++ type of `t`: one switch per kernel call, never per element.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kBool: return f(bool{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kFloat64: break;
  }
  return f(double{});
}

}  // namespace sloth
