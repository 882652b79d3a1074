#include "nn/loss.h"

#include <limits>

#include "nn/functional.h"

namespace sloth {
namespace {

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined()) fail("%s: input and target must be defined", op);
  if (input.shape() != target.shape())
    fail("%s: input of shape %s and target of shape %s must have the same shape (reshape or "
         "expand the target first)",
         op, shape_str(input.shape()), shape_str(target.shape()));
  if (!is_floating(input.dtype()))
    fail("%s: input must be a floating-point tensor, got %s", op, dtype_name(input.dtype()));
}

Tensor reduce(const Tensor& t, Reduction r) {
  switch (r) {
    case Reduction::kMean: return t.mean();
    case Reduction::kSum: return t.sum();
    case Reduction::kNone: return t;
  }
  fail("loss: unknown reduction %d", static_cast<int64_t>(r));
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape("mse_loss", input, target);
  Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape("l1_loss", input, target);
  return reduce((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                      double beta) {
  if (!(beta >= 0)) fail("smooth_l1_loss: beta must be >= 0, got %g", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  check_same_shape("smooth_l1_loss", input, target);
  Tensor d = (input - target).abs();
  return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  if (!(delta > 0)) fail("huber_loss: delta must be > 0, got %g", delta);
  check_same_shape("huber_loss", input, target);
  Tensor d = (input - target).abs();
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, Reduction reduction) {
  check_same_shape("binary_cross_entropy_with_logits", x, y);
  // max(x, 0) - x y + log(1 + exp(-|x|)): stable for large |x|. max(x, 0) is written
  // (|x| + x) / 2 so that the gradient at x = 0 is PyTorch's sigmoid(0) - y (relu's
  // subgradient 0 there would give -y).
  Tensor l = (x.abs() + x) * 0.5 - x * y + (x.abs().neg().exp()).log1p();
  return reduce(l, reduction);
}

// ---- class-weighted losses (LibTorch API) ----
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, Reduction reduction,
                                        const Tensor& weight, const Tensor& pos_weight) {
  check_same_shape("binary_cross_entropy_with_logits", x, y);
  Tensor l;
  if (pos_weight.defined()) {
    if (pos_weight.dim() < 1 || (x.dim() >= 1 && pos_weight.size(-1) != x.size(-1) &&
                                 pos_weight.size(-1) != 1))
      fail("binary_cross_entropy_with_logits: pos_weight of shape %s must broadcast along the "
           "last dimension of the input %s (one value per class)",
           shape_str(pos_weight.shape()), shape_str(x.shape()));
    // PyTorch's form: (1 - y) x + (1 + (p - 1) y) (log1p(exp(-|x|)) + max(-x, 0)).
    Tensor lw = (pos_weight.to(x.dtype()) - 1.0) * y + 1.0;
    l = (1.0 - y) * x + lw * ((x.abs().neg().exp()).log1p() + (x.abs() - x) * 0.5);
  } else {
    l = (x.abs() + x) * 0.5 - x * y + (x.abs().neg().exp()).log1p();
  }
  if (weight.defined()) l = l * weight.to(x.dtype());
  if (l.shape() != x.shape())
    fail("binary_cross_entropy_with_logits: weight of shape %s must broadcast to the input's "
         "shape %s", shape_str(weight.shape()), shape_str(x.shape()));
  return reduce(l, reduction);
}


Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            Reduction reduction) {
  if (!input.defined() || !target.defined())
    fail("binary_cross_entropy: input and target must be defined");
  if (input.shape() != target.shape())
    fail("binary_cross_entropy: target %s and input %s must have the same shape",
         shape_str(target.shape()), shape_str(input.shape()));
  if (!is_floating(input.dtype()) || !is_floating(target.dtype()))
    fail("binary_cross_entropy: input (%s) and target (%s) must be floating point "
         "(probabilities and 0/1 labels as floats)", dtype_name(input.dtype()),
         dtype_name(target.dtype()));
  if (weight.defined()) {
    const auto b = broadcast_shapes("binary_cross_entropy", weight.shape(), input.shape());
    if (!b.ok() || *b != input.shape())
      fail("binary_cross_entropy: weight %s does not broadcast to the input %s",
           shape_str(weight.shape()), shape_str(input.shape()));
  }
  // PyTorch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Tensor log_p = sloth::clamp(sloth::log(input), -100.0, kInf);
  const Tensor log_q = sloth::clamp(sloth::log(1 - input), -100.0, kInf);
  Tensor loss = -(target * log_p + (1 - target) * log_q);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  check_same_shape("kl_div", input, target);
  if (!is_floating(target.dtype()))
    fail("kl_div: target must be a floating-point tensor (probabilities, or log-probabilities "
         "with log_target), got %s", dtype_name(target.dtype()));
  if (log_target) return reduce(sloth::exp(target) * (target - input), reduction);
  // xlogy(t, t) - t * input: a target of 0 adds 0 (not 0 * log 0), and its log is taken of 1
  // there so no inf or nan enters the graph's gradient either.
  const Tensor positive = target != 0;
  const Tensor t_log_t =
      sloth::where(positive, target * sloth::log(sloth::where(positive, target, Scalar(1))),
                   Scalar(0));
  return reduce(t_log_t - target * input, reduction);
}

}  // namespace sloth

namespace sloth::nn {

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, options.reduction());
}
Tensor L1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return l1_loss(input, target, options.reduction());
}
Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, options.reduction(), options.weight(),
                                          options.pos_weight());
}
Tensor SmoothL1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, options.reduction(), options.beta());
}
Tensor HuberLossImpl::forward(const Tensor& input, const Tensor& target) {
  return huber_loss(input, target, options.reduction(), options.delta());
}
Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target,
                  NllLossOptions{.ignore_index = options.ignore_index(),
                                 .reduction = options.reduction(),
                                 .weight = options.weight()});
}
Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target,
                       CrossEntropyOptions{.ignore_index = options.ignore_index(),
                                           .label_smoothing = options.label_smoothing(),
                                           .reduction = options.reduction(),
                                           .weight = options.weight()});
}

Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, options.weight(), options.reduction());
}
Tensor KLDivLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::kl_div(input, target, options);
}

}  // namespace sloth::nn
