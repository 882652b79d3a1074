// Attention and sequence ops: the public functions (scaled_dot_product_attention, tril, triu,
// cumsum, argsort, sort, topk, multinomial) and the decompositions of tril and triu.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/op_attrs.h"
#include "sloth/autograd_api.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth {
namespace internal {

Tensor attention_scores(const Tensor& q, const Tensor& k, const Tensor& mask, double scale,
                        bool is_causal) {
  Tensor s = matmul(q, k.transpose(-1, -2)) * scale;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    const int64_t L = q.shape()[q.dim() - 2], S = k.shape()[k.dim() - 2];
    Tensor keep = tril(ones({L, S}, TensorOptions().dtype(DType::kBool).device(q.device())));
    s = masked_fill(s, logical_not(keep), neg_inf);
  }
  if (mask.defined()) {
    if (mask.dtype() == DType::kBool) s = masked_fill(s, logical_not(mask), neg_inf);
    else s = s + mask;
  }
  return s;
}

}  // namespace internal

namespace {

using In = absl::Span<const Tensor>;

// tril/triu: keep where col - row <= diagonal (tril) or >= diagonal (triu).
Tensor tri_impl(const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t L = x.shape()[x.dim() - 2], S = x.shape()[x.dim() - 1];
  const TensorOptions o = TensorOptions().dtype(DType::kInt64).device(x.device());
  Tensor off = arange(S, o).unsqueeze(0) - arange(L, o).unsqueeze(1);
  Tensor keep = lower ? off <= Scalar(diagonal) : off >= Scalar(diagonal);
  return masked_fill(x, logical_not(keep), 0);
}
Tensor tril_impl(In in, const Attrs& a) { return tri_impl(in[0], TriAttrs::of(a).diagonal, true); }
Tensor triu_impl(In in, const Attrs& a) { return tri_impl(in[0], TriAttrs::of(a).diagonal, false); }

struct Register {
  Register() {
    internal::register_decomposition(OpId::kTril, tril_impl);
    internal::register_decomposition(OpId::kTriu, triu_impl);
  }
} register_decompositions;

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal) {
  if (!q.defined() || !k.defined() || !v.defined())
    fail("scaled_dot_product_attention: query, key and value must be defined tensors");
  if (!(dropout_p >= 0 && dropout_p <= 1))
    fail("scaled_dot_product_attention: dropout_p has to be between 0 and 1, but got %g",
         dropout_p);
  std::vector<Tensor> in{q, k, v};
  if (attn_mask.defined()) in.push_back(attn_mask);
  const double scale = q.dim() >= 1 ? 1.0 / std::sqrt(static_cast<double>(q.shape().back())) : 1.0;
  const Attrs a = SdpaAttrs{.scale = scale, .is_causal = is_causal};
  // The fused op on the CPU; dropout and CUDA take the composite path (matmul, softmax,
  // dropout, matmul), checked by the same rule first so errors read the same.
  if (dropout_p == 0 && q.device().is_cpu()) return call_op(OpId::kSdpa, in, a);
  std::vector<Shape> shapes;
  std::vector<TensorMeta> metas;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  for (size_t i = 0; i < in.size(); ++i) metas.push_back({&shapes[i], in[i].dtype()});
  Attrs checked = a;
  OutputMeta out;
  throw_if_error(infer(OpId::kSdpa, metas, checked, &out));
  Tensor p = softmax(internal::attention_scores(q, k, attn_mask, scale, is_causal), -1);
  if (dropout_p > 0) p = dropout(p, dropout_p, true);
  return matmul(p, v);
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  return call_op(OpId::kTril, {x}, TriAttrs{.diagonal = diagonal});
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  return call_op(OpId::kTriu, {x}, TriAttrs{.diagonal = diagonal});
}
Tensor cumsum(const Tensor& x, int64_t dim) {
  return call_op(OpId::kCumsum, {x}, DimAttrs{.dim = dim});
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return call_op(OpId::kArgsort, {x}, SortAttrs{.dim = dim, .descending = descending});
}
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  Tensor idx = argsort(x, dim, descending);
  return {x.dim() == 0 ? x.clone() : gather(x, dim, idx), idx};
}
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  Tensor idx = call_op(OpId::kTopk, {x},
                       TopkAttrs{.dim = dim, .k = k, .sorted = sorted, .largest = largest});
  return {x.dim() == 0 ? x.clone() : gather(x, dim, idx), idx};
}

// PyTorch's algorithms in sloth ops: with replacement, inverse-CDF sampling (the index of a
// uniform among the row's cumulative sums); without, the exponential race (topk of
// log(u) / p, the k first arrivals of independent exponential clocks of rates p).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const int64_t nd = probs.dim();
  if (nd != 1 && nd != 2)
    fail("multinomial: prob_dist must be 1 or 2 dim, got %s", shape_str(probs.shape()));
  if (!is_floating(probs.dtype()))
    fail("multinomial: only supports floating-point dtypes for input, got %s",
         dtype_name(probs.dtype()));
  const int64_t C = probs.shape().back();
  if (C == 0) fail("multinomial: prob_dist %s has no categories", shape_str(probs.shape()));
  if (num_samples <= 0)
    fail("multinomial: cannot sample n_sample <= 0 samples (num_samples = %d)", num_samples);
  if (!replacement && num_samples > C)
    fail("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
         "(num_samples = %d, %d categories); pass replacement = true",
         num_samples, C);
  NoGradGuard no_grad;
  Tensor p = (nd == 1 ? probs.unsqueeze(0) : probs).detach().to(DType::kFloat64);
  // One read-back checks every row (the checks PyTorch's kernel makes).
  const double inf = std::numeric_limits<double>::infinity();
  Tensor bad = sum(logical_not(logical_and(p >= 0.0, p < inf)).to(DType::kFloat64));
  Tensor min_sum = amin(sum(p, {1}));
  Tensor min_nonzero = amin(sum((p > 0.0).to(DType::kFloat64), {1}));
  const std::vector<double> c =
      stack({bad, min_sum, min_nonzero}).to_vector<double>();
  if (c[0] > 0) fail("multinomial: probability tensor contains either `inf`, `nan` or element < 0");
  if (!(c[1] > 0)) fail("multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  if (!replacement && c[2] < static_cast<double>(num_samples))
    fail("multinomial: invalid multinomial distribution (with replacement=False, not enough "
         "non-negative category to sample): a row has %g categories of nonzero probability, "
         "num_samples = %d",
         c[2], num_samples);
  const int64_t N = p.shape()[0];
  const TensorOptions f64 = TensorOptions().dtype(DType::kFloat64).device(probs.device());
  Tensor out;
  if (replacement) {
    Tensor cdf = cumsum(p, 1) / sum(p, {1}, true);
    Tensor u = rand({N, num_samples}, f64);
    Tensor idx = sum(cdf.unsqueeze(1) <= u.unsqueeze(2), {2});
    out = clamp(idx, 0, C - 1);
  } else {
    Tensor keys = log(rand({N, C}, f64)) / p;
    out = std::get<1>(topk(keys, num_samples, 1, true, true));
  }
  return nd == 1 ? out.squeeze(0) : out;
}

}  // namespace sloth
