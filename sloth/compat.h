// LibTorch spellings that ported code uses everywhere: dtype and device aliases, compound
// assignment operators, single-size factories (randn(3)), tensor({...}, kFloat). The Tensor
// members of the same kind (sum(dim), max(dim), norm, all, any, to(kCPU), grad_fn()) are in
// sloth/tensor.h; their bodies are in sloth/compat.cc.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
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

// torch::kUInt8 / kByte where bytes enter (images are bytes). sloth has no 8-bit dtype yet:
// from_blob(p, shape, kUInt8) copies the bytes into an int32 tensor (values 0..255 exactly),
// so .to(kFloat), arithmetic, comparisons and cat give PyTorch's values. Unlike LibTorch's
// from_blob this copies (writes through the tensor do not reach p; p may be freed at once).
// Where a uint8 tensor would be produced (x.to(kByte), zeros(n, kByte)), kUInt8 is not a
// DType, so such code does not compile instead of silently computing in another type.
struct ByteDType {};
inline constexpr ByteDType kUInt8{}, kByte{};
Tensor from_blob(const void* data, Shape shape, ByteDType);

// torch::cuda::is_available(), device_count().
namespace cuda {
inline bool is_available() { return cuda_is_available(); }
inline int64_t device_count() { return cuda_is_available() ? 1 : 0; }
}  // namespace cuda

// max_pool2d(x, 2): one size for both sides (LibTorch's ExpandingArray<2>).
template <std::integral I>
Tensor max_pool2d(const Tensor& x, I kernel_size) {
  return max_pool2d(x, Shape{int64_t(kernel_size), int64_t(kernel_size)});
}
template <std::integral I, std::integral J>
Tensor max_pool2d(const Tensor& x, I kernel_size, J stride) {
  return max_pool2d(x, Shape{int64_t(kernel_size), int64_t(kernel_size)},
                    Shape{int64_t(stride), int64_t(stride)});
}

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
