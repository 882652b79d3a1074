#include "nn/normalization.h"

#include <sstream>

namespace sloth::nn {
namespace {

Tensor filled_or_none(bool on, int64_t n, double v, DType dtype = kDefaultFloat) {
  if (!on) return Tensor();
  NoGradGuard g;
  return full({n}, v, TensorOptions(dtype)).detach();
}

int64_t checked_features(const char* module, int64_t n) {
  if (n <= 0) fail("nn::%s: num_features must be positive, got %d", module, n);
  return n;
}

}  // namespace

BatchNormBase::BatchNormBase(const char* name, int64_t n, double eps_,
                             std::optional<double> momentum_, bool affine_, bool track)
    : Module(name),
      num_features(checked_features(name, n)),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track),
      weight(register_parameter("weight", filled_or_none(affine_, n, 1.0))),
      bias(register_parameter("bias", filled_or_none(affine_, n, 0.0))),
      running_mean(register_buffer("running_mean", filled_or_none(track, n, 0.0))),
      running_var(register_buffer("running_var", filled_or_none(track, n, 1.0))),
      num_batches_tracked(register_buffer(
          "num_batches_tracked",
          track ? full({}, int64_t{0}, TensorOptions(DType::kInt64)) : Tensor())) {}

Tensor BatchNormBase::forward(const Tensor& x) {
  // Every check before any write, so a bad input leaves the buffers as they were.
  if (!x.defined()) fail("nn::%s: input is undefined", name());
  check_input_dim(x);
  if (x.size(1) != num_features)
    fail("nn::%s(%d): input %s has %d channels (dim 1), expected %d (running_mean should "
         "contain %d elements not %d)",
         name(), num_features, shape_str(x.shape()), x.size(1), num_features, x.size(1),
         num_features);
  if (is_training() && x.numel() / num_features == 1)
    fail("nn::%s: Expected more than 1 value per channel when training, got input size %s",
         name(), shape_str(x.shape()));
  // PyTorch's _BatchNorm.forward: eval without tracked statistics uses the batch's.
  const bool use_batch_stats = is_training() || !running_mean.defined();
  const bool update = is_training() && track_running_stats;
  const Tensor rm = (!is_training() || track_running_stats) ? running_mean : Tensor();
  const Tensor rv = (!is_training() || track_running_stats) ? running_var : Tensor();
  // PyTorch counts the batch first and then normalizes; here the count moves after
  // batch_norm, which checks everything before it records, so an error changes no buffer.
  // The cumulative average's factor is 1 / (count + 1), computed in the graph (not read
  // back), so every step records the same graph and nothing syncs.
  Tensor y;
  if (update && !momentum) {
    Tensor factor;
    {
      NoGradGuard g;
      factor = reciprocal(num_batches_tracked.to(running_mean.dtype()) + 1.0);
    }
    y = internal::batch_norm(x, rm, rv, weight, bias, use_batch_stats, factor, eps);
  } else {
    y = batch_norm(x, rm, rv, weight, bias, use_batch_stats, momentum.value_or(0.0), eps);
  }
  if (update && num_batches_tracked.defined()) {
    NoGradGuard g;
    num_batches_tracked.add_(Scalar(int64_t{1}));
  }
  return y;
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << eps << ", momentum=";
  if (momentum) os << *momentum;
  else os << "None";
  os << ", affine=" << (affine ? "true" : "false")
     << ", track_running_stats=" << (track_running_stats ? "true" : "false");
  return os.str();
}

void BatchNorm1dImpl::check_input_dim(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    fail("nn::BatchNorm1d: expected 2D or 3D input (got %dD input of shape %s)", x.dim(),
         shape_str(x.shape()));
}

void BatchNorm2dImpl::check_input_dim(const Tensor& x) const {
  if (x.dim() != 4)
    fail("nn::BatchNorm2d: expected 4D input (got %dD input of shape %s)", x.dim(),
         shape_str(x.shape()));
}

GroupNormImpl::GroupNormImpl(int64_t g, int64_t c, double eps_, bool affine_)
    : Module("GroupNorm"),
      num_groups(g),
      num_channels(c),
      eps(eps_),
      affine(affine_),
      weight(register_parameter("weight", filled_or_none(affine_, c, 1.0))),
      bias(register_parameter("bias", filled_or_none(affine_, c, 0.0))) {
  if (g <= 0 || c <= 0)
    fail("nn::GroupNorm: num_groups (%d) and num_channels (%d) must be positive", g, c);
  if (c % g != 0)
    fail("nn::GroupNorm: num_channels must be divisible by num_groups (got num_channels=%d, "
         "num_groups=%d)",
         c, g);
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  return group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNormImpl::extra_repr() const {
  std::ostringstream os;
  os << num_groups << ", " << num_channels << ", eps=" << eps
     << ", affine=" << (affine ? "true" : "false");
  return os.str();
}

}  // namespace sloth::nn
