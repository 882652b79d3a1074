#include "nn/upsampling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/error.h"
#include "core/shape.h"

namespace sloth {

const char* interpolate_mode_name(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::kNearest: return "kNearest";
    case InterpolateMode::kLinear: return "kLinear";
    case InterpolateMode::kBilinear: return "kBilinear";
    case InterpolateMode::kBicubic: return "kBicubic";
    case InterpolateMode::kTrilinear: return "kTrilinear";
    case InterpolateMode::kArea: return "kArea";
    case InterpolateMode::kNearestExact: return "kNearestExact";
  }
  return "?";
}

}  // namespace sloth

namespace sloth::nn::functional {
namespace {

const char* mode_word(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::kNearest: return "nearest";
    case InterpolateMode::kLinear: return "linear";
    case InterpolateMode::kBilinear: return "bilinear";
    case InterpolateMode::kBicubic: return "bicubic";
    case InterpolateMode::kTrilinear: return "trilinear";
    case InterpolateMode::kArea: return "area";
    case InterpolateMode::kNearestExact: return "nearest-exact";
  }
  return "?";
}

// How one output position along a dim reads the input: tap k reads index[k][o] with weight
// weight[k][o] (no weights: each tap reads with weight 1).
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
};

// PyTorch's compute_scales_value: the given scale's inverse, or the size ratio.
template <typename Acc>
Acc scale_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? static_cast<Acc>(1.0 / *scale)
                             : static_cast<Acc>(in) / static_cast<Acc>(out);
}

// PyTorch's nearest_idx / nearest-exact index, always computed in float as its kernels do.
Taps nearest_taps(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  Taps t;
  t.index.emplace_back(out);
  const float s = scale_value<float>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) {
      i = static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * s));
    } else if (out == in) {
      i = o;
    } else if (out == 2 * in) {
      i = o >> 1;
    } else {
      i = static_cast<int64_t>(std::floor(static_cast<float>(o) * s));
    }
    t.index[0][o] = std::min(i, in - 1);
  }
  return t;
}

// The source coordinate of output o (PyTorch's area_pixel_compute_scale/_source_index).
template <typename Acc>
Acc source_coordinate(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                      int64_t o, bool cubic) {
  if (align_corners) {
    const Acc s = out > 1 ? static_cast<Acc>(in - 1) / static_cast<Acc>(out - 1) : Acc(0);
    return s * static_cast<Acc>(o);
  }
  const Acc s = scale_value<Acc>(scale, in, out);
  const Acc src = s * (static_cast<Acc>(o) + Acc(0.5)) - Acc(0.5);
  return !cubic && src < 0 ? Acc(0) : src;
}

template <typename Acc>
Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps t;
  t.index.assign(2, std::vector<int64_t>(out));
  t.weight.assign(2, std::vector<double>(out));
  for (int64_t o = 0; o < out; ++o) {
    const Acc src = source_coordinate<Acc>(in, out, align_corners, scale, o, false);
    const int64_t i0 = static_cast<int64_t>(src);
    const Acc l1 = src - static_cast<Acc>(i0);
    t.index[0][o] = i0;
    t.index[1][o] = i0 + (i0 < in - 1 ? 1 : 0);
    t.weight[0][o] = static_cast<double>(Acc(1) - l1);
    t.weight[1][o] = static_cast<double>(l1);
  }
  return t;
}

// Keys' cubic convolution with A = -0.75, as PyTorch's upsample_bicubic2d.
template <typename Acc>
Taps cubic_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  constexpr Acc A = Acc(-0.75);
  const auto near = [&](Acc x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };  // |x| <= 1
  const auto far = [&](Acc x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  Taps t;
  t.index.assign(4, std::vector<int64_t>(out));
  t.weight.assign(4, std::vector<double>(out));
  for (int64_t o = 0; o < out; ++o) {
    const Acc src = source_coordinate<Acc>(in, out, align_corners, scale, o, true);
    const Acc fl = std::floor(src);
    const int64_t i = static_cast<int64_t>(fl);
    const Acc x = src - fl;
    const Acc w[4] = {far(x + 1), near(x), near(1 - x), far(2 - x)};
    for (int k = 0; k < 4; ++k) {
      t.index[k][o] = std::clamp<int64_t>(i - 1 + k, 0, in - 1);
      t.weight[k][o] = static_cast<double>(w[k]);
    }
  }
  return t;
}

// adaptive_avg_pool's windows: [floor(o * in / out), ceil((o + 1) * in / out)).
Taps area_taps(int64_t in, int64_t out) {
  int64_t widest = 0;
  for (int64_t o = 0; o < out; ++o)
    widest = std::max(widest, ((o + 1) * in + out - 1) / out - (o * in) / out);
  Taps t;
  t.index.assign(widest, std::vector<int64_t>(out));
  t.weight.assign(widest, std::vector<double>(out, 0.0));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t k = 0; k < widest; ++k) {
      t.index[k][o] = k < end - start ? start + k : start;  // padding taps weigh 0
      if (k < end - start) t.weight[k][o] = 1.0 / static_cast<double>(end - start);
    }
  }
  return t;
}

bool is_identity(const Taps& t, int64_t in) {
  const int64_t out = static_cast<int64_t>(t.index[0].size());
  if (out != in) return false;
  for (int64_t o = 0; o < out; ++o) {
    if (t.index[0][o] != o) return false;
    if (!t.weight.empty() && t.weight[0][o] != 1.0) return false;
    for (size_t k = 1; k < t.weight.size(); ++k)
      if (t.weight[k][o] != 0.0) return false;
  }
  return true;
}

// Resamples dim `dim` of x: the weighted sum of one index_select per tap.
Tensor resample(const Tensor& x, int64_t dim, const Taps& t) {
  const int64_t out = static_cast<int64_t>(t.index[0].size());
  Shape weight_shape(x.dim() - dim, 1);
  weight_shape[0] = out;
  Tensor result;
  for (size_t k = 0; k < t.index.size(); ++k) {
    Tensor term = x.index_select(dim, from_vector(t.index[k], {out}, kInt64));
    if (!t.weight.empty()) term = term * tensor(t.weight[k], weight_shape, x.dtype());
    result = k == 0 ? term : result + term;
  }
  return result;
}

int64_t spatial_dims_for(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::kLinear: return 1;
    case InterpolateMode::kBilinear: case InterpolateMode::kBicubic: return 2;
    case InterpolateMode::kTrilinear: return 3;
    default: return 0;  // any
  }
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options) {
  const InterpolateMode mode = options.mode();
  const int64_t rank = input.dim();
  if (rank < 3 || rank > 5)
    fail("F::interpolate: expected a 3-D, 4-D or 5-D input [N, C, spatial...], got %s (add a "
         "batch dim with unsqueeze(0) for a single sample)", shape_str(input.shape()));
  const int64_t spatial = rank - 2;
  if (const int64_t needs = spatial_dims_for(mode); needs != 0 && needs != spatial)
    fail("F::interpolate: got a %d-D input %s, but %s mode needs a %d-D input (linear: 3-D, "
         "bilinear and bicubic: 4-D, trilinear: 5-D)", rank, shape_str(input.shape()),
         mode_word(mode), needs + 2);
  const bool interpolating = spatial_dims_for(mode) != 0;
  if (options.align_corners() && !interpolating)
    fail("F::interpolate: align_corners option can only be set with the interpolating modes: "
         "linear | bilinear | bicubic | trilinear (mode is %s)", mode_word(mode));
  if (options.antialias())
    fail("F::interpolate: antialias=true is not provided by sloth; resize without it (or "
         "low-pass filter first, e.g. with avg_pool2d)");
  if (options.size().has_value() == options.scale_factor().has_value())
    fail(options.size() ? "F::interpolate: only one of size or scale_factor should be defined"
                        : "F::interpolate: either size or scale_factor should be defined");
  if (interpolating && !is_floating(input.dtype()))
    fail("F::interpolate: %s mode needs a floating-point input, got %s (convert it with "
         ".to(kFloat32))", mode_word(mode), dtype_name(input.dtype()));

  // Output sizes and the scales the kernels see (PyTorch's _interp_output_size).
  std::vector<int64_t> out(spatial);
  std::vector<std::optional<double>> scales(spatial);
  if (const auto& size = options.size()) {
    if (static_cast<int64_t>(size->size()) != spatial && size->size() != 1)
      fail("F::interpolate: size shape must match input shape. Input is %dD, size is %d "
           "(give one size per spatial dim of %s)", spatial, size->size(),
           shape_str(input.shape()));
    for (int64_t d = 0; d < spatial; ++d) out[d] = (*size)[size->size() == 1 ? 0 : d];
  } else {
    const auto& sf = *options.scale_factor();
    if (static_cast<int64_t>(sf.size()) != spatial && sf.size() != 1)
      fail("F::interpolate: scale_factor shape must match input shape. Input is %dD, "
           "scale_factor is %d (give one factor per spatial dim of %s)", spatial, sf.size(),
           shape_str(input.shape()));
    const bool recompute = options.recompute_scale_factor().value_or(false);
    for (int64_t d = 0; d < spatial; ++d) {
      const double f = sf[sf.size() == 1 ? 0 : d];
      out[d] = static_cast<int64_t>(std::floor(static_cast<double>(input.size(d + 2)) * f));
      if (!recompute) scales[d] = f;
    }
  }
  for (int64_t d = 0; d < spatial; ++d)
    if (out[d] <= 0 || input.size(d + 2) <= 0)
      fail("F::interpolate: input and output sizes should be greater than 0, but got input %s "
           "and output spatial size [%s]", shape_str(input.shape()), absl::StrJoin(out, ", "));

  const bool align = options.align_corners().value_or(false);
  const bool f32 = input.dtype() == kFloat32;
  Tensor x = input;
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = input.size(d + 2);
    Taps taps;
    switch (mode) {
      case InterpolateMode::kNearest: taps = nearest_taps(in, out[d], scales[d], false); break;
      case InterpolateMode::kNearestExact: taps = nearest_taps(in, out[d], scales[d], true); break;
      case InterpolateMode::kArea: taps = area_taps(in, out[d]); break;
      case InterpolateMode::kBicubic:
        taps = f32 ? cubic_taps<float>(in, out[d], align, scales[d])
                   : cubic_taps<double>(in, out[d], align, scales[d]);
        break;
      default:
        taps = f32 ? linear_taps<float>(in, out[d], align, scales[d])
                   : linear_taps<double>(in, out[d], align, scales[d]);
    }
    if (!is_identity(taps, in)) x = resample(x, d + 2, taps);
  }
  return x;
}

}  // namespace sloth::nn::functional

namespace sloth::nn {

UpsampleImpl::UpsampleImpl(const UpsampleOptions& options)
    : Module("Upsample"), options(options) {}

Tensor UpsampleImpl::forward(const Tensor& input) {
  return functional::interpolate(input, functional::InterpolateFuncOptions()
                                            .size(options.size())
                                            .scale_factor(options.scale_factor())
                                            .mode(options.mode())
                                            .align_corners(options.align_corners()));
}

std::string UpsampleImpl::extra_repr() const {
  const std::string what =
      options.scale_factor()
          ? absl::StrFormat("scale_factor=[%s]", absl::StrJoin(*options.scale_factor(), ", "))
          : absl::StrFormat("size=[%s]", absl::StrJoin(options.size().value_or(
                                                             std::vector<int64_t>{}), ", "));
  return absl::StrFormat("%s, mode=%s", what, interpolate_mode_name(options.mode()));
}

}  // namespace sloth::nn
