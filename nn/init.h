// LibTorch's torch::nn::init: in-place initializers for parameters, with PyTorch's formulas
// (fans, gains, bounds). Each runs under NoGradGuard (so it may write a parameter) and returns
// the tensor it filled. The samples come from sloth's generator (manual_seed), so the values
// differ from PyTorch's for the same seed; their distributions are PyTorch's.
#pragma once

#include <cstdint>
#include <tuple>

#include "nn/enum.h"  // Nonlinearity, FanMode: torch::kReLU, torch::kFanOut, ...
#include "sloth/sloth_core.h"

namespace sloth::nn::init {

// The recommended gain for a nonlinearity: 1 for linear, convolutions and sigmoid, 5/3 for
// tanh, sqrt(2) for relu, sqrt(2 / (1 + param^2)) for leaky relu (param: its negative slope).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (2+ dims).
std::tuple<int64_t, int64_t> _calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor constant_(Tensor tensor, Scalar value);
Tensor ones_(Tensor tensor);
Tensor zeros_(Tensor tensor);
Tensor uniform_(Tensor tensor, double low = 0, double high = 1);
Tensor normal_(Tensor tensor, double mean = 0, double std = 1);
// The identity matrix (2-D; rows != cols puts ones on the main diagonal).
Tensor eye_(Tensor matrix);
// Convolution weights [out, in / groups, k...] (3-5 dims) that pass their input through: ones
// at each kernel's centre for channel d of each group (d < min(out / groups, in)).
Tensor dirac_(Tensor tensor, int64_t groups = 1);
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); N(0, gain^2 * 2 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);
// std = calculate_gain(nonlinearity, a) / sqrt(fan); uniform: U(-sqrt(3) std, sqrt(3) std).
Tensor kaiming_uniform_(Tensor tensor, double a = 0, FanMode mode = kFanIn,
                        Nonlinearity nonlinearity = kLeakyReLU);
Tensor kaiming_normal_(Tensor tensor, double a = 0, FanMode mode = kFanIn,
                       Nonlinearity nonlinearity = kLeakyReLU);
// A (semi-)orthogonal matrix (the tensor viewed as [size(0), rest]) times gain: the Q of the
// QR decomposition of a standard normal sample, with R's diagonal made positive (PyTorch's).
Tensor orthogonal_(Tensor tensor, double gain = 1.0);
// 2-D: N(0, std) with ceil(sparsity * rows) entries of each column set to zero.
Tensor sparse_(Tensor tensor, double sparsity, double std = 0.01);

}  // namespace sloth::nn::init
