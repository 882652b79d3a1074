// Reference kernels of the Kernel-category ops (core/ops.def): plain double loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {
namespace {

// ---- attention and sequence ops ----
// Rows along `dim` of a row-major shape: (outer, n, inner).
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  Lines(const Shape& s, int64_t dim) {
    if (s.empty()) return;
    for (int64_t d = 0; d < dim; ++d) outer *= s[d];
    n = s[dim];
    for (size_t d = dim + 1; d < s.size(); ++d) inner *= s[d];
  }
  int64_t at(int64_t o, int64_t i, int64_t j, int64_t len) const {
    return (o * len + j) * inner + i;
  }
};

// Softmax(q k^T * scale + mask) v, one query row at a time, in double.
Values sdpa(const Ctx& c) {
  const RefTensor &q = c.in[0], &k = c.in[1], &v = c.in[2];
  const SdpaAttrs at = SdpaAttrs::of(c.a);
  const size_t r = q.shape.size();
  const int64_t L = q.shape[r - 2], E = q.shape[r - 1], S = k.shape[r - 2], Ev = v.shape[r - 1];
  const int64_t B = numel(q.shape) / std::max<int64_t>(L * E, 1);
  Shape scores(q.shape.begin(), q.shape.end() - 1);
  scores.push_back(S);
  const bool has_mask = c.in.size() > 3;
  const RefTensor mask = has_mask ? broadcast_to(c.in[3], scores) : RefTensor{};
  Values out(static_cast<size_t>(numel(c.out.shape)), 0.0);
  std::vector<double> p(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double s = 0;
        for (int64_t e = 0; e < E; ++e) s += q.v[(b * L + i) * E + e] * k.v[(b * S + j) * E + e];
        s *= at.scale;
        if (at.is_causal && j > i) s = -std::numeric_limits<double>::infinity();
        if (has_mask) {
          const double m = mask.v[(b * L + i) * S + j];
          if (mask.dtype == DType::kBool) { if (m == 0) s = -std::numeric_limits<double>::infinity(); }
          else s += m;
        }
        p[j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t j = 0; j < S; ++j)
        for (int64_t e = 0; e < Ev; ++e)
          out[(b * L + i) * Ev + e] += p[j] / sum * v.v[(b * S + j) * Ev + e];
    }
  return out;
}

Values cumsum(const Ctx& c) {
  const RefTensor& x = c.in[0];
  const Lines l(x.shape, DimAttrs::of(c.a).dim);
  Values out(x.v.size());
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < l.n; ++j) out[l.at(o, i, j, l.n)] = acc += x.v[l.at(o, i, j, l.n)];
    }
  return out;
}

// Indices of a line ordered by value (ties by position; NaN largest), the first `k`.
std::vector<int64_t> order(const std::vector<double>& line, bool descending) {
  std::vector<int64_t> idx(line.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int64_t i) { return std::isnan(line[i]) ? std::numeric_limits<double>::infinity() : line[i]; };
  auto nan = [&](int64_t i) { return std::isnan(line[i]); };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    if (nan(a) != nan(b)) return descending ? nan(a) : nan(b);
    return descending ? key(a) > key(b) : key(a) < key(b);
  });
  return idx;
}

Values sort_like(const Ctx& c, int64_t dim, bool descending, int64_t k) {
  const RefTensor& x = c.in[0];
  const Lines l(x.shape, dim);
  Values out(static_cast<size_t>(l.outer * l.inner * k));
  std::vector<double> line(static_cast<size_t>(l.n));
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      for (int64_t j = 0; j < l.n; ++j) line[j] = x.v[l.at(o, i, j, l.n)];
      const std::vector<int64_t> idx = order(line, descending);
      for (int64_t j = 0; j < k; ++j) out[l.at(o, i, j, k)] = static_cast<double>(idx[j]);
    }
  return out;
}

Values tri(const Ctx& c, bool lower) {
  const RefTensor& x = c.in[0];
  const size_t r = x.shape.size();
  const int64_t L = x.shape[r - 2], S = x.shape[r - 1], d = TriAttrs::of(c.a).diagonal;
  Values out = x.v;
  for (size_t e = 0; e < out.size(); ++e) {
    const int64_t i = (static_cast<int64_t>(e) / S) % std::max<int64_t>(L, 1),
                  j = static_cast<int64_t>(e) % S;
    if (lower ? j - i > d : j - i < d) out[e] = 0;
  }
  return out;
}

}  // namespace

absl::StatusOr<Values> eval_kernel(const Ctx& c) {
  switch (c.op) {
    // ---- convolution and pooling ----
    case OpId::kUnfold: case OpId::kFold: return eval_conv(c);
    // ---- attention and sequence ops ----
    case OpId::kSdpa: return sdpa(c);
    case OpId::kCumsum: return cumsum(c);
    case OpId::kArgsort: {
      const SortAttrs at = SortAttrs::of(c.a);
      return sort_like(c, at.dim, at.descending, Lines(c.in[0].shape, at.dim).n);
    }
    case OpId::kTopk: {
      const TopkAttrs at = TopkAttrs::of(c.a);
      return sort_like(c, at.dim, at.largest, at.k);
    }
    case OpId::kTril: return tri(c, true);
    case OpId::kTriu: return tri(c, false);
    // ---- convolution kernels ----
    case OpId::kConvForward: case OpId::kConvInputGrad: case OpId::kConvWeightGrad:
      return eval_conv_kernel(c);
    // ---- pooling (Kernel) ----
    case OpId::kMaxPool2dIndices: case OpId::kMaxPool2dGather: case OpId::kMaxPool2dScatter:
      return eval_conv(c);
    // ---- distributed ----
    case OpId::kAllReduce: case OpId::kBroadcast: case OpId::kAllGather:
    case OpId::kReduceScatter: {
      // The reference is one process: every collective of a 1-process world returns its
      // input (all_reduce's kAvg divides by 1). Multi-process values are checked by
      // tests/dist_test under mpirun against closed forms.
      const CollectiveAttrs at = CollectiveAttrs::of(c.a);
      if (at.world != 1)
        return invalid("%s: the reference computes a 1-process world only, got world = %d",
                       op_name(c.op), at.world);
      return c.in[0].v;
    }
    default: return invalid("%s: no reference kernel", op_name(c.op));
  }
}

}  // namespace sloth::ref
