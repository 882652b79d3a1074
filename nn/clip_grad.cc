#include "nn/clip_grad.h"

#include <cmath>

namespace sloth::nn {
namespace {

Tensor norm_of(const Tensor& g, double p) {
  if (std::isinf(p)) return amax(abs(g));
  if (p == 2) return sqrt(sum(g * g));
  if (p == 1) return sum(abs(g));
  return pow(sum(pow(abs(g), p)), 1.0 / p);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(norm_type > 0))
    fail("clip_grad_norm_: norm_type must be positive (or INFINITY), got %g", norm_type);
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined())
      if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
  if (grads.empty()) return tensor(0.0);
  NoGradGuard guard;
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(norm_of(g.detach(), norm_type));
  Tensor total = norms.size() == 1 ? norms[0] : norm_of(stack(norms), norm_type);
  if (error_if_nonfinite) {
    const double v = total.item<double>();
    if (!std::isfinite(v))
      fail("clip_grad_norm_: the total norm of order %g of the gradients is non-finite (%g), "
           "so it cannot be clipped; pass error_if_nonfinite = false to scale them anyway",
           norm_type, v);
  }
  Tensor coef = clamp(max_norm / (total + 1e-6), -INFINITY, 1.0);
  for (Tensor& g : grads) g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard guard;
  for (const Tensor& p : parameters)
    if (p.defined())
      if (Tensor g = p.grad(); g.defined()) g.clamp_(-clip_value, clip_value);
}

double utils::clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                              double norm_type, bool error_if_nonfinite) {
  return nn::clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite).item<double>();
}

}  // namespace sloth::nn
