// Pooling modules, LibTorch style: MaxPool2d(MaxPool2dOptions(2).stride(2)) or MaxPool2d(2),
// AvgPool2d(AvgPool2dOptions(3).stride(2).padding(1)), AdaptiveAvgPool2d({1, 1}).
#pragma once

#include <cstdint>
#include <optional>

#include "nn/conv.h"
#include "nn/module.h"

namespace sloth::nn {

class MaxPool2dOptions {
 public:
  MaxPool2dOptions(Ints kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit
  SLOTH_NN_ARG(Ints, kernel_size);
  SLOTH_NN_ARG(std::optional<Ints>, stride);  // nullopt: = kernel_size
  SLOTH_NN_ARG(Ints, padding) = 0;
  SLOTH_NN_ARG(Ints, dilation) = 1;
  SLOTH_NN_ARG(bool, ceil_mode) = false;
};

class AvgPool2dOptions {
 public:
  AvgPool2dOptions(Ints kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit
  SLOTH_NN_ARG(Ints, kernel_size);
  SLOTH_NN_ARG(std::optional<Ints>, stride);
  SLOTH_NN_ARG(Ints, padding) = 0;
  SLOTH_NN_ARG(bool, ceil_mode) = false;
  SLOTH_NN_ARG(bool, count_include_pad) = true;
  SLOTH_NN_ARG(std::optional<int64_t>, divisor_override);
};

class AdaptiveAvgPool2dOptions {
 public:
  AdaptiveAvgPool2dOptions(Ints output_size) : output_size_(output_size) {}  // NOLINT
  SLOTH_NN_ARG(Ints, output_size);
};

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& options);
  explicit MaxPool2dImpl(Ints kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  Shape kernel_size, stride, padding, dilation;
  bool ceil_mode;
 protected:
  std::string extra_repr() const override;
};

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options);
  explicit AvgPool2dImpl(Ints kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  Shape kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
 protected:
  std::string extra_repr() const override;
};

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options);
  explicit AdaptiveAvgPool2dImpl(Ints output_size)
      : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  Shape output_size;
 protected:
  std::string extra_repr() const override;
};

// Holders (LibTorch's names) over the Impl classes above.
SLOTH_MODULE(MaxPool2d);
SLOTH_MODULE(AvgPool2d);
SLOTH_MODULE(AdaptiveAvgPool2d);

}  // namespace sloth::nn
