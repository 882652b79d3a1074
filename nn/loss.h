// Losses as LibTorch has them: functions with a Reduction (mean, sum, none) and the loss
// modules (nn::MSELoss, nn::CrossEntropyLoss, nn::NLLLoss, nn::BCEWithLogitsLoss,
// nn::L1Loss, nn::SmoothL1Loss, nn::HuberLoss, nn::BCELoss, nn::KLDivLoss), each a holder over its ...Impl with options
// built LibTorch's way (`nn::HuberLoss(nn::HuberLossOptions().delta(2).reduction(kSum))`).
// A loss module's forward takes (input, target). Input and target must have the same shape
// (PyTorch broadcasts them with a warning; sloth says which shapes differ instead).
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace sloth {

// LibTorch's torch::kMean / kSum / kNone.
inline constexpr Reduction kMean = Reduction::kMean, kSum = Reduction::kSum,
                           kNone = Reduction::kNone;

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = kMean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = kMean,
                      double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = kMean,
                  double delta = 1.0);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction);
// weight multiplies each element's loss (broadcast to the input); pos_weight [C] weighs the
// positive term of class c (PyTorch's formula); the mean is over all elements.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction, const Tensor& weight,
                                        const Tensor& pos_weight = {});

// -(t log p + (1 - t) log(1 - p)), each log clamped at -100 as PyTorch; weight multiplies
// each element's loss (broadcast to the input). torch::binary_cross_entropy.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = kMean);
// Pointwise KL divergence t (log t - input) for log-probabilities `input` (log_target: the
// target is given as log-probabilities too). torch::kl_div; 'batchmean' is F::kl_div's.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = kMean,
              bool log_target = false);

// LibTorch's torch::kBatchMean, a reduction only kl_div takes: the sum over the batch size.
struct BatchMean {};
inline constexpr BatchMean kBatchMean{};

}  // namespace sloth

namespace sloth::nn {

#define SLOTH_NN_LOSS_OPTIONS(Name)                                             \
  class Name##Options {                                                         \
   public:                                                                      \
    Name##Options(Reduction reduction = kMean) : reduction_(reduction) {}  /* NOLINT */ \
    SLOTH_NN_ARG(Reduction, reduction)

SLOTH_NN_LOSS_OPTIONS(MSELoss);
};
SLOTH_NN_LOSS_OPTIONS(L1Loss);
};
SLOTH_NN_LOSS_OPTIONS(BCEWithLogitsLoss);
  SLOTH_NN_ARG(Tensor, weight) = {};      // per element (broadcast)
  SLOTH_NN_ARG(Tensor, pos_weight) = {};  // per class (last dimension)
};
SLOTH_NN_LOSS_OPTIONS(SmoothL1Loss);
  SLOTH_NN_ARG(double, beta) = 1.0;
};
SLOTH_NN_LOSS_OPTIONS(HuberLoss);
  SLOTH_NN_ARG(double, delta) = 1.0;
};
SLOTH_NN_LOSS_OPTIONS(NLLLoss);
  SLOTH_NN_ARG(int64_t, ignore_index) = -100;
  SLOTH_NN_ARG(Tensor, weight) = {};  // per class [C]
};
SLOTH_NN_LOSS_OPTIONS(CrossEntropyLoss);
  SLOTH_NN_ARG(int64_t, ignore_index) = -100;
  SLOTH_NN_ARG(Tensor, weight) = {};  // per class [C]
  SLOTH_NN_ARG(double, label_smoothing) = 0.0;
};
SLOTH_NN_LOSS_OPTIONS(BCELoss);
  SLOTH_NN_ARG(Tensor, weight) = {};  // per element (broadcast)
};
#undef SLOTH_NN_LOSS_OPTIONS

// KLDivLoss's reduction is kMean, kSum, kNone or kBatchMean (LibTorch's variant).
class KLDivLossOptions {
 public:
  KLDivLossOptions(Reduction reduction = kMean) : reduction_(reduction) {}  // NOLINT
  KLDivLossOptions(BatchMean) : batch_mean_(true) {}                        // NOLINT
  auto& reduction(Reduction r) { reduction_ = r; batch_mean_ = false; return *this; }
  auto& reduction(BatchMean) { batch_mean_ = true; return *this; }
  Reduction reduction() const { return reduction_; }  // meaningless when batch_mean()
  bool batch_mean() const { return batch_mean_; }
  SLOTH_NN_ARG(bool, log_target) = false;

 private:
  Reduction reduction_ = kMean;
  bool batch_mean_ = false;
};

// The loss modules: options kept in `options`, forward(input, target).
#define SLOTH_NN_LOSS_MODULE(Name)                                               \
  class Name##Impl : public Module {                                             \
   public:                                                                       \
    explicit Name##Impl(const Name##Options& options = {})                       \
        : Module(#Name), options(options) {}                                     \
    Tensor forward(const Tensor& input, const Tensor& target);                   \
    Name##Options options;                                                       \
  };                                                                             \
  SLOTH_MODULE(Name)

SLOTH_NN_LOSS_MODULE(MSELoss);
SLOTH_NN_LOSS_MODULE(L1Loss);
SLOTH_NN_LOSS_MODULE(BCEWithLogitsLoss);
SLOTH_NN_LOSS_MODULE(SmoothL1Loss);
SLOTH_NN_LOSS_MODULE(HuberLoss);
SLOTH_NN_LOSS_MODULE(NLLLoss);
SLOTH_NN_LOSS_MODULE(CrossEntropyLoss);
SLOTH_NN_LOSS_MODULE(BCELoss);
SLOTH_NN_LOSS_MODULE(KLDivLoss);
#undef SLOTH_NN_LOSS_MODULE

}  // namespace sloth::nn
