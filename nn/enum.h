// LibTorch's enum spellings (torch::kReLU, torch::kLinear, torch::kFanOut, ...). LibTorch
// gives each its own tag type, so one spelling serves every option that takes it:
// torch::kReLU is an RNN nonlinearity and a gain for nn::init, torch::kLinear an interpolation
// mode and a gain. Here a spelling that more than one option takes is a tag converting to
// each of their enums; the others are plain enum constants.
#pragma once

#include <cstdint>

namespace sloth {

// RNN's nonlinearity (RNNOptions::nonlinearity).
enum class RNNNonlinearity : uint8_t { kTanh, kReLU };
// F::interpolate's and nn::Upsample's mode.
enum class InterpolateMode : uint8_t {
  kNearest, kLinear, kBilinear, kBicubic, kTrilinear, kArea, kNearestExact };
// nn::init::calculate_gain's nonlinearity.
enum class Nonlinearity : uint8_t {
  kLinear, kConv1D, kConv2D, kConv3D, kConvTranspose1D, kConvTranspose2D, kConvTranspose3D,
  kSigmoid, kTanh, kReLU, kLeakyReLU };
// nn::init::kaiming_*'s fan.
enum class FanMode : uint8_t { kFanIn, kFanOut };

struct LinearTag {
  constexpr operator InterpolateMode() const { return InterpolateMode::kLinear; }  // NOLINT
  constexpr operator Nonlinearity() const { return Nonlinearity::kLinear; }        // NOLINT
};
struct TanhTag {
  constexpr operator RNNNonlinearity() const { return RNNNonlinearity::kTanh; }  // NOLINT
  constexpr operator Nonlinearity() const { return Nonlinearity::kTanh; }        // NOLINT
};
struct ReLUTag {
  constexpr operator RNNNonlinearity() const { return RNNNonlinearity::kReLU; }  // NOLINT
  constexpr operator Nonlinearity() const { return Nonlinearity::kReLU; }        // NOLINT
};
inline constexpr LinearTag kLinear{};
inline constexpr TanhTag kTanh{};
inline constexpr ReLUTag kReLU{};

inline constexpr InterpolateMode kNearest = InterpolateMode::kNearest,
                                 kBilinear = InterpolateMode::kBilinear,
                                 kBicubic = InterpolateMode::kBicubic,
                                 kTrilinear = InterpolateMode::kTrilinear,
                                 kArea = InterpolateMode::kArea,
                                 kNearestExact = InterpolateMode::kNearestExact;
inline constexpr Nonlinearity kConv1D = Nonlinearity::kConv1D, kConv2D = Nonlinearity::kConv2D,
                              kConv3D = Nonlinearity::kConv3D,
                              kConvTranspose1D = Nonlinearity::kConvTranspose1D,
                              kConvTranspose2D = Nonlinearity::kConvTranspose2D,
                              kConvTranspose3D = Nonlinearity::kConvTranspose3D,
                              kSigmoid = Nonlinearity::kSigmoid,
                              kLeakyReLU = Nonlinearity::kLeakyReLU;
inline constexpr FanMode kFanIn = FanMode::kFanIn, kFanOut = FanMode::kFanOut;

}  // namespace sloth
