// Activation modules with LibTorch's names and options, for Sequential and member modules:
//   nn::Sequential(nn::Linear(4, 8), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
//                  nn::Linear(8, 2), nn::LogSoftmax(1));
// Each forward is the functional form (nn/functional.h), so module and F:: agree by
// construction. The options are LibTorch's (F::LeakyReLUFuncOptions is nn::LeakyReLUOptions,
// as there); `inplace(true)` writes the module's input.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace sloth::nn {

// ---- options ----
class ReLUOptions {
 public:
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT: implicit, as LibTorch
  SLOTH_NN_ARG(bool, inplace);
};
using ReLU6Options = ReLUOptions;
using SELUOptions = ReLUOptions;
class LeakyReLUOptions {
  SLOTH_NN_ARG(double, negative_slope) = 1e-2;
  SLOTH_NN_ARG(bool, inplace) = false;
};
class ELUOptions {
  SLOTH_NN_ARG(double, alpha) = 1.0;
  SLOTH_NN_ARG(bool, inplace) = false;
};
using CELUOptions = ELUOptions;
class GELUOptions {
  SLOTH_NN_ARG(std::string, approximate) = "none";  // "none" (erf) or "tanh"
};
class HardtanhOptions {
  SLOTH_NN_ARG(double, min_val) = -1.0;
  SLOTH_NN_ARG(double, max_val) = 1.0;
  SLOTH_NN_ARG(bool, inplace) = false;
};
class SoftplusOptions {
  SLOTH_NN_ARG(double, beta) = 1.0;
  SLOTH_NN_ARG(double, threshold) = 20.0;
};
class HardshrinkOptions {
 public:
  HardshrinkOptions(double lambda = 0.5) : lambda_(lambda) {}  // NOLINT
  SLOTH_NN_ARG(double, lambda);
};
using SoftshrinkOptions = HardshrinkOptions;
class ThresholdOptions {
 public:
  ThresholdOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  SLOTH_NN_ARG(double, threshold);
  SLOTH_NN_ARG(double, value);
  SLOTH_NN_ARG(bool, inplace) = false;
};
class GLUOptions {
 public:
  GLUOptions(int64_t dim = -1) : dim_(dim) {}  // NOLINT
  SLOTH_NN_ARG(int64_t, dim);
};
// The dim is required, as LibTorch's modules.
class SoftmaxOptions {
 public:
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  SLOTH_NN_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;
using SoftminOptions = SoftmaxOptions;

// ---- modules ----
// A module whose forward is one function of its input and its options.
#define SLOTH_NN_ACTIVATION(Name, Options)                                    \
  class Name##Impl : public Module {                                          \
   public:                                                                    \
    explicit Name##Impl(const Options& options = {})                          \
        : Module(#Name), options(options) {}                                  \
    Tensor forward(const Tensor& x) override;                                 \
    Options options;                                                          \
   protected:                                                                 \
    std::string extra_repr() const override;                                  \
  };                                                                          \
  SLOTH_MODULE(Name)
// The same without options (and without a default-constructed options member).
#define SLOTH_NN_ACTIVATION_PLAIN(Name)                                       \
  class Name##Impl : public Module {                                          \
   public:                                                                    \
    Name##Impl() : Module(#Name) {}                                           \
    Tensor forward(const Tensor& x) override;                                 \
  };                                                                          \
  SLOTH_MODULE(Name)

SLOTH_NN_ACTIVATION(ReLU, ReLUOptions);
SLOTH_NN_ACTIVATION(ReLU6, ReLU6Options);
SLOTH_NN_ACTIVATION(SELU, SELUOptions);
SLOTH_NN_ACTIVATION(LeakyReLU, LeakyReLUOptions);
SLOTH_NN_ACTIVATION(ELU, ELUOptions);
SLOTH_NN_ACTIVATION(CELU, CELUOptions);
SLOTH_NN_ACTIVATION(GELU, GELUOptions);
SLOTH_NN_ACTIVATION(Hardtanh, HardtanhOptions);
SLOTH_NN_ACTIVATION(Softplus, SoftplusOptions);
SLOTH_NN_ACTIVATION(Hardshrink, HardshrinkOptions);
SLOTH_NN_ACTIVATION(Softshrink, SoftshrinkOptions);
SLOTH_NN_ACTIVATION(GLU, GLUOptions);
SLOTH_NN_ACTIVATION_PLAIN(Tanh);
SLOTH_NN_ACTIVATION_PLAIN(Sigmoid);
SLOTH_NN_ACTIVATION_PLAIN(SiLU);
SLOTH_NN_ACTIVATION_PLAIN(Mish);
SLOTH_NN_ACTIVATION_PLAIN(Softsign);
SLOTH_NN_ACTIVATION_PLAIN(Tanhshrink);
SLOTH_NN_ACTIVATION_PLAIN(LogSigmoid);
SLOTH_NN_ACTIVATION_PLAIN(Identity);
#undef SLOTH_NN_ACTIVATION_PLAIN
#undef SLOTH_NN_ACTIVATION

// The modules whose options have no default (a dim, a threshold): LibTorch's positional
// constructors too (nn::Softmax(1), nn::Threshold(0.1, 20)).
#define SLOTH_NN_DIM_ACTIVATION(Name)                                         \
  class Name##Impl : public Module {                                          \
   public:                                                                    \
    explicit Name##Impl(const SoftmaxOptions& options)                        \
        : Module(#Name), options(options) {}                                  \
    explicit Name##Impl(int64_t dim) : Name##Impl(SoftmaxOptions(dim)) {}     \
    Tensor forward(const Tensor& x) override;                                 \
    SoftmaxOptions options;                                                   \
   protected:                                                                 \
    std::string extra_repr() const override;                                  \
  };                                                                          \
  SLOTH_MODULE(Name)
SLOTH_NN_DIM_ACTIVATION(Softmax);
SLOTH_NN_DIM_ACTIVATION(LogSoftmax);
SLOTH_NN_DIM_ACTIVATION(Softmin);
#undef SLOTH_NN_DIM_ACTIVATION

class ThresholdImpl : public Module {
 public:
  explicit ThresholdImpl(const ThresholdOptions& options) : Module("Threshold"), options(options) {}
  ThresholdImpl(double threshold, double value) : ThresholdImpl(ThresholdOptions(threshold, value)) {}
  Tensor forward(const Tensor& x) override;
  ThresholdOptions options;
 protected:
  std::string extra_repr() const override;
};
SLOTH_MODULE(Threshold);

}  // namespace sloth::nn
