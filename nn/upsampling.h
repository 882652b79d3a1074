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
#include <utility>
#include <vector>

#include "nn/enum.h"  // InterpolateMode: torch::kNearest, kBilinear, ...
#include "nn/holder.h"
#include "nn/module.h"

namespace sloth {

const char* interpolate_mode_name(InterpolateMode mode);  // "kNearest", as LibTorch prints it

}  // namespace sloth

namespace sloth::nn {

// The output extent of a resampling, shared by F::interpolate's and nn::Upsample's options:
// a size or a scale factor per spatial dim (one value: the same for all). Each setter returns
// the options it is part of, so LibTorch's chains (.scale_factor({2, 2}).mode(...)) work.
template <class Options>
class ResampleTarget {
 public:
  Options& size(std::vector<int64_t> v) { size_ = std::move(v); return self(); }
  Options& size(std::optional<std::vector<int64_t>> v) { size_ = std::move(v); return self(); }
  const std::optional<std::vector<int64_t>>& size() const { return size_; }
  Options& scale_factor(std::vector<double> v) { scale_factor_ = std::move(v); return self(); }
  Options& scale_factor(std::optional<std::vector<double>> v) {
    scale_factor_ = std::move(v);
    return self();
  }
  const std::optional<std::vector<double>>& scale_factor() const { return scale_factor_; }

 private:
  Options& self() { return static_cast<Options&>(*this); }
  std::optional<std::vector<int64_t>> size_;
  std::optional<std::vector<double>> scale_factor_;
};

namespace functional {
// Exactly one of size and scale_factor; each has one value per spatial dim (or one for all).
// align_corners only for the linear and cubic modes. recompute_scale_factor: compute the
// kernel's scale from the sizes rather than from scale_factor (they differ when the scaled
// size is not an integer). antialias is not provided.
class InterpolateFuncOptions : public ResampleTarget<InterpolateFuncOptions> {
 public:
  SLOTH_NN_ARG(InterpolateMode, mode) = kNearest;
  SLOTH_NN_ARG(std::optional<bool>, align_corners) = std::nullopt;
  SLOTH_NN_ARG(std::optional<bool>, recompute_scale_factor) = std::nullopt;
  SLOTH_NN_ARG(bool, antialias) = false;
};
// input: [N, C, d1, ...] with 1-3 spatial dims (linear: 1, bilinear and bicubic: 2,
// trilinear: 3; nearest, nearest-exact and area: any of them).
Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});
}  // namespace functional

// nn::Upsample(UpsampleOptions().scale_factor({2, 2}).mode(kBilinear).align_corners(false)).
class UpsampleOptions : public ResampleTarget<UpsampleOptions> {
 public:
  SLOTH_NN_ARG(InterpolateMode, mode) = kNearest;
  SLOTH_NN_ARG(std::optional<bool>, align_corners) = std::nullopt;
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
