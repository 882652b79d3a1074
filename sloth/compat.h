// LibTorch spellings that ported code uses everywhere: dtype and device aliases, compound
// assignment operators, single-size factories (randn(3)), tensor({...}, kFloat). The Tensor
// members of the same kind (sum(dim), max(dim), norm, all, any, to(kCPU), grad_fn()) are in
// sloth/tensor.h; their bodies are in sloth/compat.cc.
#pragma once

#include <concepts>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "sloth/ops.h"
#include "sloth/tensor.h"

namespace sloth {

// torch::kFloat, kDouble, kLong, kInt (there is no 8-bit dtype yet: kByte/kUInt8 are missing).
inline constexpr DType kFloat = DType::kFloat32, kDouble = DType::kFloat64,
                       kLong = DType::kInt64, kInt = DType::kInt32;
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

// torch::ones({2, 2}, torch::requires_grad()).
inline TensorOptions requires_grad(bool on = true) { return TensorOptions().requires_grad(on); }

namespace autograd {
using variable_list = std::vector<Tensor>;   // LibTorch's names for a list of tensors
using tensor_list = std::vector<Tensor>;
}  // namespace autograd

}  // namespace sloth
