// Normalization modules with PyTorch's names, defaults, buffers and errors:
//   BatchNorm1d(C) on [N, C] or [N, C, L]; BatchNorm2d(C) on [N, C, H, W];
//   GroupNorm(num_groups, num_channels) on [N, C, *].
// BatchNorm's parameters are weight (ones) and bias (zeros) when affine; its buffers are
// running_mean (zeros), running_var (ones) and num_batches_tracked (int64 0) when
// track_running_stats, so a checkpoint holds "bn.weight", "bn.bias", "bn.running_mean",
// "bn.running_var", "bn.num_batches_tracked" like PyTorch's state_dict. In training the batch
// statistics normalize and the running statistics are updated in place inside the step graph
// (momentum = nullopt: the cumulative average 1 / num_batches_tracked, as PyTorch's None);
// in eval the running statistics normalize.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/module.h"

namespace sloth::nn {

// LibTorch's BatchNorm2d(BatchNorm2dOptions(64).momentum(0.01).affine(false)) and
// GroupNorm(GroupNormOptions(2, 8).eps(1e-3)).
class BatchNormOptions {
 public:
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  SLOTH_NN_ARG(int64_t, num_features);
  SLOTH_NN_ARG(double, eps) = 1e-5;
  SLOTH_NN_ARG(std::optional<double>, momentum) = 0.1;
  SLOTH_NN_ARG(bool, affine) = true;
  SLOTH_NN_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;
class GroupNormOptions {
 public:
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  SLOTH_NN_ARG(int64_t, num_groups);
  SLOTH_NN_ARG(int64_t, num_channels);
  SLOTH_NN_ARG(double, eps) = 1e-5;
  SLOTH_NN_ARG(bool, affine) = true;
};

class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor& weight;   // undefined without affine
  Tensor& bias;
  Tensor& running_mean;   // undefined without track_running_stats
  Tensor& running_var;
  Tensor& num_batches_tracked;

 protected:
  BatchNormBase(const char* name, int64_t num_features, double eps,
                std::optional<double> momentum, bool affine, bool track_running_stats);
  // Throws PyTorch's "expected 4D input (got 3D input)" for a wrong rank.
  virtual void check_input_dim(const Tensor& x) const = 0;
  std::string extra_repr() const override;
};

class BatchNorm1dImpl : public BatchNormBase {
 public:
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats) {}
  explicit BatchNorm1dImpl(const BatchNormOptions& o)
      : BatchNorm1dImpl(o.num_features(), o.eps(), o.momentum(), o.affine(),
                        o.track_running_stats()) {}
 protected:
  void check_input_dim(const Tensor& x) const override;
};

class BatchNorm2dImpl : public BatchNormBase {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}
  explicit BatchNorm2dImpl(const BatchNormOptions& o)
      : BatchNorm2dImpl(o.num_features(), o.eps(), o.momentum(), o.affine(),
                        o.track_running_stats()) {}
 protected:
  void check_input_dim(const Tensor& x) const override;
};

// weight (ones) and bias (zeros) of shape [num_channels] when affine.
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  explicit GroupNormImpl(const GroupNormOptions& o)
      : GroupNormImpl(o.num_groups(), o.num_channels(), o.eps(), o.affine()) {}
  Tensor forward(const Tensor& x) override;
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor& weight;
  Tensor& bias;
 protected:
  std::string extra_repr() const override;
};

// Holders (LibTorch's names) over the Impl classes above.
SLOTH_MODULE(BatchNorm1d);
SLOTH_MODULE(BatchNorm2d);
SLOTH_MODULE(GroupNorm);

}  // namespace sloth::nn
