// Resampling as LibTorch has it: F::interpolate and the nn::Upsample module.
//
// Each spatial dim is resampled on its own (PyTorch's kernels are separable too): an output
// position reads a few input positions ("taps") with weights that depend only on its index,
// so a dim's resampling is a weighted sum of index_selects, and autograd and fusion handle it
// like any other ops. The indices and weights follow PyTorch 1.13's CPU kernels, including
// computing them in float for float32 inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nn/enum.h"  // InterpolateMode: torch::kNearest, kBilinear, ...
#include "nn/holder.h"
#include "nn/module.h"

namespace sloth {

const char* interpolate_mode_name(InterpolateMode mode);  // "kNearest", as LibTorch prints it

}  // namespace sloth

namespace sloth::nn {

namespace functional {
// Exactly one of size and scale_factor; each has one value per spatial dim (or one for all).
// align_corners only for the linear and cubic modes. recompute_scale_factor: compute the
// kernel's scale from the sizes rather than from scale_factor (they differ when the scaled
// size is not an integer). antialias is not provided.
class InterpolateFuncOptions {
 public:
  auto& size(std::vector<int64_t> v) { size_ = std::move(v); return *this; }
  auto& size(std::optional<std::vector<int64_t>> v) { size_ = std::move(v); return *this; }
  const std::optional<std::vector<int64_t>>& size() const { return size_; }
  auto& scale_factor(std::vector<double> v) { scale_factor_ = std::move(v); return *this; }
  auto& scale_factor(std::optional<std::vector<double>> v) { scale_factor_ = std::move(v); return *this; }
  const std::optional<std::vector<double>>& scale_factor() const { return scale_factor_; }
  SLOTH_NN_ARG(InterpolateMode, mode) = kNearest;
  SLOTH_NN_ARG(std::optional<bool>, align_corners) = std::nullopt;
  SLOTH_NN_ARG(std::optional<bool>, recompute_scale_factor) = std::nullopt;
  SLOTH_NN_ARG(bool, antialias) = false;

 private:
  std::optional<std::vector<int64_t>> size_;
  std::optional<std::vector<double>> scale_factor_;
};
// input: [N, C, d1, ...] with 1-3 spatial dims (linear: 1, bilinear and bicubic: 2,
// trilinear: 3; nearest, nearest-exact and area: any of them).
Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});
}  // namespace functional

// nn::Upsample(UpsampleOptions().scale_factor({2, 2}).mode(kBilinear).align_corners(false)).
class UpsampleOptions {
 public:
  auto& size(std::vector<int64_t> v) { size_ = std::move(v); return *this; }
  auto& size(std::optional<std::vector<int64_t>> v) { size_ = std::move(v); return *this; }
  const std::optional<std::vector<int64_t>>& size() const { return size_; }
  auto& scale_factor(std::vector<double> v) { scale_factor_ = std::move(v); return *this; }
  auto& scale_factor(std::optional<std::vector<double>> v) { scale_factor_ = std::move(v); return *this; }
  const std::optional<std::vector<double>>& scale_factor() const { return scale_factor_; }
  SLOTH_NN_ARG(InterpolateMode, mode) = kNearest;
  SLOTH_NN_ARG(std::optional<bool>, align_corners) = std::nullopt;

 private:
  std::optional<std::vector<int64_t>> size_;
  std::optional<std::vector<double>> scale_factor_;
};

class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options = {});
  Tensor forward(const Tensor& input);
  UpsampleOptions options;
 protected:
  std::string extra_repr() const override;
};
SLOTH_MODULE(Upsample);

}  // namespace sloth::nn
