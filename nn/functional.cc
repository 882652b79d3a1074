#include "nn/functional.h"

#include <cmath>
#include <limits>

#include "nn/layers.h"

namespace sloth::nn::functional {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// LibTorch's in-place variants write into their input and return it.
Tensor into(Tensor& input, const Tensor& result, bool inplace) {
  if (!inplace) return result;
  input.copy_(result);
  return input;
}

// x * beta > threshold ? x : log1p(exp(beta x)) / beta. The exp reads x clamped to the
// threshold, so the branch not taken never overflows (an inf there would turn its zero
// gradient into nan).
Tensor softplus_of(const Tensor& x, double beta, double threshold) {
  const Tensor capped = sloth::clamp(x, -kInf, threshold / beta);
  return sloth::where(x * beta > threshold, x, sloth::log1p(sloth::exp(capped * beta)) / beta);
}

// alpha (exp(x / alpha) - 1) for x <= 0, x above: ELU's and CELU's shape. exp reads
// min(x, 0) for the reason above.
Tensor exp_linear(const Tensor& x, double alpha, double input_scale) {
  const Tensor neg = sloth::clamp(x, -kInf, 0.0);
  return sloth::where(x > 0, x, (sloth::exp(neg * input_scale) - 1) * alpha);
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    fail("F::%s: dim %d is out of range for a tensor of %d dims (expected [%d, %d])", op, dim,
         rank, -r, r - 1);
  return dim < 0 ? dim + r : dim;
}

// The source index of each output position of one padded dim of size n.
std::vector<int64_t> pad_indices(int64_t n, int64_t left, int64_t right, PadMode mode) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(std::max<int64_t>(n + left + right, 0)));
  for (int64_t j = -left; j < n + right; ++j) {
    int64_t s = j;
    switch (mode) {
      case PadMode::kReflect:
        if (s < 0) s = -s;
        if (s >= n) s = 2 * (n - 1) - s;
        break;
      case PadMode::kReplicate: s = std::clamp<int64_t>(s, 0, n - 1); break;
      case PadMode::kCircular: s = ((s % n) + n) % n; break;
      case PadMode::kConstant: break;
    }
    idx.push_back(s);
  }
  return idx;
}

const char* pad_mode_name(PadMode m) {
  switch (m) {
    case PadMode::kConstant: return "constant";
    case PadMode::kReflect: return "reflect";
    case PadMode::kReplicate: return "replicate";
    case PadMode::kCircular: return "circular";
  }
  return "?";
}

}  // namespace

// ---- activations ----
Tensor relu(Tensor input, const ReLUFuncOptions& options) {
  if (options.inplace()) return input.relu_();
  return sloth::relu(input);
}
Tensor hardtanh(Tensor input, const HardtanhFuncOptions& options) {
  const double lo = options.min_val(), hi = options.max_val();
  if (lo > hi)
    fail("F::hardtanh: min_val (%g) must not be greater than max_val (%g)", lo, hi);
  // Scalars at the bounds: the gradient is 0 at and beyond them (hardtanh_backward's mask).
  const Tensor out = sloth::where(input <= lo, Scalar(lo), sloth::where(input >= hi, Scalar(hi), input));
  return into(input, out, options.inplace());
}
Tensor relu6(Tensor input, const ReLU6FuncOptions& options) {
  return hardtanh(std::move(input), HardtanhFuncOptions().min_val(0).max_val(6).inplace(options.inplace()));
}
Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& options) {
  const Tensor out = sloth::where(input > 0, input, input * options.negative_slope());
  return into(input, out, options.inplace());
}
Tensor elu(Tensor input, const ELUFuncOptions& options) {
  return into(input, exp_linear(input, options.alpha(), 1.0), options.inplace());
}
Tensor selu(Tensor input, const SELUFuncOptions& options) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return into(input, exp_linear(input, kAlpha, 1.0) * kScale, options.inplace());
}
Tensor celu(Tensor input, const CELUFuncOptions& options) {
  if (options.alpha() == 0) fail("F::celu: alpha must not be 0 (it divides the input)");
  return into(input, exp_linear(input, options.alpha(), 1.0 / options.alpha()), options.inplace());
}
Tensor gelu(const Tensor& input, const GELUFuncOptions& options) {
  const std::string& a = options.approximate();
  if (a == "none") return sloth::gelu(input);
  if (a != "tanh")
    fail("F::gelu: approximate must be \"none\" or \"tanh\", got \"%s\"", a);
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  const Tensor inner = (input + input * input * input * 0.044715) * kSqrt2OverPi;
  return input * 0.5 * (sloth::tanh(inner) + 1);
}
Tensor silu(const Tensor& input) { return sloth::silu(input); }
Tensor mish(const Tensor& input) { return input * sloth::tanh(softplus_of(input, 1.0, 20.0)); }
Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options) {
  if (options.beta() <= 0)
    fail("F::softplus: beta must be positive, got %g", options.beta());
  return softplus_of(input, options.beta(), options.threshold());
}
Tensor logsigmoid(const Tensor& input) { return -softplus_of(-input, 1.0, 20.0); }
Tensor softsign(const Tensor& input) { return input / (sloth::abs(input) + 1); }
Tensor tanhshrink(const Tensor& input) { return input - sloth::tanh(input); }
Tensor hardshrink(const Tensor& input, const HardshrinkFuncOptions& options) {
  return sloth::where(sloth::abs(input) > options.lambda(), input, Scalar(0));
}
Tensor softshrink(const Tensor& input, const SoftshrinkFuncOptions& options) {
  const double l = options.lambda();
  if (l < 0) fail("F::softshrink: lambda must be at least 0, got %g", l);
  return sloth::where(input > l, input - l, sloth::where(input < -l, input + l, Scalar(0)));
}
Tensor threshold(Tensor input, const ThresholdFuncOptions& options) {
  const Tensor out = sloth::where(input > options.threshold(), input, Scalar(options.value()));
  return into(input, out, options.inplace());
}
Tensor glu(const Tensor& input, const GLUFuncOptions& options) {
  const int64_t d = wrap_dim(options.dim(), input.dim(), "glu");
  if (input.dim() == 0) fail("F::glu: does not take a 0-dim tensor (it halves a dimension)");
  const int64_t n = input.size(d);
  if (n % 2 != 0)
    fail("F::glu: halving dimension must be even, but dimension %d of %s is size %d", d,
         shape_str(input.shape()), n);
  return input.narrow(d, 0, n / 2) * sloth::sigmoid(input.narrow(d, n / 2, n / 2));
}
Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options) {
  const Tensor x = options.dtype() ? input.to(*options.dtype()) : input;
  return sloth::softmax(x, options.dim());
}
Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options) {
  const Tensor x = options.dtype() ? input.to(*options.dtype()) : input;
  return sloth::log_softmax(x, options.dim());
}
Tensor softmin(const Tensor& input, const SoftminFuncOptions& options) {
  const Tensor x = options.dtype() ? input.to(*options.dtype()) : input;
  return sloth::softmax(-x, options.dim());
}

// ---- dropout, linear, embedding ----
Tensor dropout(Tensor input, const DropoutFuncOptions& options) {
  return into(input, sloth::dropout(input, options.p(), options.training()), options.inplace());
}
Tensor dropout2d(Tensor input, const Dropout2dFuncOptions& options) {
  return into(input, sloth::dropout2d(input, options.p(), options.training()), options.inplace());
}
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  return sloth::linear(input, weight, bias);
}
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options) {
  Tensor out = sloth::embedding(weight, input);
  if (!options.padding_idx()) return out;
  const int64_t rows = weight.dim() > 0 ? weight.size(0) : 0;
  int64_t p = *options.padding_idx();
  if (p < -rows || p >= rows)
    fail("F::embedding: padding_idx %d must be within num_embeddings (%d): in [%d, %d]", p, rows,
         -rows, rows - 1);
  if (p < 0) p += rows;
  // The padding row's lookups read a detached weight: same values, no gradient to that row.
  const Tensor mask = (input == p).unsqueeze(-1);
  return sloth::where(mask, sloth::embedding(weight.detach(), input), out);
}
Tensor one_hot(const Tensor& tensor, int64_t num_classes) {
  if (num_classes == -1) {
    if (tensor.numel() == 0)
      fail("F::one_hot: can not infer the number of classes from an empty tensor %s; pass "
           "num_classes", shape_str(tensor.shape()));
    num_classes = sloth::amax(tensor).item<int64_t>() + 1;
  }
  return sloth::one_hot(tensor, num_classes);
}

// ---- normalization ----
Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options) {
  return sloth::layer_norm(input, options.normalized_shape(), options.weight(), options.bias(),
                           options.eps());
}
Tensor group_norm(const Tensor& input, const GroupNormFuncOptions& options) {
  return sloth::group_norm(input, options.num_groups(), options.weight(), options.bias(),
                           options.eps());
}
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options) {
  if (!options.momentum())
    fail("F::batch_norm: momentum nullopt (a cumulative average) needs a count of the batches "
         "seen, which only nn::BatchNorm keeps; pass a momentum or use the module");
  return sloth::batch_norm(input, running_mean, running_var, options.weight(), options.bias(),
                           options.training(), *options.momentum(), options.eps());
}
Tensor normalize(const Tensor& input, const NormalizeFuncOptions& options) {
  const int64_t d = wrap_dim(options.dim(), input.dim(), "normalize");
  const double p = options.p();
  if (!(p >= 1))
    fail("F::normalize: p must be at least 1 (or inf), got %g", p);
  Tensor norm;
  if (std::isinf(p)) {
    norm = sloth::amax(sloth::abs(input), {d}, true);
  } else if (p == 1) {
    norm = sloth::sum(sloth::abs(input), {d}, true);
  } else {
    // The root reads 1 where the sum is 0, so its gradient there is 0, not inf * 0
    // (PyTorch's norm backward masks norm == 0 the same way).
    const Tensor s = p == 2 ? sloth::sum(input * input, {d}, true)
                            : sloth::sum(sloth::pow(sloth::abs(input), p), {d}, true);
    const Tensor nz = s > 0;
    const Tensor safe = sloth::where(nz, s, Scalar(1));
    norm = sloth::where(nz, p == 2 ? sloth::sqrt(safe) : sloth::pow(safe, 1.0 / p), Scalar(0));
  }
  return input / sloth::clamp(norm, options.eps(), kInf);
}

// ---- convolution, pooling, fold ----
namespace {
// F::conv1d and F::conv2d differ only in D and in which sloth:: overload pair they call.
template <size_t D, typename Conv, typename ConvPaddingMode>
Tensor conv_with_options(const Tensor& input, const Tensor& weight,
                         const ConvFuncOptions<D>& options, Conv conv,
                         ConvPaddingMode conv_padding_mode) {
  const Shape stride = options.stride().expand(D, "stride");
  const Shape dilation = options.dilation().expand(D, "dilation");
  if (!options.padding_mode_string().empty())
    return conv_padding_mode(input, weight, options.bias(), stride, options.padding_mode_string(),
                             dilation, options.groups());
  return conv(input, weight, options.bias(), stride, options.padding().expand(D, "padding"),
              dilation, options.groups());
}
}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options) {
  return conv_with_options(
      input, weight, options, [](auto&&... a) { return sloth::conv1d(a...); },
      [](auto&&... a) { return sloth::conv1d_padding_mode(a...); });
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options) {
  return conv_with_options(
      input, weight, options, [](auto&&... a) { return sloth::conv2d(a...); },
      [](auto&&... a) { return sloth::conv2d_padding_mode(a...); });
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& options) {
  return sloth::conv_transpose2d(input, weight, options.bias(), options.stride().expand(2, "stride"),
                                 options.padding().expand(2, "padding"),
                                 options.output_padding().expand(2, "output_padding"),
                                 options.groups(), options.dilation().expand(2, "dilation"));
}
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options) {
  const Shape k = options.kernel_size().expand(2, "kernel_size");
  return sloth::max_pool2d(input, k, options.stride() ? options.stride()->expand(2, "stride") : k,
                           options.padding().expand(2, "padding"),
                           options.dilation().expand(2, "dilation"), options.ceil_mode());
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                   const MaxPool2dFuncOptions& options) {
  const Shape k = options.kernel_size().expand(2, "kernel_size");
  return sloth::max_pool2d_with_indices(
      input, k, options.stride() ? options.stride()->expand(2, "stride") : k,
      options.padding().expand(2, "padding"), options.dilation().expand(2, "dilation"),
      options.ceil_mode());
}
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options) {
  const Shape k = options.kernel_size().expand(2, "kernel_size");
  return sloth::avg_pool2d(input, k, options.stride() ? options.stride()->expand(2, "stride") : k,
                           options.padding().expand(2, "padding"), options.ceil_mode(),
                           options.count_include_pad(), options.divisor_override());
}
Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& options) {
  return sloth::adaptive_avg_pool2d(input, options.output_size().expand(2, "output_size"));
}
Tensor fold(const Tensor& input, const FoldFuncOptions& options) {
  return sloth::fold(input, options.output_size().expand(2, "output_size"),
                     options.kernel_size().expand(2, "kernel_size"),
                     options.dilation().expand(2, "dilation"), options.padding().expand(2, "padding"),
                     options.stride().expand(2, "stride"));
}
Tensor unfold(const Tensor& input, const UnfoldFuncOptions& options) {
  return sloth::unfold(input, options.kernel_size().expand(2, "kernel_size"),
                       options.dilation().expand(2, "dilation"),
                       options.padding().expand(2, "padding"), options.stride().expand(2, "stride"));
}

// ---- padding ----
Tensor pad(const Tensor& input, const PadFuncOptions& options) {
  const std::vector<int64_t>& p = options.pad();
  const PadMode mode = options.mode();
  const int64_t rank = input.dim(), pairs = static_cast<int64_t>(p.size()) / 2;
  if (p.size() % 2 != 0)
    fail("F::pad: the padding length must be divisible by 2 (a (left, right) pair per dim), "
         "got %d values", p.size());
  if (pairs > rank)
    fail("F::pad: %d (left, right) pairs pad more dims than the input %s has", pairs,
         shape_str(input.shape()));
  if (mode != PadMode::kConstant) {
    // PyTorch pads the last 1-3 dims of an input with one or two leading (batch, channel) dims.
    if (pairs < 1 || pairs > 3 || rank < pairs + 1 || rank > pairs + 2)
      fail("F::pad: %s padding of %d dims takes a %d-d or %d-d input, got %s (pad the last 1-3 "
           "dims of a [N, C, ...] or [C, ...] input; constant padding takes any)",
           pad_mode_name(mode), pairs, pairs + 1, pairs + 2, shape_str(input.shape()));
    if (options.value() != 0)
      fail("F::pad: value %g only applies to constant padding, not %s", options.value(),
           pad_mode_name(mode));
  }
  // Check every pair before recording anything (bad input changes nothing).
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = rank - 1 - i, n = input.size(d), l = p[2 * i], r = p[2 * i + 1];
    if (n + l + r < 0 || (mode != PadMode::kConstant && n + l + r < 1))
      fail("F::pad: padding (%d, %d) of dim %d (size %d) of %s leaves a negative or empty size",
           l, r, d, n, shape_str(input.shape()));
    if (mode == PadMode::kReflect && (l >= n || r >= n))
      fail("F::pad: reflect padding (%d, %d) of dim %d must be less than its size %d (input %s)",
           l, r, d, n, shape_str(input.shape()));
    const int64_t kept = n - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
    if (mode == PadMode::kCircular && (l > kept || r > kept))
      fail("F::pad: circular padding (%d, %d) of dim %d wraps around more than once (size %d "
           "after cropping, input %s)", l, r, d, kept, shape_str(input.shape()));
  }
  Tensor x = input;
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = rank - 1 - i, l = p[2 * i], r = p[2 * i + 1];
    if (l == 0 && r == 0) continue;
    if (mode != PadMode::kConstant) {
      // Reflect and replicate index the original dim (a crop on one side does not move the
      // other side's reflection), as PyTorch's kernels; circular crops first and wraps over
      // what is left, as PyTorch's _pad_circular.
      if (mode == PadMode::kCircular) {
        const int64_t lo = std::max<int64_t>(-l, 0), hi = std::max<int64_t>(-r, 0);
        if (lo > 0 || hi > 0) x = x.narrow(d, lo, x.size(d) - lo - hi);
      }
      const std::vector<int64_t> idx =
          mode == PadMode::kCircular
              ? pad_indices(x.size(d), std::max<int64_t>(l, 0), std::max<int64_t>(r, 0), mode)
              : pad_indices(x.size(d), l, r, mode);
      x = sloth::index_select(
          x, d, from_vector(idx, {static_cast<int64_t>(idx.size())},
                            TensorOptions(DType::kInt64).device(x.device())));
      continue;
    }
    // Constant: crop the negative sides, then put value-filled blocks on the positive ones.
    const int64_t lo = std::max<int64_t>(-l, 0), hi = std::max<int64_t>(-r, 0);
    if (lo > 0 || hi > 0) x = x.narrow(d, lo, x.size(d) - lo - hi);
    std::vector<Tensor> parts;
    const auto block = [&](int64_t n) {
      Shape s = x.shape();
      s[d] = n;
      return sloth::full(s, options.value(), TensorOptions(x.dtype()).device(x.device()));
    };
    if (l > 0) parts.push_back(block(l));
    parts.push_back(x);
    if (r > 0) parts.push_back(block(r));
    if (parts.size() > 1) x = sloth::cat(parts, d);
  }
  return x;
}

// ---- losses ----
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options) {
  return sloth::mse_loss(input, target, options.reduction());
}
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options) {
  return sloth::l1_loss(input, target, options.reduction());
}
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const SmoothL1LossFuncOptions& options, double beta) {
  return sloth::smooth_l1_loss(input, target, options.reduction(),
                               beta != 1.0 ? beta : options.beta());
}
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossFuncOptions& options) {
  return sloth::huber_loss(input, target, options.reduction(), options.delta());
}
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options) {
  return sloth::nll_loss(input, target,
                         NllLossOptions{.ignore_index = options.ignore_index(),
                                        .reduction = options.reduction(),
                                        .weight = options.weight()});
}
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyFuncOptions& options) {
  return sloth::cross_entropy(input, target,
                              CrossEntropyOptions{.ignore_index = options.ignore_index(),
                                                  .label_smoothing = options.label_smoothing(),
                                                  .reduction = options.reduction(),
                                                  .weight = options.weight()});
}
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options) {
  return sloth::binary_cross_entropy_with_logits(input, target, options.reduction(),
                                                 options.weight(), options.pos_weight());
}
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options) {
  return sloth::binary_cross_entropy(input, target, options.weight(), options.reduction());
}
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& options) {
  if (!options.batch_mean())
    return sloth::kl_div(input, target, options.reduction(), options.log_target());
  // PyTorch's 'batchmean': the sum divided by the batch size (the KL divergence per sample).
  const Tensor sum = sloth::kl_div(input, target, kSum, options.log_target());
  return input.dim() == 0 ? sum : sum / static_cast<double>(input.size(0));
}

}  // namespace sloth::nn::functional
