// op_samples: reductions, views and scatters, indexing, shape ops, matmul and composites.
#include "tests/support/op_samples_util.h"

namespace sloth::samples {

void reduce_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kSum: case OpId::kProd:
      b.add("dim1_keepdim_noncontig", {b.T({3, 4})}, ReduceAttrs{.dims = {1}, .keepdim = true}, {0});
      b.add("all_f64", {b.T({2, 3}, f64)}, Attrs{.dims = {}});
      b.add("dims_0_2", {b.T({2, 3, 4})}, Attrs{.dims = {0, -1}});
      b.add("empty_reduced", {b.T({0, 3})}, Attrs{.dims = {0}});
      b.add("i64", {b.T({2, 3}, i64)}, Attrs{.dims = {-1}});
      b.add("bool", {b.T({2, 3}, b8)}, Attrs{.dims = {}});
      b.add("0dim", {S(1.25)}, Attrs{.dims = {}});
      return;
    case OpId::kAmax: case OpId::kAmin:
      b.add("dim1_noncontig", {b.Distinct({3, 4})}, Attrs{.dims = {1}}, {0});
      b.add("dims_0_2_keepdim_f64", {b.Distinct({2, 3, 4}, f64)}, ReduceAttrs{.dims = {0, 2}, .keepdim = true});
      b.add("all", {b.Distinct({2, 3})}, Attrs{.dims = {}});
      b.add("0dim", {S(-0.5)}, Attrs{.dims = {}});
      b.add("empty_kept", {b.T({0, 3})}, Attrs{.dims = {1}});
      b.add("i64", {b.Distinct({2, 4}, i64)}, Attrs{.dims = {0}});
      return;
    case OpId::kArgmax: case OpId::kArgmin:
      b.add("dim1_noncontig", {b.Distinct({3, 4})}, ArgReduceAttrs{.dim = 1}, {0});
      b.add("dim_last_keepdim_f64", {b.Distinct({2, 3, 4}, f64)}, ArgReduceAttrs{.dim = -1, .keepdim = true});
      b.add("0dim", {S(2.0)}, ArgReduceAttrs{.dim = 0});
      b.add("ties_first", {V({2, 3}, {1, 3, 3, 2, 2, 0}, i64)}, ArgReduceAttrs{.dim = 1});
      b.add("empty_kept", {b.T({0, 3})}, ArgReduceAttrs{.dim = 1});
      return;
    case OpId::kMean:
      b.add("dim1_noncontig", {b.T({3, 4})}, Attrs{.dims = {1}}, {0});
      b.add("dims_keepdim_f64", {b.T({2, 3, 4}, f64)}, MeanAttrs{.dims = {0, 2}, .keepdim = true});
      b.add("all", {b.T({2, 3})}, Attrs{.dims = {}});
      b.add("0dim", {S(0.75)}, Attrs{.dims = {}});
      b.add("empty_kept", {b.T({0, 3})}, Attrs{.dims = {1}});
      return;
    case OpId::kVar: case OpId::kStd:
      b.add("unbiased_dim1_noncontig", {b.T({3, 4})}, VarAttrs{.dims = {1}, .unbiased = true}, {0});
      b.add("biased_all_f64", {b.T({2, 3}, f64)}, VarAttrs{.dims = {}, .unbiased = false});
      b.add("unbiased_keepdim_f64", {b.T({2, 3, 4}, f64)}, VarAttrs{.dims = {0, 2}, .keepdim = true, .unbiased = true});
      b.add("empty_kept", {b.T({0, 3})}, VarAttrs{.dims = {1}, .unbiased = true});
      return;
    case OpId::kLogsumexp:
      b.add("dim1_noncontig", {b.T({3, 4})}, Attrs{.dims = {1}}, {0});
      b.add("all_f64", {b.T({2, 3}, f64)}, Attrs{.dims = {}});
      b.add("keepdim", {b.T({2, 3, 4})}, ReduceAttrs{.dims = {-1}, .keepdim = true});
      b.add("i64_to_f32", {b.T({2, 3}, i64)}, Attrs{.dims = {0}});
      b.add("0dim", {S(0.3)}, Attrs{.dims = {}});
      b.add("empty_kept", {b.T({0, 3})}, Attrs{.dims = {1}});
      return;
    default:
      return;
  }
}

void view_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kReshape:
      b.add("noncontig", {b.T({3, 4})}, Attrs{.dims = {2, -1}}, {0});
      b.add("3d_f64", {b.T({2, 3, 4}, f64)}, Attrs{.dims = {4, 6}});
      b.add("0dim", {S(1.5)}, Attrs{.dims = {1}});
      b.add("empty", {b.T({0, 3})}, Attrs{.dims = {3, 0}});
      b.add("i64", {b.T({6}, i64)}, Attrs{.dims = {2, 3}});
      return;
    case OpId::kView:  // no non-contiguous input: view needs a viewable layout
      b.add("3d", {b.T({2, 3, 4})}, Attrs{.dims = {6, -1}});
      b.add("0dim_f64", {S(1.5)}, Attrs{.dims = {1, 1}});
      b.add("empty", {b.T({0, 3})}, Attrs{.dims = {0}});
      b.add("bool", {b.T({2, 3}, b8)}, Attrs{.dims = {6}});
      return;
    case OpId::kPermute:
      b.add("3d", {b.T({2, 3, 4})}, Attrs{.dims = {2, 0, 1}});
      b.add("noncontig", {b.T({3, 4}, f64)}, Attrs{.dims = {-1, 0}}, {0});
      b.add("0dim", {S(2.0)}, Attrs{.dims = {}});
      b.add("empty", {b.T({0, 3}, i64)}, Attrs{.dims = {1, 0}});
      return;
    case OpId::kExpand:
      b.add("new_dims", {b.T({3, 1})}, Attrs{.dims = {2, 3, 4}});
      b.add("0dim", {S(2.0)}, Attrs{.dims = {2, 2}});
      b.add("noncontig_minus1", {b.T({1, 4}, f64)}, Attrs{.dims = {3, -1}}, {0});
      b.add("bool", {b.T({3, 1}, b8)}, Attrs{.dims = {3, 2}});
      b.add("empty", {b.T({1, 3})}, Attrs{.dims = {0, 3}});
      return;
    case OpId::kSlice:
      b.add("step2_noncontig", {b.T({4, 5})}, SliceAttrs{.dim = 1, .start = 1, .end = 5, .step = 2}, {0});
      b.add("negative_bounds_f64", {b.T({6}, f64)}, SliceAttrs{.dim = 0, .start = -4, .end = -1, .step = 1});
      b.add("clamped_end", {b.T({3, 4})}, SliceAttrs{.dim = -1, .start = 1, .end = 100, .step = 3});
      b.add("empty_result", {b.T({3, 4}, i64)}, SliceAttrs{.dim = 1, .start = 2, .end = 2, .step = 1});
      b.add("empty_input", {b.T({0, 3})}, SliceAttrs{.dim = 0, .start = 0, .end = 1, .step = 1});
      return;
    case OpId::kSelect:
      b.add("negative_noncontig", {b.T({3, 4})}, SelectAttrs{.dim = -1, .index = -1}, {0});
      b.add("3d_f64", {b.T({2, 3, 4}, f64)}, SelectAttrs{.dim = 1, .index = 2});
      b.add("to_0dim", {b.T({4}, i64)}, SelectAttrs{.dim = 0, .index = 3});
      b.add("empty", {b.T({0, 3})}, SelectAttrs{.dim = 1, .index = 0});
      return;
    case OpId::kDiagonal:
      b.add("offset1_noncontig", {b.T({3, 4})}, DiagonalAttrs{.offset = 1, .dim1 = 0, .dim2 = 1}, {0});
      b.add("offset_neg_f64", {b.T({4, 3}, f64)}, DiagonalAttrs{.offset = -1, .dim1 = 0, .dim2 = 1});
      b.add("3d_dims12", {b.T({2, 3, 4})}, DiagonalAttrs{.offset = 0, .dim1 = 1, .dim2 = 2});
      b.add("swapped_dims", {b.T({3, 3})}, DiagonalAttrs{.offset = 1, .dim1 = 1, .dim2 = 0});
      b.add("empty", {b.T({2, 3})}, DiagonalAttrs{.offset = 5, .dim1 = 0, .dim2 = 1});
      return;
    case OpId::kAsStrided:  // indexes the row-major buffer: inputs stay contiguous
      b.add("2x2", {b.T({3, 4})}, AsStridedAttrs{.size = {2, 2}, .stride = {1, 4}, .offset = 1});
      b.add("overlapping_f64", {b.T({6}, f64)}, AsStridedAttrs{.size = {3, 3}, .stride = {1, 1}, .offset = 0});
      b.add("0dim_result", {b.T({2, 3})}, AsStridedAttrs{.size = {}, .stride = {}, .offset = 4});
      b.add("empty", {b.T({4})}, AsStridedAttrs{.size = {0, 2}, .stride = {1, 1}, .offset = 0});
      return;
    case OpId::kFlatten:
      b.add("middle", {b.T({2, 3, 4})}, FlattenAttrs{.start_dim = 1, .end_dim = 2});
      b.add("all_noncontig", {b.T({3, 4}, f64)}, FlattenAttrs{.start_dim = 0, .end_dim = -1}, {0});
      b.add("0dim", {S(3.0)}, FlattenAttrs{.start_dim = 0, .end_dim = -1});
      b.add("empty", {b.T({0, 3})}, FlattenAttrs{.start_dim = 0, .end_dim = 1});
      return;
    case OpId::kTranspose:
      b.add("3d", {b.T({2, 3, 4})}, TransposeAttrs{.dim0 = 0, .dim1 = 2});
      b.add("noncontig_f64", {b.T({3, 4}, f64)}, TransposeAttrs{.dim0 = -1, .dim1 = 0}, {0});
      b.add("0dim", {S(3.0)}, TransposeAttrs{.dim0 = 0, .dim1 = -1});
      b.add("empty", {b.T({0, 3}, i64)}, TransposeAttrs{.dim0 = 0, .dim1 = 1});
      return;
    case OpId::kT:
      b.add("noncontig", {b.T({3, 4})}, {}, {0});
      b.add("1d_f64", {b.T({3}, f64)});
      b.add("0dim", {S(3.0)});
      b.add("empty", {b.T({0, 3})});
      return;
    case OpId::kNarrow:
      b.add("noncontig", {b.T({4, 5})}, NarrowAttrs{.dim = 1, .start = 1, .length = 3}, {0});
      b.add("negative_start_f64", {b.T({6}, f64)}, NarrowAttrs{.dim = 0, .start = -3, .length = 2});
      b.add("length0", {b.T({3, 4}, i64)}, NarrowAttrs{.dim = 0, .start = 3, .length = 0});
      return;
    case OpId::kSqueeze:
      b.add("all", {b.T({1, 3, 1})}, SqueezeAttrs{.all = true});
      b.add("dim1_f64", {b.T({3, 1, 4}, f64)}, Attrs{.dims = {1}});
      b.add("not_size1", {b.T({3, 4})}, Attrs{.dims = {0}}, {0});
      b.add("noncontig", {b.T({1, 4})}, Attrs{.dims = {-2}}, {0});
      b.add("0dim", {S(1.0)}, SqueezeAttrs{.all = true});
      b.add("empty", {b.T({0, 1})}, Attrs{.dims = {1}});
      return;
    case OpId::kUnsqueeze:
      b.add("noncontig", {b.T({3, 4})}, DimAttrs{.dim = 1}, {0});
      b.add("0dim", {S(1.0)}, DimAttrs{.dim = 0});
      b.add("last_f64", {b.T({2, 3}, f64)}, DimAttrs{.dim = -1});
      b.add("empty", {b.T({0, 3}, i64)}, DimAttrs{.dim = 0});
      return;
    case OpId::kSplit:
      b.add("uneven", {b.T({5, 4})}, SplitAttrs{.size_or_n = 2, .dim = 0});
      b.add("noncontig_f64", {b.T({3, 4}, f64)}, SplitAttrs{.size_or_n = 3, .dim = 1}, {0});
      b.add("empty", {b.T({0, 3})}, SplitAttrs{.size_or_n = 2, .dim = 0});
      return;
    case OpId::kChunk:
      b.add("uneven", {b.T({5, 4})}, SplitAttrs{.size_or_n = 3, .dim = 0});
      b.add("noncontig_f64", {b.T({3, 4}, f64)}, SplitAttrs{.size_or_n = 2, .dim = -1}, {0});
      b.add("empty", {b.T({0, 3})}, SplitAttrs{.size_or_n = 2, .dim = 0});
      return;
    case OpId::kSliceScatter:
      b.add("step2_noncontig", {b.T({4, 3}), b.T({2, 3})}, SliceAttrs{.dim = 0, .start = 0, .end = 4, .step = 2}, {0, 1});
      b.add("negative_start_f64", {b.T({3, 5}, f64), b.T({3, 2}, f64)}, SliceAttrs{.dim = 1, .start = -2, .end = 5, .step = 1});
      b.add("empty_src", {b.T({3, 4}), b.T({3, 0})}, SliceAttrs{.dim = 1, .start = 2, .end = 2, .step = 1});
      b.add("i64", {b.T({4}, i64), b.T({2}, i64)}, SliceAttrs{.dim = 0, .start = 1, .end = 3, .step = 1});
      return;
    case OpId::kSelectScatter:
      b.add("noncontig", {b.T({3, 4}), b.T({4})}, SelectAttrs{.dim = 0, .index = 1}, {0});
      b.add("3d_f64", {b.T({2, 3, 4}, f64), b.T({2, 4}, f64)}, SelectAttrs{.dim = 1, .index = -1});
      b.add("0dim_src", {b.T({3}), S(2.0, f32)}, SelectAttrs{.dim = 0, .index = 2});
      return;
    case OpId::kDiagonalScatter:
      b.add("offset1_noncontig", {b.T({3, 4}), b.T({3})}, DiagonalAttrs{.offset = 1, .dim1 = 0, .dim2 = 1}, {0});
      b.add("offset_neg_f64", {b.T({4, 3}, f64), b.T({3}, f64)}, DiagonalAttrs{.offset = -1, .dim1 = 0, .dim2 = 1});
      b.add("3d", {b.T({2, 3, 3}), b.T({2, 3})}, DiagonalAttrs{.offset = 0, .dim1 = 1, .dim2 = 2});
      b.add("empty", {b.T({2, 3}), b.T({0})}, DiagonalAttrs{.offset = 5, .dim1 = 0, .dim2 = 1});
      return;
    case OpId::kAsStridedScatter:  // inputs stay contiguous (as_strided reads the buffer)
      b.add("2x2", {b.T({3, 4}), b.T({2, 2})}, AsStridedAttrs{.size = {2, 2}, .stride = {1, 4}, .offset = 1});
      b.add("strided_f64", {b.T({6}, f64), b.T({3}, f64)}, AsStridedAttrs{.size = {3}, .stride = {2}, .offset = 0});
      b.add("empty", {b.T({4}), b.T({0})}, AsStridedAttrs{.size = {0}, .stride = {1}, .offset = 0});
      return;
    default:
      return;
  }
}

void index_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kMatmul: case OpId::kMm:
      b.add("2d_noncontig", {b.T({2, 3}), b.T({3, 4})}, {}, {0, 1});
      b.add("2d_f64", {b.T({3, 2}, f64), b.T({2, 2}, f64)});
      b.add("i64", {b.T({2, 3}, i64), b.T({3, 2}, i64)});
      b.add("empty_k", {b.T({2, 0}), b.T({0, 3})});
      if (op == OpId::kMm) return;
      b.add("dot", {b.T({3}), b.T({3})});
      b.add("vec_mat", {b.T({3}, f64), b.T({3, 2}, f64)});
      b.add("mat_vec", {b.T({2, 3}), b.T({3})}, {}, {0});
      b.add("batch_broadcast", {b.T({2, 1, 2, 3}), b.T({3, 3, 2})});
      b.add("batch_vec", {b.T({2, 2, 3}, f64), b.T({3}, f64)});
      // A shared 2-D right operand: its gradient folds the batch into one GEMM's rows.
      b.add("batch_shared_weight", {b.T({2, 3, 4}, f64), b.T({4, 2}, f64)}, {}, {1});
      b.add("batch_shared_weight_empty_k", {b.T({2, 3, 0}), b.T({0, 2})});
      return;
    case OpId::kBmm:
      b.add("f32", {b.T({2, 2, 3}), b.T({2, 3, 2})});
      b.add("f64", {b.T({3, 1, 2}, f64), b.T({3, 2, 2}, f64)});
      b.add("empty_batch", {b.T({0, 2, 3}), b.T({0, 3, 1})});
      return;
    case OpId::kLinear:
      b.add("bias_noncontig", {b.T({3, 4}), b.T({2, 4}), b.T({2})}, {}, {0, 1});
      b.add("3d_no_bias_f64", {b.T({2, 2, 3}, f64), b.T({4, 3}, f64)});
      b.add("1d", {b.T({4}), b.T({3, 4}), b.T({3})});
      b.add("empty", {b.T({0, 3}), b.T({2, 3}), b.T({2})});
      return;
    case OpId::kIndexSelect:
      b.add("dim0_noncontig", {b.T({3, 4}), V({2}, {2, 0}, i64)}, DimAttrs{.dim = 0}, {0});
      b.add("dim1_repeat_f64", {b.T({3, 4}, f64), V({3}, {3, 1, 1}, i64)}, DimAttrs{.dim = -1});
      b.add("0dim_index", {b.T({5}), V({}, {3}, i64)}, DimAttrs{.dim = 0});
      b.add("empty_index", {b.T({3, 4}), V({0}, {}, i64)}, DimAttrs{.dim = 1});
      b.add("i64_input", {b.T({4, 2}, i64), V({2}, {1, 3}, i64)}, DimAttrs{.dim = 0});
      return;
    case OpId::kGather:
      b.add("dim1_noncontig", {b.T({3, 4}), b.Idx({3, 2}, 4)}, DimAttrs{.dim = 1}, {0});
      b.add("dim0_f64", {b.T({3, 4}, f64), b.Idx({2, 4}, 3)}, DimAttrs{.dim = 0});
      b.add("i64", {b.T({2, 3}, i64), b.Idx({2, 2}, 3)}, DimAttrs{.dim = -1});
      b.add("empty_index", {b.T({3, 4}), b.Idx({0, 4}, 3)}, DimAttrs{.dim = 0});
      return;
    case OpId::kScatterAdd:
      b.add("dim0_noncontig", {b.T({3, 4}), b.Idx({2, 4}, 3), b.T({2, 4})}, DimAttrs{.dim = 0}, {0, 2});
      b.add("dim1_f64", {b.T({3, 4}, f64), b.Idx({3, 2}, 4), b.T({3, 2}, f64)}, DimAttrs{.dim = 1});
      b.add("i64", {b.T({4}, i64), b.Idx({6}, 4), b.T({6}, i64)}, DimAttrs{.dim = 0});
      b.add("empty_index", {b.T({3, 4}), b.Idx({0, 4}, 3), b.T({0, 4})}, DimAttrs{.dim = 0});
      return;
    case OpId::kIndexAdd:
      b.add("dim0_noncontig", {b.T({3, 4}), V({2}, {2, 0}, i64), b.T({2, 4})}, DimAttrs{.dim = 0}, {0, 2});
      b.add("dim1_repeat_f64", {b.T({3, 4}, f64), V({3}, {1, 3, 1}, i64), b.T({3, 3}, f64)}, DimAttrs{.dim = 1});
      b.add("i64", {b.T({4}, i64), V({2}, {3, 3}, i64), b.T({2}, i64)}, DimAttrs{.dim = 0});
      b.add("empty_index", {b.T({3, 4}), V({0}, {}, i64), b.T({0, 4})}, DimAttrs{.dim = 0});
      return;
    case OpId::kIndexPut: case OpId::kIndexPut_:
      b.add("broadcast_values_noncontig", {b.T({4, 3}), V({2}, {1, -1}, i64), b.T({3})}, {}, {0});
      b.add("rows_f64", {b.T({4, 3}, f64), V({3}, {3, 0, 2}, i64), b.T({3, 3}, f64)}, {}, {2});
      b.add("1d_0dim_value", {b.T({5}), V({2}, {0, 4}, i64), S(2.5, f32)});
      b.add("i64", {b.T({3, 2}, i64), V({1}, {-3}, i64), b.T({1, 2}, i64)});
      b.add("empty_index", {b.T({3, 2}), V({0}, {}, i64), b.T({2})});
      return;
    case OpId::kOneHot:
      b.add("1d", {b.Idx({4}, 5)}, OneHotAttrs{.num_classes = 5});
      b.add("2d", {b.Idx({2, 3}, 3)}, OneHotAttrs{.num_classes = 3});
      b.add("0dim", {V({}, {1}, i64)}, OneHotAttrs{.num_classes = 2});
      b.add("empty", {b.Idx({0}, 3)}, OneHotAttrs{.num_classes = 3});
      return;
    case OpId::kCat:
      b.add("promote_noncontig", {b.T({2, 3}), b.T({1, 3}, f64)}, DimAttrs{.dim = 0}, {0});
      b.add("last_dim_with_empty", {b.T({2, 3}), b.T({2, 0}), b.T({2, 2})}, DimAttrs{.dim = -1});
      b.add("i64_bool", {b.T({3}, i64), b.T({2}, b8)}, DimAttrs{.dim = 0});
      b.add("f32_i64", {b.T({2, 2}), b.T({2, 2}, i64)}, DimAttrs{.dim = 1});
      b.add("single", {b.T({2, 2}, f64)}, DimAttrs{.dim = 0});
      return;
    case OpId::kStack:
      b.add("promote_noncontig", {b.T({2, 3}), b.T({2, 3}, f64)}, DimAttrs{.dim = 0}, {0, 1});
      b.add("last_dim", {b.T({3}), b.T({3}), b.T({3})}, DimAttrs{.dim = -1});
      b.add("0dim", {S(1.0), S(2.0)}, DimAttrs{.dim = 0});
      b.add("i64_bool", {b.T({2}, i64), b.T({2}, b8)}, DimAttrs{.dim = 1});
      b.add("empty", {b.T({0, 2}), b.T({0, 2})}, DimAttrs{.dim = 1});
      return;
    case OpId::kClone: case OpId::kContiguous:
      b.add("noncontig", {b.T({3, 4})}, {}, {0});
      b.add("f64_0dim", {S(1.5)});
      b.add("i64", {b.T({2, 3}, i64)});
      b.add("bool", {b.T({4}, b8)});
      b.add("empty", {b.T({0, 3})});
      return;
    case OpId::kSoftmax: case OpId::kLogSoftmax:
      b.add("dim1_noncontig", {b.T({3, 4})}, DimAttrs{.dim = 1}, {0});
      b.add("dim0_f64", {b.T({2, 3, 4}, f64)}, DimAttrs{.dim = 0});
      b.add("0dim", {S(0.5)}, DimAttrs{.dim = 0});
      b.add("empty", {b.T({0, 3})}, DimAttrs{.dim = 1});
      return;
    case OpId::kCrossEntropy: case OpId::kNllLoss:
      b.add("2x3", {b.T({2, 3}), V({2}, {2, 0}, i64)});
      b.add("noncontig_f64", {b.T({4, 5}, f64), b.Idx({4}, 5)}, {}, {0});
      b.add("1d_0dim_target", {b.T({3}), V({}, {1}, i64)});
      // ---- losses with options (nn) ----
      b.add("ignore_index_mean", {b.T({4, 3}), V({4}, {2, -100, 0, 1}, i64)},
            LossAttrs{.ignore_index = -100, .ignores = true});
      b.add("ignore_class_sum_f64", {b.T({4, 3}, f64), V({4}, {2, 1, 1, 0}, i64)},
            LossAttrs{.ignore_index = 1, .ignores = true, .reduction = LossReduction::kSum});
      b.add("none", {b.T({3, 4}), V({3}, {3, -100, 0}, i64)},
            LossAttrs{.ignore_index = -100, .ignores = true, .reduction = LossReduction::kNone});
      if (op == OpId::kCrossEntropy) {
        b.add("smoothing_ignore_mean", {b.T({4, 3}), V({4}, {2, -100, 0, 1}, i64)},
              LossAttrs{.ignore_index = -100, .ignores = true, .label_smoothing = 0.2});
        b.add("smoothing_none_f64", {b.T({3, 4}, f64), V({3}, {3, 1, 0}, i64)},
              LossAttrs{.ignore_index = 1, .ignores = true, .reduction = LossReduction::kNone,
                        .label_smoothing = 0.3});
        b.add("smoothing_1d_sum", {b.T({4}), V({}, {2}, i64)},
              LossAttrs{.ignore_index = -100, .ignores = true, .reduction = LossReduction::kSum,
                        .label_smoothing = 0.1});
      }
      return;
    case OpId::kMseLoss:
      b.add("noncontig", {b.T({3, 4}), b.T({3, 4})}, {}, {0, 1});
      b.add("f32_f64", {b.T({2, 3}), b.T({2, 3}, f64)});
      b.add("0dim", {S(0.5), S(-1.25)});
      return;
    case OpId::kBceWithLogits:
      b.add("noncontig", {b.T({3, 4}), b.R({3, 4}, 0.05, 0.95)}, {}, {0, 1});
      b.add("f64_hard_targets", {b.T({2, 3}, f64), V({2, 3}, {0, 1, 1, 0, 0, 1}, f64)});
      b.add("0dim", {S(0.5), S(0.25)});
      return;
    case OpId::kDropout:
      b.add("eval", {b.T({3, 4})}, DropoutAttrs{.p = 0.5, .train = false}, {0});
      b.add("train_p0_f64", {b.T({2, 3}, f64)}, DropoutAttrs{.p = 0.0, .train = true});
      b.add("train_p1", {b.T({2, 3})}, DropoutAttrs{.p = 1.0, .train = true});
      b.add("train_random", {b.T({4, 4})}, DropoutAttrs{.p = 0.5, .train = true});
      b.add("eval_empty", {b.T({0, 3})}, DropoutAttrs{.p = 0.2, .train = false});
      return;
    case OpId::kLayerNorm:
      b.add("weight_bias", {b.T({2, 3, 4}), b.T({4}), b.T({4})}, LayerNormAttrs{.normalized_shape = {4}, .eps = 1e-5});
      b.add("plain_noncontig", {b.T({3, 4})}, LayerNormAttrs{.normalized_shape = {4}, .eps = 1e-5}, {0});
      b.add("2d_norm_weight_f64", {b.T({2, 2, 3}, f64), b.T({2, 3}, f64)}, LayerNormAttrs{.normalized_shape = {2, 3}, .eps = 1e-3}, {1});
      b.add("empty_rows", {b.T({0, 4})}, LayerNormAttrs{.normalized_shape = {4}, .eps = 1e-5});
      return;
    // ---- normalization (nn) ----
    case OpId::kBatchNorm:
      b.add("train_affine_4d", {b.T({3, 2, 2, 2}), b.T({2}), b.T({2})},
            BatchNormAttrs{.eps = 1e-5, .training = true, .has_weight = true, .has_bias = true});
      b.add("train_plain_2d_noncontig", {b.T({4, 3})},
            BatchNormAttrs{.eps = 1e-5, .training = true}, {0});
      b.add("train_weight_3d_f64", {b.T({2, 3, 2}, f64), b.T({3}, f64)},
            BatchNormAttrs{.eps = 1e-3, .training = true, .has_weight = true});
      b.add("eval_affine", {b.T({2, 3, 2}), b.T({3}), b.R({3}, 0.5, 1.5), b.T({3}), b.T({3})},
            BatchNormAttrs{.eps = 1e-5, .has_weight = true, .has_bias = true});
      b.add("eval_plain_f64", {b.T({3, 2}, f64), b.T({2}, f64), b.R({2}, 0.5, 1.5, f64)},
            BatchNormAttrs{.eps = 1e-5});
      return;
    case OpId::kGroupNorm:
      b.add("affine_4d", {b.T({2, 4, 2, 2}), b.T({4}), b.T({4})},
            GroupNormAttrs{.num_groups = 2, .eps = 1e-5, .has_weight = true, .has_bias = true});
      b.add("plain_2d_noncontig", {b.T({3, 4})}, GroupNormAttrs{.num_groups = 2, .eps = 1e-5}, {0});
      b.add("plain_3d", {b.T({3, 4, 2})}, GroupNormAttrs{.num_groups = 4, .eps = 1e-5});
      b.add("bias_2d_f64", {b.T({2, 6}, f64), b.T({6}, f64)},
            GroupNormAttrs{.num_groups = 3, .eps = 1e-3, .has_bias = true});
      b.add("empty_batch", {b.T({0, 4, 3})}, GroupNormAttrs{.num_groups = 2, .eps = 1e-5});
      return;
    case OpId::kEmbedding:
      b.add("noncontig", {b.T({5, 3}), b.Idx({4}, 5)}, {}, {0});
      b.add("2d_indices_f64", {b.T({4, 2}, f64), b.Idx({2, 3}, 4)});
      b.add("0dim_index", {b.T({3, 2}), V({}, {2}, i64)});
      b.add("empty", {b.T({3, 2}), V({0}, {}, i64)});
      return;
    case OpId::kMaskedFill: case OpId::kMaskedFill_:
      b.add("noncontig", {b.T({3, 4}), b.T({3, 4}, b8), S(-1.5)}, {}, {0, 1});
      b.add("broadcast_mask_f64", {b.T({2, 4}, f64), b.T({4}, b8), S(0.25, f32)});
      b.add("i64_truncates", {b.T({2, 3}, i64), b.T({2, 3}, b8), S(2.7)});
      b.add("0dim", {S(1.0), S(1, b8), S(3.0)});
      b.add("empty", {b.T({0, 3}), b.T({3}, b8), S(1.0)});
      return;
    default:
      return;
  }
}

}  // namespace sloth::samples
