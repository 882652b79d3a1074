// Composite ops, written with other ops of the table. They never reach a backend: fusion
// turns them back into few kernels (softmax: a reduction, an exp+sum reduction, a divide),
// and autograd differentiates them through their parts, so they need no formula of their own.
#include <cmath>

#include "core/op_attrs.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth {
namespace {

using In = absl::Span<const Tensor>;

Shape dims_of(const Attrs& a) { return Shape(a.dims.begin(), a.dims.end()); }

int64_t reduced_count(const Tensor& x, const Attrs& a) {
  int64_t n = 1;
  for (int64_t d : a.dims) n *= x.shape()[d];
  return n;
}

Tensor as_float(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(kDefaultFloat); }

Tensor mean_impl(In in, const Attrs& a) {
  Tensor s = sum(in[0], dims_of(a), MeanAttrs::of(a).keepdim);
  return s / static_cast<double>(reduced_count(in[0], a));
}

Tensor var_impl(In in, const Attrs& a) {
  const Tensor& x = in[0];
  Tensor m = mean(x, dims_of(a), true);
  Tensor d = x - m;
  const auto v = VarAttrs::of(a);
  Tensor s = sum(d * d, dims_of(a), v.keepdim);
  return s / static_cast<double>(reduced_count(x, a) - (v.unbiased ? 1 : 0));
}

// sqrt(var), with PyTorch's gradient where the std is 0: zero, not 0 * inf = NaN (ATen masks
// std_backward there). The inner where keeps sqrt's own backward finite at those elements.
Tensor std_impl(In in, const Attrs& a) {
  Tensor v = var_impl(in, a);
  Tensor zero = v == 0.0;
  return where(zero, 0.0, sqrt(where(zero, 1.0, v)));
}

// The max over `dims` that softmax-like ops subtract for stability. Its gradient cancels
// exactly, so it is detached. An empty tensor has no max (amax has no identity); nothing is
// computed then, so zeros of the kept shape stand in (softmax of an empty dim is empty).
Tensor stability_shift(const Tensor& x, Shape dims) {
  if (x.numel() == 0) return sum(x, dims, true).detach();
  return amax(x, dims, true).detach();
}

Tensor logsumexp_impl(In in, const Attrs& a) {
  Tensor x = as_float(in[0]);
  Tensor m = stability_shift(x, dims_of(a));
  Tensor e = exp(x - m);
  if (ReduceAttrs::of(a).keepdim) return log(sum(e, dims_of(a), true)) + m;
  // Reduced without keepdim (not reshaped at the end), so the result is a fresh tensor, not
  // a view: PyTorch's node saves it and checks its version.
  Shape out;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) out.push_back(x.shape()[d]);
  return log(sum(e, dims_of(a), false)) + m.reshape(out);
}

Tensor softmax_impl(In in, const Attrs& a) {
  Tensor x = as_float(in[0]);
  const int64_t dim = DimAttrs::of(a).dim;
  Tensor m = stability_shift(x, {dim});
  Tensor e = exp(x - m);
  // Scaled by the reciprocal of the sum, as ATen's CPU kernel does: one division per row.
  return e * reciprocal(sum(e, {dim}, true));
}

Tensor log_softmax_impl(In in, const Attrs& a) {
  Tensor x = as_float(in[0]);
  const int64_t dim = DimAttrs::of(a).dim;
  Tensor m = stability_shift(x, {dim});
  Tensor z = x - m;
  return z - log(sum(exp(z), {dim}, true));
}

// nll_loss and cross_entropy (PyTorch 1.13's nll_loss_nd and
// cross_entropy_loss_label_smoothing, class-index targets, no class weights). A target equal
// to ignore_index adds nothing and is not counted by the mean; label smoothing mixes in
// -sum_c(log p_c) / C per sample with weight label_smoothing.
Tensor reduce_loss(const Tensor& per_sample, const Tensor& ignored, LossReduction r) {
  switch (r) {
    case LossReduction::kNone: return per_sample;
    case LossReduction::kSum: return sum(per_sample);
    case LossReduction::kMean: break;
  }
  if (!ignored.defined()) return mean(per_sample);
  return sum(per_sample) / sum(logical_not(ignored).to(per_sample.dtype()));
}

Tensor class_index_loss(const Tensor& lp_in, const Tensor& t_in, const LossAttrs& la) {
  const bool one = lp_in.dim() == 1;  // input [C] with a 0-dim target: a batch of one
  const Tensor lp = one ? lp_in.unsqueeze(0) : lp_in;
  const Tensor t = one ? t_in.reshape({1}) : t_in;
  const int64_t n = lp.size(0);
  Tensor ignored, safe_t = t;
  if (la.ignores) {
    ignored = t == Scalar(la.ignore_index);
    safe_t = where(ignored, Scalar(int64_t{0}), t);  // gather needs an in-range index
  }
  Tensor nll = -gather(lp, 1, safe_t.unsqueeze(1)).reshape({n});
  if (ignored.defined()) nll = where(ignored, Scalar(0.0), nll);
  Tensor out = reduce_loss(nll, ignored, la.reduction);
  if (la.label_smoothing > 0) {
    Tensor smooth = -sum(lp, {1});
    if (ignored.defined()) smooth = where(ignored, Scalar(0.0), smooth);
    const double c = static_cast<double>(lp.size(1));
    out = out * (1.0 - la.label_smoothing) +
          reduce_loss(smooth, ignored, la.reduction) * (la.label_smoothing / c);
  }
  return one && la.reduction == LossReduction::kNone ? out.reshape({}) : out;
}

Tensor nll_impl(In in, const Attrs& a) {
  const LossAttrs la = LossAttrs::of(a);
  if (!la.ignores && la.reduction == LossReduction::kMean) {  // the plain form, as before
    const Tensor &lp = in[0], &t = in[1];
    if (lp.dim() == 1) return -gather(lp, 0, t.reshape({1})).reshape({});
    Tensor picked = gather(lp, 1, t.unsqueeze(1));
    return -mean(picked);
  }
  return class_index_loss(in[0], in[1], la);
}

Tensor cross_entropy_impl(In in, const Attrs& a) {
  const Attrs ls = DimAttrs{.dim = in[0].dim() == 1 ? 0 : 1};
  const Tensor lp = log_softmax_impl({in[0]}, ls);
  const LossAttrs la = LossAttrs::of(a);
  if (la.label_smoothing > 0) return class_index_loss(lp, in[1], la);
  return nll_impl({lp, in[1]}, a);
}

Tensor mse_impl(In in, const Attrs&) {
  Tensor d = in[0] - in[1];
  return mean(d * d);
}

Tensor bce_logits_impl(In in, const Attrs&) {
  const Tensor &x = in[0], &y = in[1];
  return mean(relu(x) - x * y + log1p(exp(-abs(x))));
}

Tensor dropout_impl(In in, const Attrs& a) {
  const Tensor& x = in[0];
  const auto [p, train] = DropoutAttrs::of(a);
  if (!train || p == 0) return x;
  if (p == 1) return x * 0.0;
  Tensor keep = rand(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())) >= p;
  return x * keep.to(x.dtype()) * (1.0 / (1.0 - p));
}

Tensor layer_norm_impl(In in, const Attrs& a) {
  const Tensor& x = in[0];
  Shape dims;
  for (size_t i = 0; i < a.dims.size(); ++i)
    dims.push_back(x.dim() - static_cast<int64_t>(a.dims.size()) + static_cast<int64_t>(i));
  Tensor m = mean(x, dims, true);
  Tensor c = x - m;
  Tensor v = mean(c * c, dims, true);
  Tensor y = c * rsqrt(v + LayerNormAttrs::of(a).eps);
  if (in.size() > 1) y = y * in[1];
  if (in.size() > 2) y = y + in[2];
  return y;
}

// ---- normalization (nn) ----
thread_local internal::BatchStatsCapture* batch_stats_capture = nullptr;

// [C] -> [1, C, 1, ...] for an input of rank `rank`.
Tensor per_channel(const Tensor& p, int64_t rank) {
  Shape s(static_cast<size_t>(rank), 1);
  s[1] = p.numel();
  return p.reshape(s);
}

// The per-group statistics of x over `dims` in one pass of two sibling reductions, shifted
// by a value of the data itself (k, detached): with xs = x - k, mean = k + sum(xs) / n and
// the biased variance = sum(xs^2) / n - (sum(xs) / n)^2. The variance does not depend on k
// (its derivative in k is 0 for every x and k), so treating k as a constant gives exact
// derivatives of every order; a k drawn from the data keeps the subtraction well conditioned
// (a constant channel gives exactly 0). Backward then reads x and the gradient, never a
// materialized x - mean: autograd's graph is two reductions and one elementwise pass.
struct ShiftedStats {
  Tensor mean, var;
};
// `dims` are reduced in two stages when `first` is not empty: first the trailing dims (a
// contiguous inner reduction, several times faster than one over dims {0, 2, 3} with a
// prologue on the CPU backend), then the rest.
Tensor staged_sum(const Tensor& t, const Shape& first, const Shape& then) {
  return sum(first.empty() ? t : sum(t, first, true), then, true);
}
ShiftedStats shifted_stats(const Tensor& x, const Tensor& k, const Shape& first,
                           const Shape& then, double n) {
  Tensor xs = x - k;
  Tensor d = staged_sum(xs, first, then) / n;
  Tensor v = staged_sum(xs * xs, first, then) / n - d * d;
  return {d + k, v};
}

// Training: normalize with the batch statistics (biased variance), as ATen's CPU kernel does:
// y = x * alpha + beta with per-channel alpha = rstd * weight, beta = bias - mean * alpha.
// The statistics go to the public batch_norm's running-stat update through
// internal::BatchStatsCapture.
Tensor batch_norm_impl(In in, const Attrs& a) {
  const BatchNormAttrs b = BatchNormAttrs::of(a);
  const Tensor& x = in[0];
  const int64_t r = x.dim();
  size_t k = 1;
  Tensor m, scale;
  Shape inner;  // the spatial dims
  for (int64_t d = 2; d < r; ++d) inner.push_back(d);
  if (b.training && x.numel() > 0) {
    Tensor shift = x.detach().select(0, 0);  // [C, *]: the first sample's first position
    while (shift.dim() > 1) shift = shift.select(1, 0);
    const double n = static_cast<double>(x.numel() / x.size(1));
    ShiftedStats st = shifted_stats(x, per_channel(shift, r), inner, {0}, n);
    if (internal::BatchStatsCapture* cap = batch_stats_capture) cap->stats = {st.mean, st.var};
    m = st.mean;
    scale = rsqrt(st.var + b.eps);
  } else if (b.training) {  // an empty batch: nothing to normalize
    Shape dims{0};
    for (int64_t d = 2; d < r; ++d) dims.push_back(d);
    m = mean(x, dims, true);
    scale = rsqrt(mean(x * x, dims, true) + b.eps);
  } else {
    m = per_channel(in[1], r);
    scale = rsqrt(per_channel(in[2], r) + b.eps);
    k = 3;
  }
  if (b.has_weight) scale = scale * per_channel(in[k++], r);
  Tensor shift = -m * scale;
  if (b.has_bias) shift = shift + per_channel(in[k++], r);
  if (!inner.empty()) {
    // [1, C, 1, ...] -> [N, C, 1, ...]: autograd then reduces g * x for alpha (and g for
    // beta) over the trailing dims first, and the expand's backward sums the N rows.
    Shape nc(static_cast<size_t>(r), 1);
    nc[0] = x.size(0);
    nc[1] = x.size(1);
    scale = scale.expand(nc);
    shift = shift.expand(nc);
  }
  return x * scale + shift;
}

// Statistics per (sample, group) over x viewed as [N, G, C/G, S], shifted like batch_norm's
// (by each group's first value); the affine folds into per-(sample, channel) alpha and beta.
Tensor group_norm_impl(In in, const Attrs& a) {
  const GroupNormAttrs g = GroupNormAttrs::of(a);
  const Tensor& x = in[0];
  const int64_t n = x.size(0), c = x.size(1), groups = g.num_groups;
  const int64_t s = n * c == 0 ? 0 : x.numel() / (n * c);
  Tensor x4 = x.reshape({n, groups, c / groups, s});
  Tensor m, scale;
  if (x.numel() > 0) {
    Tensor shift = x4.detach().select(3, 0).select(2, 0).reshape({n, groups, 1, 1});
    ShiftedStats st = shifted_stats(x4, shift, {}, {2, 3}, static_cast<double>(c / groups * s));
    m = st.mean;
    scale = rsqrt(st.var + g.eps);
  } else {  // nothing to normalize
    m = sum(x4, {2, 3}, true);
    scale = rsqrt(m + g.eps);
  }
  size_t k = 1;
  if (g.has_weight) scale = scale * in[k++].reshape({1, groups, c / groups, 1});
  Tensor beta = -m * scale;
  if (g.has_bias) beta = beta + in[k++].reshape({1, groups, c / groups, 1});
  return (x4 * scale + beta).reshape(x.shape());
}

Tensor linear_impl(In in, const Attrs&) {
  Tensor y = matmul(in[0], in[1].t());
  if (in.size() > 2) y = y + in[2];
  return y;
}

Tensor mm_impl(In in, const Attrs&) { return matmul(in[0], in[1]); }

Tensor stack_impl(In in, const Attrs& a) {
  std::vector<Tensor> parts;
  parts.reserve(in.size());
  const int64_t dim = DimAttrs::of(a).dim;
  for (const auto& t : in) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

Tensor embedding_impl(In in, const Attrs&) {
  const Tensor &w = in[0], &idx = in[1];
  Shape out = idx.shape();
  out.push_back(w.shape()[1]);
  return index_select(w, 0, idx.reshape({-1})).reshape(out);
}

Tensor masked_fill_impl(In in, const Attrs&) {
  Tensor r = where(in[1], in[2], in[0]);
  return r.dtype() == in[0].dtype() ? r : r.to(in[0].dtype());
}

Tensor contiguous_impl(In in, const Attrs&) { return in[0].contiguous(); }

}  // namespace

internal::BatchStatsCapture::BatchStatsCapture() : previous(batch_stats_capture) {
  batch_stats_capture = this;
}
internal::BatchStatsCapture::~BatchStatsCapture() { batch_stats_capture = previous; }

namespace {

struct Register {
  Register() {
    using internal::register_decomposition;
    register_decomposition(OpId::kMean, mean_impl);
    register_decomposition(OpId::kVar, var_impl);
    register_decomposition(OpId::kStd, std_impl);
    register_decomposition(OpId::kLogsumexp, logsumexp_impl);
    register_decomposition(OpId::kSoftmax, softmax_impl);
    register_decomposition(OpId::kLogSoftmax, log_softmax_impl);
    register_decomposition(OpId::kCrossEntropy, cross_entropy_impl);
    register_decomposition(OpId::kNllLoss, nll_impl);
    register_decomposition(OpId::kMseLoss, mse_impl);
    register_decomposition(OpId::kBceWithLogits, bce_logits_impl);
    register_decomposition(OpId::kDropout, dropout_impl);
    register_decomposition(OpId::kLayerNorm, layer_norm_impl);
    register_decomposition(OpId::kLinear, linear_impl);
    register_decomposition(OpId::kMm, mm_impl);
    register_decomposition(OpId::kBmm, mm_impl);
    register_decomposition(OpId::kStack, stack_impl);
    register_decomposition(OpId::kEmbedding, embedding_impl);
    register_decomposition(OpId::kMaskedFill, masked_fill_impl);
    register_decomposition(OpId::kContiguous, contiguous_impl);
    register_decomposition(OpId::kBatchNorm, batch_norm_impl);
    register_decomposition(OpId::kGroupNorm, group_norm_impl);
  }
} register_composites;

}  // namespace
}  // namespace sloth
