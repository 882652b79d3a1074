// The public op functions: each packs its attrs and goes through call_op (sloth/dispatch.h).
#include "sloth/ops.h"

#include "sloth/dispatch.h"

namespace sloth {
namespace {

Attrs reduce_attrs(const Shape& dims, bool keepdim) {
  Attrs a;
  a.dims.assign(dims.begin(), dims.end());
  a.flag = keepdim;
  return a;
}
Attrs dim_attrs(int64_t dim) {
  Attrs a;
  a.i0 = dim;
  return a;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return call_op(OpId::kAdd, {a, internal::scaled_by_alpha(a, b, alpha, "add")});
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return call_op(OpId::kSub, {a, internal::scaled_by_alpha(a, b, alpha, "sub")});
}
Tensor mul(const Tensor& a, const Tensor& b) { return call_op(OpId::kMul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call_op(OpId::kDiv, {a, b}); }
Tensor pow(const Tensor& a, const Tensor& b) { return call_op(OpId::kPow, {a, b}); }
Tensor pow(const Tensor& a, const Scalar& b) { return call_op(OpId::kPow, {a, wrap_scalar(b)}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call_op(OpId::kMaximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call_op(OpId::kMinimum, {a, b}); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return call_op(OpId::kWhere, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) { return call_op(OpId::kWhere, {c, a, wrap_scalar(b)}); }
Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) { return call_op(OpId::kWhere, {c, wrap_scalar(a), b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return call_op(OpId::kEq, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return call_op(OpId::kNe, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return call_op(OpId::kLt, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return call_op(OpId::kLe, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return call_op(OpId::kGt, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return call_op(OpId::kGe, {a, b}); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return call_op(OpId::kLogicalAnd, {a, b}); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return call_op(OpId::kLogicalOr, {a, b}); }
Tensor logical_not(const Tensor& a) { return call_op(OpId::kLogicalNot, {a}); }
Tensor clamp(const Tensor& x, const Scalar& lo, const Scalar& hi) {
  return call_op(OpId::kClamp, {x, wrap_scalar(lo), wrap_scalar(hi)});
}

#define SLOTH_UNARY(fn, Id) \
  Tensor fn(const Tensor& x) { return call_op(OpId::k##Id, {x}); }
SLOTH_UNARY(neg, Neg)
SLOTH_UNARY(abs, Abs)
SLOTH_UNARY(exp, Exp)
SLOTH_UNARY(log, Log)
SLOTH_UNARY(log1p, Log1p)
SLOTH_UNARY(sqrt, Sqrt)
SLOTH_UNARY(rsqrt, Rsqrt)
SLOTH_UNARY(sin, Sin)
SLOTH_UNARY(cos, Cos)
SLOTH_UNARY(tanh, Tanh)
SLOTH_UNARY(sigmoid, Sigmoid)
SLOTH_UNARY(relu, Relu)
SLOTH_UNARY(gelu, Gelu)
SLOTH_UNARY(silu, Silu)
SLOTH_UNARY(erf, Erf)
SLOTH_UNARY(square, Square)
SLOTH_UNARY(reciprocal, Reciprocal)
SLOTH_UNARY(sign, Sign)
SLOTH_UNARY(floor, Floor)
SLOTH_UNARY(ceil, Ceil)
SLOTH_UNARY(round, Round)
#undef SLOTH_UNARY

Tensor sum(const Tensor& x) { return call_op(OpId::kSum, {x}, reduce_attrs({}, false)); }
Tensor sum(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kSum, {x}, reduce_attrs(dims, keepdim)); }
Tensor mean(const Tensor& x) {
  Attrs a = reduce_attrs({}, false);
  a.i3 = 1;  // no dims given: PyTorch's mean() saves nothing, mean(x, dims) saves x
  return call_op(OpId::kMean, {x}, a);
}
Tensor mean(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kMean, {x}, reduce_attrs(dims, keepdim)); }
Tensor amax(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kAmax, {x}, reduce_attrs(dims, keepdim)); }
Tensor amin(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kAmin, {x}, reduce_attrs(dims, keepdim)); }
Tensor prod(const Tensor& x, Shape dims, bool keepdim) { return call_op(OpId::kProd, {x}, reduce_attrs(dims, keepdim)); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  Attrs a = dim_attrs(dim);
  a.flag = keepdim;
  return call_op(OpId::kArgmax, {x}, a);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  Attrs a = dim_attrs(dim);
  a.flag = keepdim;
  return call_op(OpId::kArgmin, {x}, a);
}
Tensor var(const Tensor& x, Shape dims, bool unbiased, bool keepdim) {
  Attrs a = reduce_attrs(dims, keepdim);
  a.i0 = unbiased;
  return call_op(OpId::kVar, {x}, a);
}
Tensor std(const Tensor& x, Shape dims, bool unbiased, bool keepdim) {
  Attrs a = reduce_attrs(dims, keepdim);
  a.i0 = unbiased;
  return call_op(OpId::kStd, {x}, a);
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

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) { return call_op(OpId::kCat, ts, dim_attrs(dim)); }
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) { return call_op(OpId::kStack, ts, dim_attrs(dim)); }

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op(OpId::kIndexSelect, {x, index}, dim_attrs(dim));
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op(OpId::kGather, {x, index}, dim_attrs(dim));
}
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op(OpId::kScatterAdd, {base, index, src}, dim_attrs(dim));
}
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op(OpId::kIndexAdd, {base, index, src}, dim_attrs(dim));
}
Tensor index_put(const Tensor& base, const Tensor& index, const Tensor& values) {
  return call_op(OpId::kIndexPut, {base, index, values});
}
Tensor embedding(const Tensor& w, const Tensor& idx) { return call_op(OpId::kEmbedding, {w, idx}); }
Tensor one_hot(const Tensor& idx, int64_t n) { return call_op(OpId::kOneHot, {idx}, dim_attrs(n)); }
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
  Attrs a;
  a.i0 = dim;
  a.i1 = start;
  a.i2 = end;
  a.i3 = step;
  return call_op(OpId::kSliceScatter, {base, src}, a);
}
Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index) {
  Attrs a;
  a.i0 = dim;
  a.i1 = index;
  return call_op(OpId::kSelectScatter, {base, src}, a);
}
Tensor diagonal_scatter(const Tensor& base, const Tensor& src, int64_t offset, int64_t d0, int64_t d1) {
  Attrs a;
  a.i0 = offset;
  a.i1 = d0;
  a.i2 = d1;
  return call_op(OpId::kDiagonalScatter, {base, src}, a);
}
Tensor as_strided_scatter(const Tensor& base, const Tensor& src, Shape size, Shape stride,
                          int64_t offset) {
  Attrs a;
  a.dims.assign(size.begin(), size.end());
  a.dims2.assign(stride.begin(), stride.end());
  a.i0 = offset;
  return call_op(OpId::kAsStridedScatter, {base, src}, a);
}

Tensor softmax(const Tensor& x, int64_t dim) { return call_op(OpId::kSoftmax, {x}, dim_attrs(dim)); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return call_op(OpId::kLogSoftmax, {x}, dim_attrs(dim)); }
Tensor cross_entropy(const Tensor& l, const Tensor& t) { return call_op(OpId::kCrossEntropy, {l, t}); }
Tensor nll_loss(const Tensor& lp, const Tensor& t) { return call_op(OpId::kNllLoss, {lp, t}); }
Tensor mse_loss(const Tensor& a, const Tensor& b) { return call_op(OpId::kMseLoss, {a, b}); }
Tensor binary_cross_entropy_with_logits(const Tensor& a, const Tensor& b) {
  return call_op(OpId::kBceWithLogits, {a, b});
}
Tensor dropout(const Tensor& x, double p, bool train) {
  Attrs a;
  a.f0 = p;
  a.flag = train;
  return call_op(OpId::kDropout, {x}, a);
}
Tensor layer_norm(const Tensor& x, Shape ns, const Tensor& w, const Tensor& b, double eps) {
  Attrs a;
  a.dims.assign(ns.begin(), ns.end());
  a.f0 = eps;
  std::vector<Tensor> in{x};
  if (w.defined()) in.push_back(w);
  if (b.defined()) {
    if (!w.defined()) fail("layer_norm: a bias needs a weight (pass ones() as the weight)");
    in.push_back(b);
  }
  return call_op(OpId::kLayerNorm, in, a);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return call_op(OpId::kAdd, {a, wrap_scalar(b)}); }
Tensor operator-(const Tensor& a, const Scalar& b) { return call_op(OpId::kSub, {a, wrap_scalar(b)}); }
Tensor operator*(const Tensor& a, const Scalar& b) { return call_op(OpId::kMul, {a, wrap_scalar(b)}); }
Tensor operator/(const Tensor& a, const Scalar& b) { return call_op(OpId::kDiv, {a, wrap_scalar(b)}); }
Tensor operator+(const Scalar& a, const Tensor& b) { return call_op(OpId::kAdd, {wrap_scalar(a), b}); }
Tensor operator-(const Scalar& a, const Tensor& b) { return call_op(OpId::kSub, {wrap_scalar(a), b}); }
Tensor operator*(const Scalar& a, const Tensor& b) { return call_op(OpId::kMul, {wrap_scalar(a), b}); }
Tensor operator/(const Scalar& a, const Tensor& b) { return call_op(OpId::kDiv, {wrap_scalar(a), b}); }
Tensor operator-(const Tensor& a) { return neg(a); }

#define SLOTH_CMP(opr, Id)                                                                 \
  Tensor operator opr(const Tensor& a, const Tensor& b) { return call_op(OpId::k##Id, {a, b}); } \
  Tensor operator opr(const Tensor& a, const Scalar& b) { return call_op(OpId::k##Id, {a, wrap_scalar(b)}); } \
  Tensor operator opr(const Scalar& a, const Tensor& b) { return call_op(OpId::k##Id, {wrap_scalar(a), b}); }
SLOTH_CMP(==, Eq)
SLOTH_CMP(!=, Ne)
SLOTH_CMP(<, Lt)
SLOTH_CMP(<=, Le)
SLOTH_CMP(>, Gt)
SLOTH_CMP(>=, Ge)
#undef SLOTH_CMP

}  // namespace sloth
