// Numbers as operands: a sloth::Scalar becomes a 0-dim "wrapped number" tensor whose dtype
// is the kind the caller wrote, so promotion sees 2 and 2.0 differently (PyTorch's rule).
#include "lazy/tensor_impl.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth {

Tensor wrap_scalar(const Scalar& v) {
  // The node itself is always a float64 Scalar leaf (lazy::TensorImpl::wrapped_scalar), so a
  // number that changes from step to step never changes the graph; only the handle's dtype,
  // which promotion reads, carries the kind.
  Ref<lazy::TensorImpl> t = lazy::TensorImpl::wrapped_scalar(v.to<double>());
  t->dtype = v.type();
  return Tensor(std::move(t));
}

void check_fits(const char* op, const Scalar& v, DType d) {
  if (!v.fits(d))
    fail("%s: value %s cannot be converted to %s without overflow; use a wider dtype (kInt64, "
         "kFloat64) or a value in range",
         op, v.to_string(), dtype_name(d));
}

Tensor exact_operand(const Scalar& v, DType d, Device device) {
  if (v.exact_in_double()) return wrap_scalar(v);
  return full({}, v, TensorOptions().dtype(d).device(device));
}

namespace internal {

Tensor scaled_by_alpha(const Tensor& a, const Tensor& b, const Scalar& alpha, const char* op) {
  if (alpha_is_one(a, b, alpha, op)) return b;
  return call_op(OpId::kMul, {b, wrap_scalar(alpha)});
}

bool alpha_is_one(const Tensor& a, const Tensor& b, const Scalar& alpha, const char* op) {
  // Only a floating or bool alpha has anything to check (the default alpha, 1, does not ask
  // the tensors' dtypes: `acc = acc + s` runs this per op).
  if ((alpha.is_floating() || alpha.is_boolean()) && a.defined() && b.defined()) {
    const bool floating = is_floating(a.dtype()) || is_floating(b.dtype());
    const bool boolean = a.dtype() == DType::kBool && b.dtype() == DType::kBool;
    if (alpha.is_floating() && !floating)
      fail("%s: for integral input tensors (%s, %s), alpha must not be a floating point number "
           "(got %s); pass an integer alpha or convert a tensor with .to(kFloat32)",
           op, dtype_name(a.dtype()), dtype_name(b.dtype()), alpha.to_string());
    if (alpha.is_boolean() && !boolean)
      fail("%s: a bool alpha (%s) is only supported for bool tensors, got %s and %s; pass a "
           "number",
           op, alpha.to_string(), dtype_name(a.dtype()), dtype_name(b.dtype()));
  }
  return !alpha.is_boolean() && alpha.to<double>() == 1;
}

}  // namespace internal
}  // namespace sloth
