// Sample inputs of the Kernel-category ops (core/ops.def).
#include "core/op_attrs.h"
#include "tests/support/op_samples_util.h"

namespace sloth::samples {

void kernel_samples(Builder& b, OpId op) {
  switch (op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: case OpId::kFold: conv_samples(b, op); return;
    // ---- attention and sequence ops ----
    case OpId::kSdpa: {
      const double s4 = 0.5, s3 = 1 / std::sqrt(3.0), s2 = 1 / std::sqrt(2.0);
      b.add("L3_S5", {b.T({2, 3, 4}), b.T({2, 5, 4}), b.T({2, 5, 3})}, SdpaAttrs{.scale = s4});
      b.add("causal_heads_f64", {b.T({1, 2, 4, 3}, f64), b.T({1, 2, 4, 3}, f64), b.T({1, 2, 4, 2}, f64)},
            SdpaAttrs{.scale = s3, .is_causal = true});
      b.add("causal_L4_S2", {b.T({4, 2}), b.T({2, 2}), b.T({2, 3})}, SdpaAttrs{.scale = s2, .is_causal = true});
      b.add("bool_mask_bcast", {b.T({2, 3, 2}), b.T({2, 4, 2}), b.T({2, 4, 2}),
             V({3, 4}, {1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0}, b8)}, SdpaAttrs{.scale = s2});
      b.add("float_mask_f64", {b.T({2, 3, 2}, f64), b.T({2, 3, 2}, f64), b.T({2, 3, 2}, f64),
             b.T({2, 3, 3}, f64)}, SdpaAttrs{.scale = s2});
      b.add("noncontig_2d", {b.T({3, 3}), b.T({3, 3}), b.T({3, 3})}, SdpaAttrs{.scale = s3}, {0, 1, 2});
      return;
    }
    case OpId::kCumsum:
      b.add("dim1_noncontig", {b.T({3, 4})}, DimAttrs{.dim = 1}, {0});
      b.add("dim0_f64", {b.T({2, 3, 4}, f64)}, DimAttrs{.dim = 0});
      b.add("neg_dim", {b.T({2, 5})}, DimAttrs{.dim = -1});
      b.add("i64", {b.T({6}, i64)}, DimAttrs{.dim = 0});
      b.add("bool_to_i64", {b.T({2, 3}, b8)}, DimAttrs{.dim = 1});
      b.add("0dim", {S(0.5)}, DimAttrs{.dim = 0});
      b.add("empty", {b.T({0, 3})}, DimAttrs{.dim = 0});
      return;
    case OpId::kArgsort:
      b.add("dim1_noncontig", {b.Distinct({3, 4})}, SortAttrs{.dim = 1}, {0});
      b.add("desc_dim0_f64", {b.Distinct({4, 3}, f64)}, SortAttrs{.dim = 0, .descending = true});
      b.add("ties_stable", {V({8}, {1, 3, 3, 2, 3, 1, 0, 3})}, SortAttrs{.dim = 0});
      b.add("ties_desc", {V({8}, {1, 3, 3, 2, 3, 1, 0, 3})}, SortAttrs{.dim = 0, .descending = true});
      b.add("i64", {b.T({2, 5}, i64)}, SortAttrs{.dim = -1});
      b.add("inf", {V({5}, {2, INFINITY, -INFINITY, 1, 0})}, SortAttrs{.dim = 0});
      return;
    case OpId::kTopk:
      b.add("k2_dim1", {b.Distinct({3, 5})}, TopkAttrs{.dim = 1, .k = 2, .sorted = true, .largest = true});
      b.add("smallest_dim0_f64", {b.Distinct({5, 2}, f64)}, TopkAttrs{.dim = 0, .k = 3, .sorted = true});
      b.add("partial_sort_path", {b.Distinct({1, 64})}, TopkAttrs{.dim = 1, .k = 1, .sorted = true, .largest = true});
      b.add("k0", {b.Distinct({4})}, TopkAttrs{.dim = 0, .k = 0, .sorted = true, .largest = true});
      b.add("i64_noncontig", {b.Distinct({4, 4}, i64)}, TopkAttrs{.dim = 0, .k = 4, .sorted = true, .largest = true}, {0});
      return;
    case OpId::kTril: case OpId::kTriu:
      b.add("square_noncontig", {b.T({4, 4})}, TriAttrs{}, {0});
      b.add("batch_f64_diag_m1", {b.T({2, 3, 4}, f64)}, TriAttrs{.diagonal = -1});
      b.add("wide_diag2", {b.T({3, 5})}, TriAttrs{.diagonal = 2});
      b.add("i64", {b.T({3, 3}, i64)}, TriAttrs{.diagonal = 1});
      b.add("bool", {b.T({2, 3}, b8)}, TriAttrs{});
      return;
    // ---- convolution kernels ----
    case OpId::kConvForward: case OpId::kConvInputGrad: case OpId::kConvWeightGrad:
      conv_kernel_samples(b, op);
      return;
    // ---- pooling (Kernel) ----
    case OpId::kMaxPool2dIndices: {
      // kernel ++ stride ++ padding ++ dilation
      auto pool = [](AttrDims p, bool ceil = false) { return PoolAttrs{.params = std::move(p), .ceil_mode = ceil}; };
      const double inf = INFINITY;  // NaN inputs: tests/pool_test.cc
      b.add("k2s2", {b.Distinct({2, 2, 4, 4})}, pool({2, 2, 2, 2, 0, 0, 1, 1}));
      b.add("ties_first_wins", {V({1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 0, 3, 3, 0, 3, 0, 0, 3})},
            pool({2, 2, 1, 1, 0, 0, 1, 1}));
      b.add("neg_inf_pad", {V({1, 1, 3, 3}, {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf})},
            pool({2, 2, 2, 2, 1, 1, 1, 1}));
      b.add("k3s2_pad1_ceil", {b.Distinct({1, 2, 5, 6})}, pool({3, 3, 2, 2, 1, 1, 1, 1}, true));
      b.add("dilation_f64", {b.Distinct({1, 1, 7, 8}, f64)}, pool({2, 3, 1, 2, 1, 1, 2, 2}));
      b.add("unbatched_k2x1", {b.Distinct({3, 4, 5})}, pool({2, 1, 1, 2, 0, 0, 1, 1}, true));
      return;
    }
    case OpId::kMaxPool2dGather:  // any in-plane indices (repeats included)
      b.add("planes", {b.T({2, 2, 3, 4}), b.Idx({2, 2, 2, 3}, 12)});
      b.add("f64_one_plane", {b.T({1, 1, 4, 4}, f64), b.Idx({1, 1, 2, 2}, 16)});
      return;
    case OpId::kMaxPool2dScatter: {  // repeated indices accumulate
      Attrs hw;
      hw.dims = {3, 4};
      b.add("planes_repeats", {b.T({2, 2, 2, 3}), b.Idx({2, 2, 2, 3}, 12)}, hw);
      hw.dims = {2, 5};
      b.add("f64", {b.T({1, 3, 2, 2}, f64), b.Idx({1, 3, 2, 2}, 10)}, hw);
      return;
    }
    // ---- distributed ---- (a 1-process world: multi-process values are tests/dist_test's)
    case OpId::kAllReduce:
      b.add("sum_noncontig", {b.T({3, 4})}, CollectiveAttrs{.reduce = CollectiveAttrs::kSum}, {0});
      b.add("avg_f64", {b.T({2, 3}, f64)}, CollectiveAttrs{.reduce = CollectiveAttrs::kAvg});
      b.add("sum_i64", {b.T({5}, i64)}, CollectiveAttrs{.reduce = CollectiveAttrs::kSum});
      b.add("0dim", {S(0.5)}, CollectiveAttrs{.reduce = CollectiveAttrs::kAvg});
      b.add("empty", {b.T({0, 3})}, CollectiveAttrs{});
      return;
    case OpId::kBroadcast:
      b.add("root0_noncontig", {b.T({3, 4})}, CollectiveAttrs{}, {0});
      b.add("f64", {b.T({2, 3}, f64)}, CollectiveAttrs{});
      b.add("bool", {b.T({4}, b8)}, CollectiveAttrs{});
      return;
    case OpId::kAllGather:
      b.add("2d_noncontig", {b.T({3, 4})}, CollectiveAttrs{}, {0});
      b.add("f64", {b.T({2, 3}, f64)}, CollectiveAttrs{});
      b.add("0dim", {S(1.5)}, CollectiveAttrs{});
      b.add("i64", {b.T({4}, i64)}, CollectiveAttrs{});
      return;
    case OpId::kReduceScatter:
      b.add("sum_noncontig", {b.T({4, 3})}, CollectiveAttrs{.reduce = CollectiveAttrs::kSum}, {0});
      b.add("avg_f64", {b.T({2, 3}, f64)}, CollectiveAttrs{.reduce = CollectiveAttrs::kAvg});
      b.add("sum_i64", {b.T({6}, i64)}, CollectiveAttrs{});
      return;
    default: return;
  }
}

}  // namespace sloth::samples
