// LibTorch conveniences declared in sloth/tensor.h, written with the public ops.
#include <cmath>

#include "sloth/compat.h"
#include "sloth/ops.h"
#include "sloth/tensor.h"

namespace sloth {

std::tuple<Tensor, Tensor> Tensor::max_dim(int64_t dim, bool keepdim) const {
  Tensor idx = sloth::argmax(*this, dim, keepdim);   // checks dim first (names it in the error)
  return {sloth::amax(*this, Shape{dim}, keepdim), idx};
}

std::tuple<Tensor, Tensor> Tensor::min_dim(int64_t dim, bool keepdim) const {
  Tensor idx = sloth::argmin(*this, dim, keepdim);
  return {sloth::amin(*this, Shape{dim}, keepdim), idx};
}

Tensor Tensor::norm(double p) const {
  if (!(p > 0)) fail("norm: p must be positive (got %g); use p = 2 for the Euclidean norm", p);
  Tensor x = is_floating(dtype()) ? *this : to(kDefaultFloat);
  if (p == 2) return x.mul(x).sum().sqrt();
  if (p == 1) return x.abs().sum();
  return sloth::pow(sloth::pow(x.abs(), Scalar(p)).sum(), Scalar(1.0 / p));
}

Tensor Tensor::norm(double p, int64_t dim, bool keepdim) const {
  if (!(p > 0)) fail("norm: p must be positive (got %g); use p = 2 for the Euclidean norm", p);
  Tensor x = is_floating(dtype()) ? *this : to(kDefaultFloat);
  if (p == 2) return x.mul(x).sum(Shape{dim}, keepdim).sqrt();
  return sloth::pow(sloth::pow(x.abs(), Scalar(p)).sum(Shape{dim}, keepdim), Scalar(1.0 / p));
}

Tensor Tensor::all() const { return (*this == 0.0).to(DType::kInt64).sum() == 0.0; }
Tensor Tensor::any() const { return (*this != 0.0).to(DType::kInt64).sum() > 0.0; }

std::shared_ptr<const Tensor::GradFnInfo> Tensor::grad_fn() const {
  std::string n = grad_fn_name();
  if (n.empty()) return nullptr;
  return std::make_shared<const GradFnInfo>(GradFnInfo{std::move(n)});
}

// ---- Tensor methods with a number operand (x.div(255)) ----
namespace {
// other * alpha as one number of the kind PyTorch's promotion would see (int stays int).
Scalar times_alpha(const Scalar& o, const Scalar& alpha) {
  if (!alpha.is_boolean() && alpha.to<double>() == 1) return o;
  if (o.is_integral() && alpha.is_integral()) return Scalar(o.to<int64_t>() * alpha.to<int64_t>());
  return Scalar(o.to<double>() * alpha.to<double>());
}
}  // namespace
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return *this + times_alpha(o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return *this - times_alpha(o, alpha); }
Tensor Tensor::mul(const Scalar& o) const { return *this * o; }
Tensor Tensor::div(const Scalar& o) const { return *this / o; }

}  // namespace sloth
