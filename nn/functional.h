// LibTorch's torch::nn::functional (`namespace F = torch::nn::functional;`): the functional
// forms with their ...FuncOptions builders, so ported calls compile as written:
//   F::relu(x, F::ReLUFuncOptions().inplace(true));  F::softmax(x, F::SoftmaxFuncOptions(1));
//   F::cross_entropy(out, y, F::CrossEntropyFuncOptions().label_smoothing(0.1));
//   F::conv2d(x, w, F::Conv2dFuncOptions().stride(2).padding(1));
//   F::pad(x, F::PadFuncOptions({1, 1, 2, 0}).mode(torch::kReflect));
// Each is the sloth op or a composition of sloth ops (so it is lazy, fused and differentiable);
// the compositions use PyTorch's formulas and its gradients at the kinks (checked against
// PyTorch 1.13 in tests/functional_api_test.cc). Options LibTorch shares with a module are
// the module's (MaxPool2dFuncOptions is nn::MaxPool2dOptions, MSELossFuncOptions is
// nn::MSELossOptions), as in LibTorch.
// `inplace(true)` writes the result into the input (copy_, functionalized like every in-place
// write) and returns it, as LibTorch's in-place variants do.
// Not here: embedding's max_norm/scale_grad_by_freq/sparse, kl_div (sloth's Reduction has no
// batchmean), the 3-d and 1-d pooling forms, interpolate, the distance functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/loss.h"
#include "nn/pooling.h"

namespace sloth {

// F::pad's modes (LibTorch's torch::kConstant, kReflect, kReplicate, kCircular).
enum class PadMode : uint8_t { kConstant, kReflect, kReplicate, kCircular };
inline constexpr PadMode kConstant = PadMode::kConstant, kReflect = PadMode::kReflect,
                         kReplicate = PadMode::kReplicate, kCircular = PadMode::kCircular;

}  // namespace sloth

namespace sloth::nn::functional {

// ---- activations ----
using ReLUFuncOptions = ReLUOptions;
using ReLU6FuncOptions = ReLU6Options;
using SELUFuncOptions = SELUOptions;
using LeakyReLUFuncOptions = LeakyReLUOptions;
using ELUFuncOptions = ELUOptions;
using CELUFuncOptions = CELUOptions;
using GELUFuncOptions = GELUOptions;
using HardtanhFuncOptions = HardtanhOptions;
using SoftplusFuncOptions = SoftplusOptions;
using HardshrinkFuncOptions = HardshrinkOptions;
using SoftshrinkFuncOptions = SoftshrinkOptions;
using ThresholdFuncOptions = ThresholdOptions;
using GLUFuncOptions = GLUOptions;
// The dim is required (no implicit dim, as LibTorch); dtype casts the input first.
class SoftmaxFuncOptions {
 public:
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  SLOTH_NN_ARG(int64_t, dim);
  SLOTH_NN_ARG(std::optional<DType>, dtype);
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
using SoftminFuncOptions = SoftmaxFuncOptions;

Tensor relu(Tensor input, const ReLUFuncOptions& options = {});
Tensor relu6(Tensor input, const ReLU6FuncOptions& options = {});
Tensor leaky_relu(Tensor input, const LeakyReLUFuncOptions& options = {});
Tensor elu(Tensor input, const ELUFuncOptions& options = {});
Tensor selu(Tensor input, const SELUFuncOptions& options = {});
Tensor celu(Tensor input, const CELUFuncOptions& options = {});
Tensor gelu(const Tensor& input, const GELUFuncOptions& options = {});
Tensor silu(const Tensor& input);
Tensor mish(const Tensor& input);
Tensor hardtanh(Tensor input, const HardtanhFuncOptions& options = {});
Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options = {});
Tensor logsigmoid(const Tensor& input);
Tensor softsign(const Tensor& input);
Tensor tanhshrink(const Tensor& input);
Tensor hardshrink(const Tensor& input, const HardshrinkFuncOptions& options = {});
Tensor softshrink(const Tensor& input, const SoftshrinkFuncOptions& options = {});
Tensor threshold(Tensor input, const ThresholdFuncOptions& options);
Tensor glu(const Tensor& input, const GLUFuncOptions& options = {});
Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options);
Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options);
Tensor softmin(const Tensor& input, const SoftminFuncOptions& options);

// ---- dropout, linear, embedding ----
class DropoutFuncOptions {
  SLOTH_NN_ARG(double, p) = 0.5;
  SLOTH_NN_ARG(bool, training) = true;  // LibTorch's functional default (the module's follows train())
  SLOTH_NN_ARG(bool, inplace) = false;
};
using Dropout2dFuncOptions = DropoutFuncOptions;
Tensor dropout(Tensor input, const DropoutFuncOptions& options = {});
Tensor dropout2d(Tensor input, const Dropout2dFuncOptions& options = {});
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});
// padding_idx: that row's lookups still read it, but it gets no gradient (PyTorch's).
class EmbeddingFuncOptions {
  SLOTH_NN_ARG(std::optional<int64_t>, padding_idx);
};
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});
// num_classes -1: the largest index + 1 (reads the indices: a sync, as in PyTorch).
Tensor one_hot(const Tensor& tensor, int64_t num_classes = -1);

// ---- normalization ----
class LayerNormFuncOptions {
 public:
  LayerNormFuncOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  SLOTH_NN_ARG(Shape, normalized_shape);
  SLOTH_NN_ARG(Tensor, weight) = {};
  SLOTH_NN_ARG(Tensor, bias) = {};
  SLOTH_NN_ARG(double, eps) = 1e-5;
};
class GroupNormFuncOptions {
 public:
  GroupNormFuncOptions(int64_t num_groups) : num_groups_(num_groups) {}  // NOLINT
  SLOTH_NN_ARG(int64_t, num_groups);
  SLOTH_NN_ARG(Tensor, weight) = {};
  SLOTH_NN_ARG(Tensor, bias) = {};
  SLOTH_NN_ARG(double, eps) = 1e-5;
};
class BatchNormFuncOptions {
  SLOTH_NN_ARG(Tensor, weight) = {};
  SLOTH_NN_ARG(Tensor, bias) = {};
  SLOTH_NN_ARG(bool, training) = false;
  SLOTH_NN_ARG(std::optional<double>, momentum) = 0.1;  // nullopt: needs nn::BatchNorm's count
  SLOTH_NN_ARG(double, eps) = 1e-5;
};
// x / max(||x||_p over dim, eps).
class NormalizeFuncOptions {
  SLOTH_NN_ARG(double, p) = 2.0;
  SLOTH_NN_ARG(int64_t, dim) = 1;
  SLOTH_NN_ARG(double, eps) = 1e-12;
};
Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options);
Tensor group_norm(const Tensor& input, const GroupNormFuncOptions& options);
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options = {});
Tensor normalize(const Tensor& input, const NormalizeFuncOptions& options = {});

// ---- convolution, pooling, fold ----
// padding: sizes, or "same" / "valid" (LibTorch's kSame / kValid).
template <size_t D>
class ConvFuncOptions {
 public:
  auto& padding(Ints v) { padding_ = std::move(v); padding_mode_.clear(); return *this; }
  auto& padding(const char* mode) { padding_mode_ = mode; return *this; }
  const Ints& padding() const { return padding_; }
  const std::string& padding_mode_string() const { return padding_mode_; }  // "" = explicit
  SLOTH_NN_ARG(Tensor, bias) = {};
  SLOTH_NN_ARG(Ints, stride) = 1;
  SLOTH_NN_ARG(Ints, dilation) = 1;
  SLOTH_NN_ARG(int64_t, groups) = 1;

 private:
  Ints padding_ = 0;
  std::string padding_mode_;
};
using Conv1dFuncOptions = ConvFuncOptions<1>;
using Conv2dFuncOptions = ConvFuncOptions<2>;
class ConvTranspose2dFuncOptions {
  SLOTH_NN_ARG(Tensor, bias) = {};
  SLOTH_NN_ARG(Ints, stride) = 1;
  SLOTH_NN_ARG(Ints, padding) = 0;
  SLOTH_NN_ARG(Ints, output_padding) = 0;
  SLOTH_NN_ARG(int64_t, groups) = 1;
  SLOTH_NN_ARG(Ints, dilation) = 1;
};
Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options = {});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& options = {});

using MaxPool2dFuncOptions = MaxPool2dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
using AdaptiveAvgPool2dFuncOptions = AdaptiveAvgPool2dOptions;
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                   const MaxPool2dFuncOptions& options);
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& options);

class FoldFuncOptions {
 public:
  FoldFuncOptions(Ints output_size, Ints kernel_size)
      : output_size_(std::move(output_size)), kernel_size_(std::move(kernel_size)) {}
  SLOTH_NN_ARG(Ints, output_size);
  SLOTH_NN_ARG(Ints, kernel_size);
  SLOTH_NN_ARG(Ints, dilation) = 1;
  SLOTH_NN_ARG(Ints, padding) = 0;
  SLOTH_NN_ARG(Ints, stride) = 1;
};
class UnfoldFuncOptions {
 public:
  UnfoldFuncOptions(Ints kernel_size) : kernel_size_(std::move(kernel_size)) {}  // NOLINT
  SLOTH_NN_ARG(Ints, kernel_size);
  SLOTH_NN_ARG(Ints, dilation) = 1;
  SLOTH_NN_ARG(Ints, padding) = 0;
  SLOTH_NN_ARG(Ints, stride) = 1;
};
Tensor fold(const Tensor& input, const FoldFuncOptions& options);
Tensor unfold(const Tensor& input, const UnfoldFuncOptions& options);

// ---- padding ----
// pad: (left, right) pairs from the last dim backwards; negative sizes crop. Constant pads
// any dims; reflect, replicate and circular pad the last 1-3 dims of a batched input
// (PyTorch's rule), reflect needs each pad < that dim's size, circular <= it.
class PadFuncOptions {
 public:
  PadFuncOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}  // NOLINT
  SLOTH_NN_ARG(std::vector<int64_t>, pad);
  SLOTH_NN_ARG(PadMode, mode) = kConstant;
  SLOTH_NN_ARG(double, value) = 0;
};
Tensor pad(const Tensor& input, const PadFuncOptions& options);

// ---- losses ----
using MSELossFuncOptions = MSELossOptions;
using L1LossFuncOptions = L1LossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
using HuberLossFuncOptions = HuberLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
// PyTorch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss.
class BinaryCrossEntropyFuncOptions {
 public:
  BinaryCrossEntropyFuncOptions(Reduction reduction = kMean) : reduction_(reduction) {}  // NOLINT
  SLOTH_NN_ARG(Reduction, reduction);
  SLOTH_NN_ARG(Tensor, weight) = {};
};
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options = {});
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});
// beta: LibTorch 1.13 reads only the trailing argument (it ignores the options' beta); here
// the trailing argument wins when it is not 1, else the options' beta counts.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const SmoothL1LossFuncOptions& options = {}, double beta = 1.0);
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossFuncOptions& options = {});
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options = {});
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyFuncOptions& options = {});
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options = {});
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options = {});
// F::kl_div(log_probs, target, F::KLDivFuncOptions().reduction(kBatchMean)).
using KLDivFuncOptions = KLDivLossOptions;
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& options = {});

}  // namespace sloth::nn::functional
