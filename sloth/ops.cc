// The public op functions: each packs its attrs and goes through call_op (sloth/dispatch.h).
#include "sloth/ops.h"

#include "core/op_attrs.h"
#include "sloth/autograd_api.h"
#include "sloth/dispatch.h"

namespace sloth {
namespace {

Attrs reduce_attrs(const Shape& dims, bool keepdim) {
  return ReduceAttrs{.dims = attr_dims(dims), .keepdim = keepdim};
}
Attrs dim_attrs(int64_t dim) { return DimAttrs{.dim = dim}; }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (a.defined() && b.defined() && internal::alpha_is_one(a, b, alpha, "add"))
    return call_op_borrowed(OpId::kAdd, a, b);
  return call_op(OpId::kAdd, {a, internal::scaled_by_alpha(a, b, alpha, "add")});
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (a.defined() && b.defined() && internal::alpha_is_one(a, b, alpha, "sub"))
    return call_op_borrowed(OpId::kSub, a, b);
  return call_op(OpId::kSub, {a, internal::scaled_by_alpha(a, b, alpha, "sub")});
}
Tensor mul(const Tensor& a, const Tensor& b) { return call_op_borrowed(OpId::kMul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return call_op_borrowed(OpId::kDiv, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return call_op(OpId::kPow, {a, b}); }
Tensor pow(const Tensor& a, const Scalar& b) { return call_op(OpId::kPow, {a, wrap_scalar(b)}); }
Tensor remainder(const Tensor& a, const Tensor& b) { return call_op(OpId::kRemainder, {a, b}); }
Tensor remainder(const Tensor& a, const Scalar& b) { return call_op(OpId::kRemainder, {a, wrap_scalar(b)}); }
Tensor remainder(const Scalar& a, const Tensor& b) { return call_op(OpId::kRemainder, {wrap_scalar(a), b}); }
Tensor fmod(const Tensor& a, const Tensor& b) { return call_op(OpId::kFmod, {a, b}); }
Tensor fmod(const Tensor& a, const Scalar& b) { return call_op(OpId::kFmod, {a, wrap_scalar(b)}); }
Tensor floor_divide(const Tensor& a, const Tensor& b) { return call_op(OpId::kFloorDivide, {a, b}); }
Tensor floor_divide(const Tensor& a, const Scalar& b) { return call_op(OpId::kFloorDivide, {a, wrap_scalar(b)}); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator%(const Tensor& a, const Scalar& b) { return remainder(a, b); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return call_op(OpId::kWhere, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) { return call_op(OpId::kWhere, {c, a, wrap_scalar(b)}); }
Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) { return call_op(OpId::kWhere, {c, wrap_scalar(a), b}); }
Tensor clamp(const Tensor& x, const Scalar& lo, const Scalar& hi) {
  return call_op(OpId::kClamp, {x, wrap_scalar(lo), wrap_scalar(hi)});
}

// The generated rows of core/ops.def (sloth/op_api.h): the op on its operands, with the attrs
// the signature names, nothing else.
#define SLOTH_API_Fn_Unary(Id, name) \
  Tensor name(const Tensor& x) { return call_op(OpId::k##Id, {x}); }
#define SLOTH_API_Fn_Binary(Id, name) \
  Tensor name(const Tensor& a, const Tensor& b) { return call_op(OpId::k##Id, {a, b}); }
#define SLOTH_API_DimFn_1(Id, name) \
  Tensor name(const Tensor& x, int64_t dim) { return call_op(OpId::k##Id, {x}, dim_attrs(dim)); }
#define SLOTH_API_DimFn_2(Id, name)                                     \
  Tensor name(const Tensor& x, int64_t dim, const Tensor& index) {      \
    return call_op(OpId::k##Id, {x, index}, dim_attrs(dim));            \
  }
#define SLOTH_API_DimFn_3(Id, name)                                                       \
  Tensor name(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {  \
    return call_op(OpId::k##Id, {base, index, src}, dim_attrs(dim));                      \
  }
#define SLOTH_API_ListDim(Id, name)                                     \
  Tensor name(const std::vector<Tensor>& tensors, int64_t dim) {        \
    return call_op(OpId::k##Id, tensors, dim_attrs(dim));               \
  }
#define SLOTH_API_ReduceFn(Id, name)                                    \
  Tensor name(const Tensor& x, Shape dims, bool keepdim) {              \
    return call_op(OpId::k##Id, {x}, reduce_attrs(dims, keepdim));      \
  }
#define SLOTH_API_ArgFn(Id, name)                                                    \
  Tensor name(const Tensor& x, int64_t dim, bool keepdim) {                          \
    return call_op(OpId::k##Id, {x}, ArgReduceAttrs{.dim = dim, .keepdim = keepdim}); \
  }                                                                                  \
  Tensor name(const Tensor& x) { return name(x.reshape({-1}), 0); }
#include "sloth/op_api_rows.inc"

Tensor sum(const Tensor& x) { return call_op(OpId::kSum, {x}, reduce_attrs({}, false)); }
Tensor sum(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kSum, {x}, reduce_attrs(dims, keepdim)); }
Tensor mean(const Tensor& x) {
  return call_op(OpId::kMean, {x}, MeanAttrs{.no_dim_list = true});
}
Tensor mean(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kMean, {x}, reduce_attrs(dims, keepdim)); }
Tensor var(const Tensor& x, Shape dims, bool unbiased, bool keepdim) {
  return call_op(OpId::kVar, {x},
                 VarAttrs{.dims = attr_dims(dims), .keepdim = keepdim, .unbiased = unbiased});
}
Tensor std(const Tensor& x, Shape dims, bool unbiased, bool keepdim) {
  return call_op(OpId::kStd, {x},
                 VarAttrs{.dims = attr_dims(dims), .keepdim = keepdim, .unbiased = unbiased});
}
Tensor logsumexp(const Tensor& x, Shape dims, bool keepdim) {
  return call_op(OpId::kLogsumexp, {x}, reduce_attrs(dims, keepdim));
}

Tensor matmul(const Tensor& a, const Tensor& b) { return call_op(OpId::kMatmul, {a, b}); }
Tensor mm(const Tensor& a, const Tensor& b) { return call_op(OpId::kMm, {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_op(OpId::kBmm, {a, b}); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (b.defined()) return call_op(OpId::kLinear, {x, w, b});
  return call_op(OpId::kLinear, {x, w});
}

Tensor index_put(const Tensor& base, const Tensor& index, const Tensor& values) {
  return call_op(OpId::kIndexPut, {base, index, values});
}
Tensor embedding(const Tensor& w, const Tensor& idx) { return call_op(OpId::kEmbedding, {w, idx}); }
Tensor one_hot(const Tensor& idx, int64_t n) {
  return call_op(OpId::kOneHot, {idx}, OneHotAttrs{.num_classes = n});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& v) {
  if (!x.defined()) return call_op(OpId::kMaskedFill, {x, mask, wrap_scalar(v)});  // names the error
  // The value is stored as x's dtype (2.5 into int64 is 2), converted once here, not through
  // a float32 where() that would round large integers.
  check_fits("masked_fill", v, x.dtype());
  return call_op(OpId::kMaskedFill,
                 {x, mask, exact_operand(v.converted_to(x.dtype()), x.dtype(), x.device())});
}

Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t start,
                     int64_t end, int64_t step) {
  return call_op(OpId::kSliceScatter, {base, src},
                 SliceAttrs{.dim = dim, .start = start, .end = end, .step = step});
}
Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index) {
  return call_op(OpId::kSelectScatter, {base, src}, SelectAttrs{.dim = dim, .index = index});
}
Tensor diagonal_scatter(const Tensor& base, const Tensor& src, int64_t offset, int64_t d0, int64_t d1) {
  return call_op(OpId::kDiagonalScatter, {base, src},
                 DiagonalAttrs{.offset = offset, .dim1 = d0, .dim2 = d1});
}
Tensor as_strided_scatter(const Tensor& base, const Tensor& src, Shape size, Shape stride,
                          int64_t offset) {
  return call_op(OpId::kAsStridedScatter, {base, src},
                 AsStridedAttrs{.size = attr_dims(size), .stride = attr_dims(stride), .offset = offset});
}

// ---- losses with options (nn) ----
static_assert(int(Reduction::kMean) == int(LossReduction::kMean) &&
              int(Reduction::kSum) == int(LossReduction::kSum) &&
              int(Reduction::kNone) == int(LossReduction::kNone));
namespace {
// ---- class-weighted losses (LibTorch API) ----
// The unweighted per-sample losses (0 where ignored) times w[y_i]; the mean divides by the
// sum of the weights of the samples not ignored, as PyTorch.
Tensor weighted_class_loss(const char* op, const Tensor& x, const Tensor& t, const Tensor& w,
                           int64_t ignore, Reduction r, double smoothing, bool logits) {
  const int64_t c = x.dim() == 1 ? x.size(0) : x.dim() >= 2 ? x.size(1) : -1;
  if (w.dim() != 1 || w.size(0) != c)
    fail("%s: weight must be 1-D with one value per class (%d), got shape %s; pass a [C] tensor",
         op, c, shape_str(w.shape()));
  if (!is_floating(w.dtype()))
    fail("%s: weight must be floating point, got %s; convert it with .to(kFloat)", op,
         dtype_name(w.dtype()));
  Tensor per = logits ? cross_entropy(x, t, {.ignore_index = ignore, .reduction = Reduction::kNone})
                      : nll_loss(x, t, {.ignore_index = ignore, .reduction = Reduction::kNone});
  Tensor keep = t != Scalar(ignore);
  Tensor idx = where(keep, t, Scalar(int64_t(0)));
  Tensor wy = index_select(w.to(per.dtype()), 0, idx.reshape({-1})).reshape(t.shape()) *
              keep.to(per.dtype());
  Tensor l = per * wy;
  auto reduce = [&](const Tensor& v) {
    return r == Reduction::kNone ? v : r == Reduction::kSum ? sum(v) : sum(v) / sum(wy);
  };
  if (!(logits && smoothing > 0)) return reduce(l);
  // ---- class weight with label_smoothing ----
  // PyTorch 1.13's cross_entropy_loss_label_smoothing: (1 - e) * weighted nll + (e / C) *
  // smooth, where smooth_i = -sum_c w[c] log_softmax(x)_ic (0 where ignored) and the mean of
  // smooth divides by the same summed target weights as the nll term.
  const int64_t cd = x.dim() == 1 ? 0 : 1;
  Shape bs(static_cast<size_t>(x.dim()), 1);
  bs[static_cast<size_t>(cd)] = c;
  Tensor lp = log_softmax(x, cd);
  Tensor smooth = -(lp * w.to(lp.dtype()).view(bs)).sum(cd) * keep.to(lp.dtype());
  return reduce(l) * (1.0 - smoothing) + reduce(smooth) * (smoothing / double(c));
}
}  // namespace

Tensor cross_entropy(const Tensor& l, const Tensor& t, const CrossEntropyOptions& o) {
  if (o.weight.defined()) return weighted_class_loss("cross_entropy", l, t, o.weight, o.ignore_index,
                                                     o.reduction, o.label_smoothing, true);
  return call_op(OpId::kCrossEntropy, {l, t},
                 LossAttrs{.ignore_index = o.ignore_index, .ignores = true,
                           .reduction = static_cast<LossReduction>(o.reduction),
                           .label_smoothing = o.label_smoothing});
}
Tensor nll_loss(const Tensor& lp, const Tensor& t, const NllLossOptions& o) {
  if (o.weight.defined())
    return weighted_class_loss("nll_loss", lp, t, o.weight, o.ignore_index, o.reduction, 0.0, false);
  return call_op(OpId::kNllLoss, {lp, t},
                 LossAttrs{.ignore_index = o.ignore_index, .ignores = true,
                           .reduction = static_cast<LossReduction>(o.reduction)});
}
Tensor mse_loss(const Tensor& a, const Tensor& b) { return call_op(OpId::kMseLoss, {a, b}); }
// ---- class-weighted losses (LibTorch API) ----
Tensor nll_loss(const Tensor& lp, const Tensor& t, const Tensor& w, Reduction r, int64_t ignore) {
  return nll_loss(lp, t, NllLossOptions{.ignore_index = ignore, .reduction = r, .weight = w});
}
Tensor cross_entropy(const Tensor& l, const Tensor& t, const Tensor& w, Reduction r,
                     int64_t ignore, double smoothing) {
  return cross_entropy(l, t, CrossEntropyOptions{.ignore_index = ignore, .label_smoothing = smoothing,
                                                 .reduction = r, .weight = w});
}
Tensor binary_cross_entropy_with_logits(const Tensor& a, const Tensor& b) {
  return call_op(OpId::kBceWithLogits, {a, b});
}
Tensor dropout(const Tensor& x, double p, bool train) {
  return call_op(OpId::kDropout, {x}, DropoutAttrs{.p = p, .train = train});
}
Tensor layer_norm(const Tensor& x, Shape ns, const Tensor& w, const Tensor& b, double eps) {
  const Attrs a = LayerNormAttrs{.normalized_shape = attr_dims(ns), .eps = eps};
  std::vector<Tensor> in{x};
  if (w.defined()) in.push_back(w);
  if (b.defined()) {
    if (!w.defined()) fail("layer_norm: a bias needs a weight (pass ones() as the weight)");
    in.push_back(b);
  }
  return call_op(OpId::kLayerNorm, in, a);
}

// ---- normalization (nn) ----
namespace {
// The running statistics' checks that the op's rule cannot make in training (they are not
// operands there); run before anything is recorded.
void check_running_stats(const Tensor& x, const Tensor& rm, const Tensor& rv, bool training) {
  if (rm.defined() != rv.defined())
    fail("batch_norm: running_mean and running_var must both be given or both be undefined "
         "(running_mean %s, running_var %s)",
         rm.defined() ? "given" : "undefined", rv.defined() ? "given" : "undefined");
  if (!rm.defined()) {
    if (!training)
      fail("batch_norm: running_mean and running_var must be defined in evaluation mode "
           "(training = false); pass the running statistics or training = true");
    return;
  }
  if (!training || !x.defined() || x.dim() < 2) return;  // the rule names these
  const int64_t c = x.size(1);
  for (const auto& [t, name] : {std::pair{&rm, "running_mean"}, std::pair{&rv, "running_var"}}) {
    if (t->shape() != Shape{c})
      fail("batch_norm: %s %s must have shape [%d], one value per channel of input %s", name,
           shape_str(t->shape()), c, shape_str(x.shape()));
    if (!is_floating(t->dtype()))
      fail("batch_norm: %s must be a floating-point tensor, got %s", name,
           dtype_name(t->dtype()));
    if (t->requires_grad())
      fail("batch_norm: %s requires grad; running statistics are buffers updated in place "
           "(detach them)", name);
  }
}

// One of the two momentum forms: a number (PyTorch's momentum) or a 0-dim tensor.
template <class M>
Tensor batch_norm_any(const Tensor& x, const Tensor& rm, const Tensor& rv, const Tensor& w,
                      const Tensor& b, bool training, const M& momentum, double eps) {
  check_running_stats(x, rm, rv, training);
  std::vector<Tensor> in{x};
  if (!training) in.insert(in.end(), {rm, rv});
  if (w.defined()) in.push_back(w);
  if (b.defined()) in.push_back(b);
  internal::BatchStatsCapture capture;
  Tensor y = call_op(OpId::kBatchNorm, in,
                     BatchNormAttrs{.eps = eps, .training = training,
                                    .has_weight = w.defined(), .has_bias = b.defined()});
  if (training && rm.defined()) {
    NoGradGuard g;
    // The normalization's own statistics (no second pass over x).
    Tensor m = capture.stats.mean, v = capture.stats.var;
    if (!m.defined()) fail("batch_norm: internal error: the batch statistics were not captured");
    m = m.detach(), v = v.detach();
    const int64_t c = x.size(1), n = x.numel() / c;
    Tensor mean_c = m.reshape({c}), var_c = v.reshape({c}) * (double(n) / double(n - 1));
    if (mean_c.dtype() != rm.dtype()) mean_c = mean_c.to(rm.dtype());
    if (var_c.dtype() != rv.dtype()) var_c = var_c.to(rv.dtype());
    Tensor running_mean = rm, running_var = rv;  // handles on the caller's buffers
    running_mean.mul_(1.0 - momentum).add_(mean_c * momentum);
    running_var.mul_(1.0 - momentum).add_(var_c * momentum);
  }
  return y;
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& rm, const Tensor& rv, const Tensor& w,
                  const Tensor& b, bool training, double momentum, double eps) {
  return batch_norm_any(x, rm, rv, w, b, training, momentum, eps);
}
Tensor internal::batch_norm(const Tensor& x, const Tensor& rm, const Tensor& rv,
                            const Tensor& w, const Tensor& b, bool training,
                            const Tensor& momentum, double eps) {
  return batch_norm_any(x, rm, rv, w, b, training, momentum, eps);
}
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& w, const Tensor& b,
                  double eps) {
  std::vector<Tensor> in{x};
  if (w.defined()) in.push_back(w);
  if (b.defined()) in.push_back(b);
  return call_op(OpId::kGroupNorm, in,
                 GroupNormAttrs{.num_groups = num_groups, .eps = eps,
                                .has_weight = w.defined(), .has_bias = b.defined()});
}

// The operators' alpha is 1, which has nothing to check (add/sub ask alpha_is_one, a call
// per op for `acc = acc + s`); undefined operands take add/sub's path to its error.
Tensor operator+(const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined()) return call_op_borrowed(OpId::kAdd, a, b);
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined()) return call_op_borrowed(OpId::kSub, a, b);
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
namespace {
// A number on either side of an operator: a wrapped number operand (sloth/dispatch.h).
Tensor with_number(OpId op, const Tensor& a, const Scalar& b) { return call_op_number(op, a, b); }
Tensor with_number(OpId op, const Scalar& a, const Tensor& b) {
  return call_op_number(op, b, a, /*number_first=*/true);
}
}  // namespace
Tensor operator+(const Tensor& a, const Scalar& b) { return with_number(OpId::kAdd, a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return with_number(OpId::kSub, a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return with_number(OpId::kMul, a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return with_number(OpId::kDiv, a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return with_number(OpId::kAdd, a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return with_number(OpId::kSub, a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return with_number(OpId::kMul, a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return with_number(OpId::kDiv, a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

#define SLOTH_CMP(opr, Id)                                                                 \
  Tensor operator opr(const Tensor& a, const Tensor& b) { return call_op(OpId::k##Id, {a, b}); } \
  Tensor operator opr(const Tensor& a, const Scalar& b) { return with_number(OpId::k##Id, a, b); } \
  Tensor operator opr(const Scalar& a, const Tensor& b) { return with_number(OpId::k##Id, a, b); }
SLOTH_CMP(==, Eq)
SLOTH_CMP(!=, Ne)
SLOTH_CMP(<, Lt)
SLOTH_CMP(<=, Le)
SLOTH_CMP(>, Gt)
SLOTH_CMP(>=, Ge)
#undef SLOTH_CMP

}  // namespace sloth
