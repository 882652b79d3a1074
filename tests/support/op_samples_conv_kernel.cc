// Sample inputs of conv2d's dedicated kernels (ConvForward, ConvInputGrad, ConvWeightGrad):
// stride, padding, dilation, "same"'s extra bottom/right padding, a 1x1 window read in place,
// bias or none, batch 1 and 2, float32 and float64. Small (at most 64 elements per operand):
// gradcheck runs second order.
#include "core/op_attrs.h"
#include "tests/support/op_samples_util.h"

namespace sloth::samples {
namespace {

// kh, kw, dh, dw, ph, pw, sh, sw, eh, ew
WindowAttrs win(AttrDims g, AttrDims out = {}) {
  WindowAttrs a;
  a.geom = std::move(g);
  a.output_size = std::move(out);
  return a;
}

}  // namespace

void conv_kernel_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kConvForward:
      b.add("pad1_stride2_bias", {b.T({2, 2, 5, 3}), b.T({3, 2, 3, 3}), b.T({3})},
            win({3, 3, 1, 1, 1, 1, 2, 2, 0, 0}));
      b.add("dilation_f64", {b.T({1, 2, 5, 6}, f64), b.T({2, 2, 2, 2}, f64)},
            win({2, 2, 2, 1, 0, 1, 1, 2, 0, 0}));
      b.add("same_extra_pad_bias_f64", {b.T({1, 1, 4, 3}, f64), b.T({2, 1, 2, 2}, f64), b.T({2}, f64)},
            win({2, 2, 1, 1, 0, 0, 1, 1, 1, 1}));
      b.add("pointwise_bias", {b.T({2, 3, 2, 3}), b.T({2, 3, 1, 1}), b.T({2})},
            win({1, 1, 1, 1, 0, 0, 1, 1, 0, 0}));
      return;
    case OpId::kConvInputGrad:
      b.add("pad1_stride2_odd", {b.T({2, 3, 3, 3}), b.T({3, 2, 3, 3})},
            win({3, 3, 1, 1, 1, 1, 2, 2, 0, 0}, {6, 6}));
      b.add("dilation_f64", {b.T({1, 2, 3, 4}, f64), b.T({2, 2, 2, 2}, f64)},
            win({2, 2, 2, 1, 0, 1, 1, 2, 0, 0}, {5, 6}));
      b.add("pointwise", {b.T({2, 2, 2, 3}), b.T({2, 3, 1, 1})},
            win({1, 1, 1, 1, 0, 0, 1, 1, 0, 0}, {2, 3}));
      return;
    case OpId::kConvWeightGrad:
      b.add("pad1_stride2_odd", {b.T({1, 3, 3, 3}), b.T({1, 2, 5, 6})},
            win({3, 3, 1, 1, 1, 1, 2, 2, 0, 0}));
      b.add("same_extra_pad_f64", {b.T({1, 2, 4, 3}, f64), b.T({1, 1, 4, 3}, f64)},
            win({2, 2, 1, 1, 0, 0, 1, 1, 1, 1}));
      b.add("pointwise", {b.T({2, 2, 2, 3}), b.T({2, 3, 2, 3})},
            win({1, 1, 1, 1, 0, 0, 1, 1, 0, 0}));
      return;
    default:
      return;
  }
}

}  // namespace sloth::samples
