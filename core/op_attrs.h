// Typed views of Attrs, one per op family, declared beside the op table (core/ops.def names
// the view of each op that takes attributes). Code packs and unpacks attributes only through
// these: `SliceAttrs::of(attrs).dim`, `call_op(OpId::kSlice, {x}, SliceAttrs{.dim = 0, ...})`.
// Each view's AttrMap below is the one place that says where its fields are kept in Attrs;
// Attrs stays the storage, so hashing and the plan cache do not change.
#pragma once

#include <cstdint>
#include <type_traits>

#include "absl/types/span.h"
#include "core/attrs.h"
#include "core/dtype.h"

namespace sloth {
namespace attrs_detail {
struct Load {  // view field <- storage
  template <class Field, class Slot>
  void operator()(Field& field, const Slot& slot) const {
    if constexpr (std::is_same_v<Field, Slot>) field = slot;
    else field = static_cast<Field>(slot);
  }
};
struct Store {  // view field -> storage
  template <class Field, class Slot>
  void operator()(const Field& field, Slot& slot) const {
    if constexpr (std::is_same_v<Field, Slot>) slot = field;
    else slot = static_cast<Slot>(field);
  }
};
}  // namespace attrs_detail

// A shape or dim list (std::vector, braced list) as an attrs field.
inline AttrDims attr_dims(absl::Span<const int64_t> s) { return AttrDims(s.begin(), s.end()); }

// Every field defaults to what an empty Attrs holds, so a view names only what differs.
// Inside a view: View::of(attrs) reads it, view.store(attrs) writes its fields (and no
// others) back, and a view converts to the Attrs holding only its fields.
#define SLOTH_ATTR_VIEW(View)                                                      \
  static View of(const Attrs& a) {                                                 \
    View v;                                                                        \
    AttrMap<View>::map(v, a, attrs_detail::Load{});                                \
    return v;                                                                      \
  }                                                                                \
  void store(Attrs& a) const { AttrMap<View>::map(*this, a, attrs_detail::Store{}); } \
  operator Attrs() const {                                                         \
    Attrs a;                                                                       \
    store(a);                                                                      \
    return a;                                                                      \
  }

// Where View's fields live: `f(field, slot)` for each field, for both directions.
#define SLOTH_ATTR_MAP(View, ...)                        \
  struct View;                                           \
  template <>                                            \
  struct AttrMap<View> {                                 \
    template <class V, class A, class F>                 \
    static void map(V& v, A& a, F f) { __VA_ARGS__; }    \
  }

// Reductions. Every reduction view (Reduce, Mean, Var, ArgReduce) keeps keepdim in the same
// slot, and the reduced dims in Attrs::dims, so the shared reduction rule and kernels read
// ReduceAttrs of any of them (tests/op_table_test checks it).

// Sum, Prod, Amax, Amin, Logsumexp: dims {} = all.
SLOTH_ATTR_MAP(ReduceAttrs, f(v.dims, a.dims); f(v.keepdim, a.slots.flag));
struct ReduceAttrs {
  AttrDims dims;
  bool keepdim = false;
  SLOTH_ATTR_VIEW(ReduceAttrs)
};

// Mean: PyTorch's mean(x) saves nothing while mean(x, dims) saves x, even for every dim.
SLOTH_ATTR_MAP(MeanAttrs, f(v.dims, a.dims); f(v.keepdim, a.slots.flag);
               f(v.no_dim_list, a.slots.i3));
struct MeanAttrs {
  AttrDims dims;
  bool keepdim = false;
  bool no_dim_list = false;  // called as mean(x)
  SLOTH_ATTR_VIEW(MeanAttrs)
};

// Var, Std.
SLOTH_ATTR_MAP(VarAttrs, f(v.dims, a.dims); f(v.keepdim, a.slots.flag); f(v.unbiased, a.slots.i0));
struct VarAttrs {
  AttrDims dims;
  bool keepdim = false;
  bool unbiased = false;
  SLOTH_ATTR_VIEW(VarAttrs)
};

// Argmax, Argmin (their rule also sets dims to {dim} for the shared reduction code).
SLOTH_ATTR_MAP(ArgReduceAttrs, f(v.dim, a.slots.i0); f(v.keepdim, a.slots.flag));
struct ArgReduceAttrs {
  int64_t dim = 0;
  bool keepdim = false;
  SLOTH_ATTR_VIEW(ArgReduceAttrs)
};

// One dim: Unsqueeze, IndexSelect, Gather, ScatterAdd, IndexAdd, Cat, Stack, Softmax,
// LogSoftmax.
SLOTH_ATTR_MAP(DimAttrs, f(v.dim, a.slots.i0));
struct DimAttrs {
  int64_t dim = 0;
  SLOTH_ATTR_VIEW(DimAttrs)
};

// Slice, SliceScatter: indices start, start + step, ... below end along dim.
SLOTH_ATTR_MAP(SliceAttrs, f(v.dim, a.slots.i0); f(v.start, a.slots.i1); f(v.end, a.slots.i2);
               f(v.step, a.slots.i3));
struct SliceAttrs {
  int64_t dim = 0, start = 0, end = 0, step = 0;
  SLOTH_ATTR_VIEW(SliceAttrs)
};

// Narrow: length elements from start.
SLOTH_ATTR_MAP(NarrowAttrs, f(v.dim, a.slots.i0); f(v.start, a.slots.i1); f(v.length, a.slots.i2));
struct NarrowAttrs {
  int64_t dim = 0, start = 0, length = 0;
  SLOTH_ATTR_VIEW(NarrowAttrs)
};

// Select, SelectScatter.
SLOTH_ATTR_MAP(SelectAttrs, f(v.dim, a.slots.i0); f(v.index, a.slots.i1));
struct SelectAttrs {
  int64_t dim = 0, index = 0;
  SLOTH_ATTR_VIEW(SelectAttrs)
};

// Diagonal, DiagonalScatter.
SLOTH_ATTR_MAP(DiagonalAttrs, f(v.offset, a.slots.i0); f(v.dim1, a.slots.i1);
               f(v.dim2, a.slots.i2));
struct DiagonalAttrs {
  int64_t offset = 0, dim1 = 0, dim2 = 0;
  SLOTH_ATTR_VIEW(DiagonalAttrs)
};

// AsStrided, AsStridedScatter: offset in elements of the input's storage.
SLOTH_ATTR_MAP(AsStridedAttrs, f(v.size, a.dims); f(v.stride, a.slots.dims2);
               f(v.offset, a.slots.i0));
struct AsStridedAttrs {
  AttrDims size, stride;
  int64_t offset = 0;
  SLOTH_ATTR_VIEW(AsStridedAttrs)
};

// Flatten.
SLOTH_ATTR_MAP(FlattenAttrs, f(v.start_dim, a.slots.i0); f(v.end_dim, a.slots.i1));
struct FlattenAttrs {
  int64_t start_dim = 0, end_dim = 0;
  SLOTH_ATTR_VIEW(FlattenAttrs)
};

// Transpose.
SLOTH_ATTR_MAP(TransposeAttrs, f(v.dim0, a.slots.i0); f(v.dim1, a.slots.i1));
struct TransposeAttrs {
  int64_t dim0 = 0, dim1 = 0;
  SLOTH_ATTR_VIEW(TransposeAttrs)
};

// Squeeze: the size-1 dims among `dims`, or every size-1 dim when `all`.
SLOTH_ATTR_MAP(SqueezeAttrs, f(v.dims, a.dims); f(v.all, a.slots.flag));
struct SqueezeAttrs {
  AttrDims dims;
  bool all = false;
  SLOTH_ATTR_VIEW(SqueezeAttrs)
};

// Split (pieces of size_or_n elements), Chunk (size_or_n pieces); both return a list.
SLOTH_ATTR_MAP(SplitAttrs, f(v.size_or_n, a.slots.i0); f(v.dim, a.slots.i1));
struct SplitAttrs {
  int64_t size_or_n = 0, dim = 0;
  SLOTH_ATTR_VIEW(SplitAttrs)
};

// OneHot.
SLOTH_ATTR_MAP(OneHotAttrs, f(v.num_classes, a.slots.i0));
struct OneHotAttrs {
  int64_t num_classes = 0;
  SLOTH_ATTR_VIEW(OneHotAttrs)
};

// Randint: values in [low, high) of `dtype`, of `shape` (the other factories use
// Attrs::dims and Attrs::dtype alone).
SLOTH_ATTR_MAP(RandintAttrs, f(v.shape, a.dims); f(v.low, a.slots.i0); f(v.high, a.slots.i1);
               f(v.dtype, a.dtype));
struct RandintAttrs {
  AttrDims shape;
  int64_t low = 0, high = 0;
  DType dtype = DType::kFloat32;
  SLOTH_ATTR_VIEW(RandintAttrs)
};

// Dropout: p is the probability of zeroing; identity unless train.
SLOTH_ATTR_MAP(DropoutAttrs, f(v.p, a.slots.f0); f(v.train, a.slots.flag));
struct DropoutAttrs {
  double p = 0;
  bool train = false;
  SLOTH_ATTR_VIEW(DropoutAttrs)
};

// LayerNorm.
SLOTH_ATTR_MAP(LayerNormAttrs, f(v.normalized_shape, a.dims); f(v.eps, a.slots.f0));
struct LayerNormAttrs {
  AttrDims normalized_shape;
  double eps = 0;
  SLOTH_ATTR_VIEW(LayerNormAttrs)
};

// ---- normalization and losses (nn) ----
// BatchNorm: operands (x[, running_mean, running_var][, weight][, bias]); the running stats
// are operands only in eval (training normalizes with the batch statistics).
SLOTH_ATTR_MAP(BatchNormAttrs, f(v.eps, a.slots.f0); f(v.training, a.slots.flag);
               f(v.has_weight, a.slots.i0); f(v.has_bias, a.slots.i1));
struct BatchNormAttrs {
  double eps = 0;
  bool training = false;
  bool has_weight = false, has_bias = false;
  SLOTH_ATTR_VIEW(BatchNormAttrs)
};

// GroupNorm: operands (x[, weight][, bias]).
SLOTH_ATTR_MAP(GroupNormAttrs, f(v.num_groups, a.slots.i2); f(v.eps, a.slots.f0);
               f(v.has_weight, a.slots.i0); f(v.has_bias, a.slots.i1));
struct GroupNormAttrs {
  int64_t num_groups = 0;
  double eps = 0;
  bool has_weight = false, has_bias = false;
  SLOTH_ATTR_VIEW(GroupNormAttrs)
};

// CrossEntropy, NllLoss. An empty Attrs is PyTorch's default call without ignore_index (no
// target ignored), label_smoothing 0 and reduction mean; the public functions always set
// `ignores` with ignore_index (-100 by default), so a target equal to it is skipped.
enum class LossReduction : int64_t { kMean = 0, kSum = 1, kNone = 2 };
SLOTH_ATTR_MAP(LossAttrs, f(v.ignore_index, a.slots.i0); f(v.ignores, a.slots.flag);
               f(v.reduction, a.slots.i1); f(v.label_smoothing, a.slots.f0));
struct LossAttrs {
  int64_t ignore_index = 0;
  bool ignores = false;
  LossReduction reduction = LossReduction::kMean;
  double label_smoothing = 0;
  SLOTH_ATTR_VIEW(LossAttrs)
};

// ---- convolution and pooling ----
// Unfold, Fold (im2col / col2im over [N, C, H, W]): the window geometry packed in `geom`
// (kh, kw, dh, dw, ph, pw, sh, sw, eh, ew), where (ph, pw) pad the top/left and (ph + eh,
// pw + ew) the bottom/right (eh, ew > 0 only for ceil_mode pooling and padding="same");
// `output_size` is Fold's (H, W); `pad_value` fills Unfold's padding (-inf for max pooling).
// `batch_inner` (internal, conv2d's layout) lays the columns out as one matrix
// [C*kh*kw, N*L] (batch inside each row) instead of [N, C*kh*kw, L], so that a convolution
// is one GEMM and its weight gradient another, not N small ones. `extra_row` appends one row
// to Unfold's columns (per sample: [N, C*kh*kw + 1, L]; once: [C*kh*kw + 1, N*L]), of ones
// (the bias's row: the GEMM then adds the bias itself) or zeros (that row's gradient); Fold
// ignores that row.
SLOTH_ATTR_MAP(WindowAttrs, f(v.geom, a.dims); f(v.output_size, a.slots.dims2);
               f(v.pad_value, a.slots.f0); f(v.batch_inner, a.slots.flag);
               f(v.extra_row, a.slots.i0));
struct WindowAttrs {
  AttrDims geom;
  AttrDims output_size;
  double pad_value = 0;
  bool batch_inner = false;
  enum ExtraRow : int64_t { kNoRow = 0, kOnesRow = 1, kZerosRow = 2 };
  int64_t extra_row = kNoRow;
  int64_t extra_rows() const { return extra_row != kNoRow ? 1 : 0; }
  int64_t kh() const { return geom[0]; }
  int64_t kw() const { return geom[1]; }
  int64_t dh() const { return geom[2]; }
  int64_t dw() const { return geom[3]; }
  int64_t ph() const { return geom[4]; }
  int64_t pw() const { return geom[5]; }
  int64_t sh() const { return geom[6]; }
  int64_t sw() const { return geom[7]; }
  int64_t eh() const { return geom[8]; }
  int64_t ew() const { return geom[9]; }
  // Blocks along one spatial dim of size `in` (floor division, as F.unfold).
  static int64_t blocks(int64_t in, int64_t k, int64_t d, int64_t p, int64_t extra, int64_t s) {
    return (in + 2 * p + extra - d * (k - 1) - 1) / s + 1;
  }
  int64_t out_h(int64_t h) const { return blocks(h, kh(), dh(), ph(), eh(), sh()); }
  int64_t out_w(int64_t w) const { return blocks(w, kw(), dw(), pw(), ew(), sw()); }
  SLOTH_ATTR_VIEW(WindowAttrs)
};

// Conv1d, Conv2d, ConvTranspose2d: `params` = stride ++ padding ++ dilation ++ output_padding
// (each one value per spatial dim); `same` is padding="same" (padding then unused).
SLOTH_ATTR_MAP(ConvAttrs, f(v.params, a.dims); f(v.groups, a.slots.i0); f(v.same, a.slots.flag));
struct ConvAttrs {
  AttrDims params;
  int64_t groups = 1;
  bool same = false;
  size_t spatial() const { return params.size() / 4; }
  int64_t stride(size_t i) const { return params[i]; }
  int64_t padding(size_t i) const { return params[spatial() + i]; }
  int64_t dilation(size_t i) const { return params[2 * spatial() + i]; }
  int64_t output_padding(size_t i) const { return params[3 * spatial() + i]; }
  SLOTH_ATTR_VIEW(ConvAttrs)
};

// MaxPool2d, AvgPool2d: `params` = kernel ++ stride ++ padding ++ dilation (2 each);
// divisor_override 0 = none. AdaptiveAvgPool2d keeps its output size in Attrs::dims.
SLOTH_ATTR_MAP(PoolAttrs, f(v.params, a.dims); f(v.ceil_mode, a.slots.flag);
               f(v.exclude_pad, a.slots.i0); f(v.divisor_override, a.slots.i1));
struct PoolAttrs {
  AttrDims params;
  bool ceil_mode = false;
  bool exclude_pad = false;  // count_include_pad = false
  int64_t divisor_override = 0;
  int64_t kernel(int i) const { return params[i]; }
  int64_t stride(int i) const { return params[2 + i]; }
  int64_t padding(int i) const { return params[4 + i]; }
  int64_t dilation(int i) const { return params[6 + i]; }
  SLOTH_ATTR_VIEW(PoolAttrs)
};

// ---- attention and sequence ops ----
// Sdpa: scores scaled by `scale`; is_causal masks key j > query i (PyTorch 2's top-left
// aligned tril of ones(L, S)).
SLOTH_ATTR_MAP(SdpaAttrs, f(v.scale, a.slots.f0); f(v.is_causal, a.slots.flag));
struct SdpaAttrs {
  double scale = 0;
  bool is_causal = false;
  SLOTH_ATTR_VIEW(SdpaAttrs)
};

// Argsort (stable, as torch.sort on the CPU).
SLOTH_ATTR_MAP(SortAttrs, f(v.dim, a.slots.i0); f(v.descending, a.slots.flag));
struct SortAttrs {
  int64_t dim = 0;
  bool descending = false;
  SLOTH_ATTR_VIEW(SortAttrs)
};

// Topk: the k largest (or smallest) along dim, in PyTorch's CPU order.
SLOTH_ATTR_MAP(TopkAttrs, f(v.dim, a.slots.i0); f(v.k, a.slots.i1); f(v.sorted, a.slots.i2);
               f(v.largest, a.slots.flag));
struct TopkAttrs {
  int64_t dim = 0, k = 0;
  bool sorted = false;
  bool largest = false;
  SLOTH_ATTR_VIEW(TopkAttrs)
};

// Tril, Triu: keep the elements on and below (above) the diagonal-th diagonal.
SLOTH_ATTR_MAP(TriAttrs, f(v.diagonal, a.slots.i0));
struct TriAttrs {
  int64_t diagonal = 0;
  SLOTH_ATTR_VIEW(TriAttrs)
};

// ---- distributed ----
// AllReduce, Broadcast, AllGather, ReduceScatter (dist/dist.h). `world` and `rank` are the
// job's at record time (so shapes are inferred without MPI, and a 1-process world computes
// without it); `reduce` is a ReduceOp (dist/dist.h), `root` broadcast's source rank.
SLOTH_ATTR_MAP(CollectiveAttrs, f(v.reduce, a.slots.i0); f(v.root, a.slots.i1);
               f(v.world, a.slots.i2); f(v.rank, a.slots.i3));
struct CollectiveAttrs {
  enum Reduce : int64_t { kSum = 0, kAvg = 1, kMax = 2, kMin = 3 };
  int64_t reduce = kSum;
  int64_t root = 0;
  int64_t world = 1;
  int64_t rank = 0;
  SLOTH_ATTR_VIEW(CollectiveAttrs)
};

#undef SLOTH_ATTR_MAP
#undef SLOTH_ATTR_VIEW

}  // namespace sloth
