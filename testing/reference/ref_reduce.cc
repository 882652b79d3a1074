// Reference kernels: reductions, and the composites built on them (mean, var, std,
// logsumexp, softmax, log_softmax, the losses, dropout, layer_norm).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {
namespace {

bool contains(const absl::InlinedVector<int64_t, 6>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// x's values grouped by the output element of a reduction over `dims`, each group in
// row-major order (so along a single reduced dim, position k in the group is index k).
std::vector<Values> groups(const RefTensor& x, const absl::InlinedVector<int64_t, 6>& dims) {
  const int64_t r = static_cast<int64_t>(x.shape.size());
  Shape kept;
  for (int64_t d = 0; d < r; ++d)
    if (!contains(dims, d)) kept.push_back(x.shape[d]);
  std::vector<Values> g(numel(kept));
  for (int64_t i = 0; i < static_cast<int64_t>(x.v.size()); ++i) {
    Index idx = unravel(i, x.shape), k;
    for (int64_t d = 0; d < r; ++d)
      if (!contains(dims, d)) k.push_back(idx[d]);
    g[ravel(k, kept)].push_back(x.v[i]);
  }
  return g;
}

// Flat indices of each line of `shape` along dim `d` (a 0-dim tensor is one line of length 1).
std::vector<Index> lines(const Shape& shape, int64_t d) {
  if (shape.empty()) return {Index{0}};
  std::vector<Index> out;
  Strides st = contiguous_strides(shape);
  for (int64_t i = 0; i < numel(shape); ++i) {
    Index idx = unravel(i, shape);
    if (idx[d] != 0) continue;
    Index line;
    for (int64_t k = 0; k < shape[d]; ++k) line.push_back(i + k * st[d]);
    out.push_back(std::move(line));
  }
  return out;
}

double sum(const Values& g) {
  double s = 0;
  for (double x : g) s += x;
  return s;
}
double mean(const Values& g) { return sum(g) / static_cast<double>(g.size()); }
double var(const Values& g, bool unbiased) {
  double m = mean(g), s = 0;
  for (double x : g) s += (x - m) * (x - m);
  double n = static_cast<double>(g.size()) - (unbiased ? 1.0 : 0.0);
  return s / std::max(n, 0.0);
}
double logsumexp(const Values& g) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : g) m = std::max(m, x);
  if (std::isinf(m)) return m;  // all -inf (or empty): -inf; any +inf: +inf
  double s = 0;
  for (double x : g) s += std::exp(x - m);
  return m + std::log(s);
}
bool any_nan(const Values& g) {
  return std::any_of(g.begin(), g.end(), [](double x) { return std::isnan(x); });
}

}  // namespace

absl::StatusOr<Values> eval_reduce(const Ctx& c) {
  const RefTensor& x = c.in[0];
  const auto g = groups(x, c.a.dims);
  Values v;
  v.reserve(g.size());
  for (const Values& e : g) {
    switch (c.op) {
      case OpId::kSum: v.push_back(sum(e)); break;
      case OpId::kProd: {
        double p = 1;
        for (double y : e) p *= y;
        v.push_back(p);
        break;
      }
      case OpId::kAmax: case OpId::kAmin: {
        double m = e[0];
        for (double y : e) m = c.op == OpId::kAmax ? std::max(m, y) : std::min(m, y);
        v.push_back(any_nan(e) ? std::nan("") : m);
        break;
      }
      case OpId::kArgmax: case OpId::kArgmin: {
        size_t best = 0;  // first occurrence; a NaN counts as the extreme, as in PyTorch
        for (size_t k = 1; k < e.size(); ++k) {
          if (std::isnan(e[best])) break;
          bool better = std::isnan(e[k]) || (c.op == OpId::kArgmax ? e[k] > e[best] : e[k] < e[best]);
          if (better) best = k;
        }
        v.push_back(static_cast<double>(best));
        break;
      }
      case OpId::kMean: v.push_back(mean(e)); break;
      case OpId::kVar: v.push_back(var(e, VarAttrs::of(c.a).unbiased)); break;
      case OpId::kStd: v.push_back(std::sqrt(var(e, VarAttrs::of(c.a).unbiased))); break;
      case OpId::kLogsumexp: v.push_back(logsumexp(e)); break;
      default: return invalid("%s: not a reduction", op_name(c.op));
    }
  }
  return v;
}

absl::StatusOr<Values> eval_nn(const Ctx& c) {
  const RefTensor& x = c.in[0];
  switch (c.op) {
    case OpId::kSoftmax: case OpId::kLogSoftmax: {
      Values v(x.v.size());
      for (const Index& line : lines(x.shape, DimAttrs::of(c.a).dim)) {
        Values e;
        for (int64_t i : line) e.push_back(x.v[i]);
        double lse = logsumexp(e);
        for (int64_t i : line)
          v[i] = c.op == OpId::kSoftmax ? std::exp(x.v[i] - lse) : x.v[i] - lse;
      }
      return v;
    }
    case OpId::kCrossEntropy: case OpId::kNllLoss: {
      // PyTorch 1.13's nll_loss_nd / cross_entropy_loss_label_smoothing, written per sample.
      const RefTensor& t = c.in[1];
      const LossAttrs la = LossAttrs::of(c.a);
      const int64_t n = x.shape.size() == 2 ? x.shape[0] : 1, k = x.shape.back();
      double total = 0, smooth_total = 0, count = 0;
      Values per(n), smooth(n);
      for (int64_t i = 0; i < n; ++i) {
        int64_t cls = static_cast<int64_t>(t.v[i]);
        if (la.ignores && cls == la.ignore_index) { per[i] = smooth[i] = 0; continue; }
        if (cls < 0 || cls >= k)
          return invalid("%s: target %d is out of bounds for %d classes", op_name(c.op), cls, k);
        Values row(x.v.begin() + i * k, x.v.begin() + (i + 1) * k);
        const double lse = c.op == OpId::kCrossEntropy ? logsumexp(row) : 0.0;
        per[i] = -(row[cls] - lse);
        smooth[i] = 0;
        for (double r : row) smooth[i] -= r - lse;
        total += per[i];
        smooth_total += smooth[i];
        count += 1;
      }
      const double ls = la.label_smoothing;
      switch (la.reduction) {
        case LossReduction::kNone: {
          Values v(n);
          for (int64_t i = 0; i < n; ++i) v[i] = (1 - ls) * per[i] + ls / double(k) * smooth[i];
          if (ls == 0) v = per;
          return v;
        }
        case LossReduction::kSum:
          return Values{ls == 0 ? total : (1 - ls) * total + ls / double(k) * smooth_total};
        case LossReduction::kMean:
          break;
      }
      // count == 0: nan, as PyTorch's mean
      if (ls == 0) return Values{total / count};
      return Values{(1 - ls) * total / count + ls / double(k) * smooth_total / count};
    }
    case OpId::kBatchNorm: case OpId::kGroupNorm: {
      // Statistics over each channel (batch_norm: all samples; group_norm: each sample's group).
      const bool bn = c.op == OpId::kBatchNorm;
      const int64_t n = x.shape[0], ch = x.shape[1], inner = n * ch != 0 ? numel(x.shape) / (n * ch) : 0;
      double eps;
      bool has_w, has_b, training = false;
      int64_t groups = 1;
      if (bn) {
        const auto b = BatchNormAttrs::of(c.a);
        eps = b.eps, has_w = b.has_weight, has_b = b.has_bias, training = b.training;
      } else {
        const auto g = GroupNormAttrs::of(c.a);
        eps = g.eps, has_w = g.has_weight, has_b = g.has_bias, groups = g.num_groups;
      }
      size_t k = bn && !training ? 3 : 1;
      const RefTensor* w = has_w ? &c.in[k++] : nullptr;
      const RefTensor* b = has_b ? &c.in[k++] : nullptr;
      auto at = [&](int64_t s, int64_t ch_, int64_t j) { return (s * ch + ch_) * inner + j; };
      Values v(x.v.size());
      // One statistics set per (sample set, channel set): batch norm has ch sets over all n,
      // group norm has n * groups sets over one sample each.
      const int64_t sets = bn ? ch : n * groups, per_group = bn ? 1 : ch / groups;
      for (int64_t set = 0; set < sets; ++set) {
        std::vector<int64_t> idx;
        if (bn) {
          for (int64_t s = 0; s < n; ++s)
            for (int64_t j = 0; j < inner; ++j) idx.push_back(at(s, set, j));
        } else {
          const int64_t s = set / groups, g = set % groups;
          for (int64_t q = g * per_group; q < (g + 1) * per_group; ++q)
            for (int64_t j = 0; j < inner; ++j) idx.push_back(at(s, q, j));
        }
        Values e;
        for (int64_t i : idx) e.push_back(x.v[i]);
        double mu, var_;
        if (bn && !training) mu = c.in[1].v[set], var_ = c.in[2].v[set];
        else if (e.empty()) mu = var_ = 0;
        else mu = mean(e), var_ = var(e, false);
        const double rstd = 1.0 / std::sqrt(var_ + eps);
        for (int64_t i : idx) {
          const int64_t chan = (i / inner) % ch;
          double y = (x.v[i] - mu) * rstd;
          if (w) y *= w->v[chan];
          if (b) y += b->v[chan];
          v[i] = y;
        }
      }
      return v;
    }
    case OpId::kMseLoss: case OpId::kBceWithLogits: {
      const RefTensor& y = c.in[1];
      double total = 0;
      for (size_t i = 0; i < x.v.size(); ++i) {
        double a = x.v[i], b = y.v[i];
        total += c.op == OpId::kMseLoss
                     ? (a - b) * (a - b)
                     : std::max(a, 0.0) - a * b + std::log1p(std::exp(-std::fabs(a)));
      }
      return Values{total / static_cast<double>(x.v.size())};
    }
    case OpId::kDropout: {
      const auto [p, train] = DropoutAttrs::of(c.a);
      if (!train || p == 0) return x.v;
      if (p == 1) return Values(x.v.size(), 0.0);  // torch: every element dropped
      return absl::FailedPreconditionError(
          "dropout: nondeterministic in train mode with 0 < p < 1 (no reference)");
    }
    case OpId::kLayerNorm: {
      const int64_t m = numel(c.a.dims), n = m > 0 ? static_cast<int64_t>(x.v.size()) / m : 0;
      Values v(x.v.size());
      for (int64_t r = 0; r < n; ++r) {
        Values e(x.v.begin() + r * m, x.v.begin() + (r + 1) * m);
        double mu = mean(e), rstd = 1.0 / std::sqrt(var(e, false) + LayerNormAttrs::of(c.a).eps);
        for (int64_t k = 0; k < m; ++k) {
          double y = (e[k] - mu) * rstd;
          if (c.in.size() > 1) y *= c.in[1].v[k];
          if (c.in.size() > 2) y += c.in[2].v[k];
          v[r * m + k] = y;
        }
      }
      return v;
    }
    default:
      return invalid("%s: no reference kernel in eval_nn", op_name(c.op));
  }
}

}  // namespace sloth::ref
