#include "nn/layers.h"

namespace sloth {

Tensor dropout2d(const Tensor& x, double p, bool training) {
  if (!(p >= 0 && p <= 1)) fail("dropout2d: probability has to be between 0 and 1, but got %g", p);
  if (!x.defined()) fail("dropout2d: input is undefined");
  if (x.dim() != 3 && x.dim() != 4)
    fail("dropout2d: expected a 3-D [N, C, L] or 4-D [N, C, H, W] input, got %s",
         shape_str(x.shape()));
  if (!is_floating(x.dtype()))
    fail("dropout2d: input must be a floating-point tensor, got %s", dtype_name(x.dtype()));
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // One draw per (sample, channel), broadcast over the rest.
  Shape mask_shape(static_cast<size_t>(x.dim()), 1);
  mask_shape[0] = x.size(0);
  mask_shape[1] = x.size(1);
  Tensor keep = rand(mask_shape, TensorOptions().dtype(x.dtype()).device(x.device())) >= p;
  return x * (keep.to(x.dtype()) * (1.0 / (1.0 - p)));
}

}  // namespace sloth

namespace sloth::nn {

std::string FlattenImpl::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Dropout2dImpl::Dropout2dImpl(double p_) : Module("Dropout2d"), p(p_) {
  if (!(p >= 0 && p <= 1)) fail("nn::Dropout2d: p must be in [0, 1], got %g", p);
}
std::string Dropout2dImpl::extra_repr() const { return "p=" + std::to_string(p); }

}  // namespace sloth::nn
