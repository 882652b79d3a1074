// Sample inputs of convolution and pooling: Unfold, Fold (Kernel ops) and the Conv/Pool
// composites. Small shapes (gradcheck runs second order on each), covering stride, padding,
// dilation, groups, "same", output_padding, ceil_mode, unbatched inputs and float64.
#include "core/op_attrs.h"
#include "tests/support/op_samples_util.h"

namespace sloth::samples {
namespace {

// kh, kw, dh, dw, ph, pw, sh, sw, eh, ew
WindowAttrs win(AttrDims g, AttrDims out = {}, double pad = 0, bool batch_inner = false,
                int64_t extra_row = 0) {
  WindowAttrs a;
  a.batch_inner = batch_inner;
  a.extra_row = extra_row;
  a.geom = std::move(g);
  a.output_size = std::move(out);
  a.pad_value = pad;
  return a;
}
ConvAttrs conv(AttrDims params, int64_t groups = 1, bool same = false) {
  return ConvAttrs{.params = std::move(params), .groups = groups, .same = same};
}
PoolAttrs pool(AttrDims params, bool ceil = false, bool exclude_pad = false, int64_t div = 0) {
  return PoolAttrs{.params = std::move(params), .ceil_mode = ceil, .exclude_pad = exclude_pad,
                   .divisor_override = div};
}

}  // namespace

void conv_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kUnfold:
      b.add("k2x3_pad_stride", {b.T({1, 2, 4, 5})}, win({2, 3, 1, 1, 1, 0, 2, 1, 0, 0}));
      b.add("dilation_f64", {b.T({1, 2, 5, 5}, f64)}, win({2, 2, 2, 1, 1, 1, 1, 2, 0, 0}));
      b.add("unbatched", {b.T({2, 3, 4})}, win({2, 2, 1, 1, 0, 1, 1, 1, 0, 0}));
      b.add("batch_inner", {b.T({2, 2, 3, 3})}, win({2, 2, 1, 1, 1, 0, 1, 2, 0, 0}, {}, 0, true));
      b.add("batch_inner_ones_row_f64", {b.T({2, 1, 3, 3}, f64)}, win({2, 2, 1, 1, 0, 0, 1, 1, 0, 0}, {}, 0, true, 1));
      b.add("ones_row_per_sample", {b.T({2, 1, 3, 3})}, win({2, 2, 1, 1, 0, 1, 1, 1, 0, 0}, {}, 0, false, 1));
      b.add("extra_pad_value", {b.T({1, 1, 5, 5}, f64)}, win({3, 3, 1, 1, 1, 1, 2, 2, 1, 1}, {}, 0.5));
      return;
    case OpId::kFold:
      b.add("k2x3_pad_stride", {b.T({1, 6, 9})}, win({2, 3, 1, 1, 1, 0, 2, 1, 0, 0}, {4, 5}));
      b.add("dilation_f64", {b.T({1, 4, 15}, f64)}, win({2, 2, 2, 1, 1, 1, 1, 2, 0, 0}, {5, 5}));
      b.add("batch_inner", {b.T({8, 8})}, win({2, 2, 1, 1, 1, 0, 1, 2, 0, 0}, {3, 3}, 0, true));
      b.add("batch_inner_extra_row_f64", {b.T({5, 8}, f64)}, win({2, 2, 1, 1, 0, 0, 1, 1, 0, 0}, {3, 3}, 0, true, 2));
      b.add("extra_row_per_sample", {b.T({2, 5, 4})}, win({2, 2, 1, 1, 0, 0, 1, 1, 0, 0}, {3, 3}, 0, false, 2));
      b.add("unbatched", {b.T({4, 10})}, win({2, 2, 1, 1, 0, 1, 1, 1, 0, 0}, {3, 4}));
      return;
    case OpId::kConv2d:
      b.add("pad1_bias", {b.T({1, 2, 4, 4}), b.T({3, 2, 3, 3}), b.T({3})}, conv({1, 1, 1, 1, 1, 1, 0, 0}));
      b.add("stride_dilation_groups_f64", {b.T({1, 2, 5, 6}, f64), b.T({2, 1, 2, 3}, f64), b.T({2}, f64)},
            conv({2, 1, 1, 0, 1, 2, 0, 0}, 2));
      b.add("same_even_kernel", {b.T({1, 2, 4, 4}), b.T({3, 2, 2, 2})}, conv({1, 1, 0, 0, 1, 1, 0, 0}, 1, true));
      b.add("unbatched", {b.T({2, 4, 4}), b.T({2, 2, 3, 3})}, conv({1, 2, 0, 1, 1, 1, 0, 0}));
      b.add("pointwise", {b.T({2, 3, 3, 3}), b.T({4, 3, 1, 1}), b.T({4})}, conv({1, 1, 0, 0, 1, 1, 0, 0}));
      return;
    case OpId::kConv1d:
      b.add("stride2_pad1_bias", {b.T({2, 3, 7}), b.T({4, 3, 3}), b.T({4})}, conv({2, 1, 1, 0}));
      b.add("same_dilated_f64", {b.T({1, 2, 6}, f64), b.T({2, 2, 3}, f64)}, conv({1, 0, 2, 0}, 1, true));
      b.add("unbatched_groups", {b.T({4, 5}), b.T({2, 2, 2})}, conv({1, 0, 1, 0}, 2));
      return;
    case OpId::kConvTranspose2d:
      b.add("stride2_outpad1_bias", {b.T({1, 2, 3, 3}), b.T({2, 3, 3, 3}), b.T({3})},
            conv({2, 2, 1, 1, 1, 1, 1, 1}));
      b.add("groups_dilation_f64", {b.T({1, 4, 3, 2}, f64), b.T({4, 1, 2, 2}, f64)},
            conv({1, 2, 0, 1, 2, 1, 1, 0}, 2));
      b.add("unbatched", {b.T({2, 2, 3}), b.T({2, 2, 2, 2})}, conv({1, 1, 0, 0, 1, 1, 0, 0}));
      return;
    case OpId::kMaxPool2d:
      b.add("k2s2", {b.Distinct({1, 2, 4, 5})}, pool({2, 2, 2, 2, 0, 0, 1, 1}));
      b.add("k3s2_pad1_ceil", {b.Distinct({1, 1, 6, 6})}, pool({3, 3, 2, 2, 1, 1, 1, 1}, true));
      b.add("dilation_f64", {b.Distinct({1, 1, 5, 6}, f64)}, pool({2, 2, 1, 2, 0, 1, 2, 1}));
      b.add("unbatched", {b.Distinct({2, 3, 3})}, pool({2, 2, 1, 1, 0, 0, 1, 1}));
      return;
    case OpId::kAvgPool2d:
      b.add("k3s2_pad1_ceil", {b.T({1, 1, 6, 6})}, pool({3, 3, 2, 2, 1, 1, 1, 1}, true));
      b.add("exclude_pad_f64", {b.T({2, 1, 5, 4}, f64)}, pool({3, 2, 2, 1, 1, 1, 1, 1}, true, true));
      b.add("divisor_override", {b.T({1, 2, 4, 4})}, pool({2, 2, 2, 2, 0, 0, 1, 1}, false, false, 3));
      b.add("unbatched", {b.T({2, 4, 4})}, pool({2, 2, 2, 2, 0, 0, 1, 1}));
      return;
    case OpId::kAdaptiveAvgPool2d: {
      Attrs uneven, even, global;
      uneven.dims = {3, 4};
      even.dims = {2, 3};
      global.dims = {1, 1};
      b.add("uneven", {b.T({1, 1, 5, 7})}, uneven);
      b.add("even", {b.T({1, 2, 4, 6})}, even);
      b.add("global_f64_unbatched", {b.T({2, 3, 3}, f64)}, global);
      return;
    }
    default:
      return;
  }
}

}  // namespace sloth::samples
