// LibTorch spellings that ported code uses everywhere: dtype and device aliases, compound
// assignment operators, single-size factories (randn(3)), tensor({...}, kFloat). The Tensor
// members of the same kind (sum(dim), max(dim), norm, all, any, to(kCPU), grad_fn()) are in
// sloth/tensor.h; their bodies are in sloth/compat.cc.
#pragma once

#include <concepts>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "sloth/ops.h"
#include "sloth/tensor.h"

namespace sloth {

// torch::kFloat, kDouble, kLong, kInt, kByte (kUInt8 itself is in core/dtype.h).
inline constexpr DType kFloat = DType::kFloat32, kDouble = DType::kFloat64,
                       kLong = DType::kInt64, kInt = DType::kInt32, kByte = DType::kUInt8;
inline constexpr DeviceType kCPU = DeviceType::kCPU, kCUDA = DeviceType::kCUDA;

// x += y is x.add_(y) (in place: bumps the version, writes through views), and so on.
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
inline Tensor& operator+=(Tensor& a, double b) { return a.add_(b); }
inline Tensor& operator-=(Tensor& a, double b) { return a.sub_(b); }
inline Tensor& operator*=(Tensor& a, double b) { return a.mul_(b); }
inline Tensor& operator/=(Tensor& a, double b) { return a.div_(b); }

// randn(3), zeros(5, kLong): one size instead of a shape.
template <std::integral I>
Tensor randn(I n, TensorOptions o = {}) { return randn(Shape{int64_t(n)}, o); }
template <std::integral I>
Tensor rand(I n, TensorOptions o = {}) { return rand(Shape{int64_t(n)}, o); }
template <std::integral I>
Tensor zeros(I n, TensorOptions o = {}) { return zeros(Shape{int64_t(n)}, o); }
template <std::integral I>
Tensor ones(I n, TensorOptions o = {}) { return ones(Shape{int64_t(n)}, o); }
template <std::integral I>
Tensor empty(I n, TensorOptions o = {}) { return empty(Shape{int64_t(n)}, o); }

// tensor({1, 2, 3}, kFloat) / tensor({...}, TensorOptions().dtype(kDouble)): 1-D.
inline Tensor tensor(std::vector<double> values, TensorOptions o) {
  return tensor(std::move(values), Shape{-1}, o);
}
inline Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return tensor(std::vector<double>(values), Shape{-1}, o);
}

// torch::tensor(std::vector<T>) for a vector the program already holds (`tensor({...})` is
// the std::vector<double> overload in ops.h). LibTorch's dtype rule: float vectors take the
// default float type, int32 and int64 vectors become int64, uint8 stays uint8; the options'
// dtype wins when given. LibTorch rejects std::vector<bool>; here it makes a bool tensor.
template <typename T>
  requires(std::same_as<T, float> || std::same_as<T, int32_t> || std::same_as<T, int64_t> ||
           std::same_as<T, uint8_t> || std::same_as<T, bool>)
Tensor tensor(const std::vector<T>& values, TensorOptions o = {}) {
  if (!o.has_dtype_) {
    if constexpr (std::same_as<T, float>) o = o.dtype(kDefaultFloat);
    else if constexpr (std::same_as<T, int32_t>) o = o.dtype(DType::kInt64);
  }
  return from_vector(values, Shape{-1}, o);
}

// torch::ones({2, 2}, torch::requires_grad()).
inline TensorOptions requires_grad(bool on = true) { return TensorOptions().requires_grad(on); }

// torch::cuda::is_available(), device_count().
namespace cuda {
inline bool is_available() { return cuda_is_available(); }
inline int64_t device_count() { return cuda_is_available() ? 1 : 0; }
}  // namespace cuda

// ---- custom-dataset port: LibTorch names it uses ----
// max_pool2d(x, 2) / max_pool2d(x, 3, 2) take IntArrayRefs (sloth/int_list.h), one function, so
// that nn::Functional(max_pool2d, ...) can name it. torch::reshape as a free function (one
// overload, for Functional(torch::reshape, shape)); torch::optional / torch::nullopt.
inline Tensor reshape(const Tensor& x, IntArrayRef shape) { return x.reshape(shape.vec()); }
template <typename T>
using optional = std::optional<T>;
using std::nullopt;
using std::nullopt_t;

namespace autograd {
using variable_list = std::vector<Tensor>;   // LibTorch's names for a list of tensors
using tensor_list = std::vector<Tensor>;
}  // namespace autograd

}  // namespace sloth

// LibTorch's AT_ASSERT(cond) (c10's macro: outside any namespace, so the rename does not reach
// it): throws sloth::Error naming the condition. Not defined if LibTorch's is in scope.
#ifndef AT_ASSERT
#define AT_ASSERT(cond)                                                                   \
  do {                                                                                    \
    if (!(cond)) throw ::sloth::Error(std::string("AT_ASSERT failed: ") + #cond);          \
  } while (0)
#endif
