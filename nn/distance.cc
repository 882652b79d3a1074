#include "nn/distance.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/shape.h"

namespace sloth {
namespace {

// x with its value clamped below at lo, but the gradient of x itself: PyTorch 1.13 clamps the
// squared norms in place under NoGradGuard, so the clamp is invisible to autograd.
Tensor clamp_min_passing_grad(const Tensor& x, double lo) {
  return x + (sloth::clamp(x, lo, std::numeric_limits<double>::infinity()) - x).detach();
}

}  // namespace

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const DType common = promote_types(x1.dtype(), x2.dtype());
  if (!is_floating(common))
    fail("cosine_similarity: expected common dtype to be floating point, yet common dtype is %s "
         "(x1 %s, x2 %s; convert them with .to(kFloat32))",
         dtype_name(common), dtype_name(x1.dtype()), dtype_name(x2.dtype()));
  const auto shape = broadcast_shapes("cosine_similarity", x1.shape(), x2.shape());
  if (!shape.ok())
    fail("cosine_similarity: x1 %s and x2 %s must broadcast to one shape (%s)",
         shape_str(x1.shape()), shape_str(x2.shape()), shape.status().message());
  const auto d = wrap_dim("cosine_similarity", dim, static_cast<int64_t>(shape->size()));
  if (!d.ok()) fail("%s", d.status().message());
  const Tensor a = x1.to(common), b = x2.to(common);
  const Tensor w1 = clamp_min_passing_grad((a * a).sum(Shape{*d}, true), eps * eps);
  const Tensor w2 = clamp_min_passing_grad((b * b).sum(Shape{*d}, true), eps * eps);
  return (a * b * (w1 * w2).rsqrt()).sum(Shape{*d});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const auto shape = broadcast_shapes("pairwise_distance", x1.shape(), x2.shape());
  if (!shape.ok())
    fail("pairwise_distance: x1 %s and x2 %s must broadcast to one shape (%s)",
         shape_str(x1.shape()), shape_str(x2.shape()), shape.status().message());
  if (p < 0) fail("pairwise_distance: p must be at least 0 (a norm order), got %g", p);
  const int64_t innermost = std::max(x1.dim(), x2.dim()) - 1;
  return (x1 - x2 + eps).norm(p, innermost, keepdim);
}

}  // namespace sloth

namespace sloth::nn {

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2) {
  return sloth::cosine_similarity(x1, x2, options.dim(), options.eps());
}
std::string CosineSimilarityImpl::extra_repr() const {
  return absl::StrFormat("dim=%d, eps=%g", options.dim(), options.eps());
}
Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2) {
  return sloth::pairwise_distance(x1, x2, options.p(), options.eps(), options.keepdim());
}
std::string PairwiseDistanceImpl::extra_repr() const {
  return absl::StrFormat("p=%g, eps=%g, keepdim=%s", options.p(), options.eps(),
                         options.keepdim() ? "true" : "false");
}

namespace functional {
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2,
                         const CosineSimilarityFuncOptions& options) {
  return sloth::cosine_similarity(x1, x2, options.dim(), options.eps());
}
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2,
                         const PairwiseDistanceFuncOptions& options) {
  return sloth::pairwise_distance(x1, x2, options.p(), options.eps(), options.keepdim());
}
}  // namespace functional

}  // namespace sloth::nn
