#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace sloth::nn {
namespace {

Tensor xavier_uniform(int64_t fan_out, int64_t fan_in) {
  NoGradGuard g;
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return (rand({fan_out, fan_in}) * (2 * bound) - bound).detach();
}

const double kNegInf = -std::numeric_limits<double>::infinity();

// A MultiheadAttention mask (bool: true = masked out; float: added) as an additive float mask.
Tensor additive(const Tensor& m, DType dtype) {
  if (m.dtype() == DType::kBool)
    return masked_fill(zeros(m.shape(), TensorOptions().dtype(dtype).device(m.device())), m, kNegInf);
  return m.dtype() == dtype ? m : m.to(dtype);
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t e, int64_t h, double p, bool bias, bool bf)
    : Module("MultiheadAttention"),
      embed_dim(e),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      dropout(p),
      batch_first(bf),
      in_proj_weight(register_parameter(
          "in_proj_weight", (e > 0 && h > 0 && e % h == 0) ? xavier_uniform(3 * e, e) : Tensor())),
      in_proj_bias(register_parameter("in_proj_bias", bias && e > 0 ? zeros({3 * e}) : Tensor())) {
  if (e <= 0 || h <= 0 || e % h != 0)
    fail("nn::MultiheadAttention: embed_dim (%d) must be positive and divisible by num_heads (%d)",
         e, h);
  if (!(p >= 0 && p <= 1))
    fail("nn::MultiheadAttention: dropout probability has to be between 0 and 1, but got %g", p);
  out_proj = register_module("out_proj", std::make_shared<LinearImpl>(e, e, bias));
  if (bias) {
    NoGradGuard g;
    out_proj->bias.zero_();
  }
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x) {
  return std::get<0>(forward(x, x, x, Tensor(), false));
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask,
    bool need_weights, const Tensor& attn_mask, bool average_attn_weights, bool is_causal) {
  const int64_t E = embed_dim, H = num_heads, D = head_dim;
  const int64_t nd = query.dim();
  if ((nd != 2 && nd != 3) || key.dim() != nd || value.dim() != nd || query.size(-1) != E ||
      key.size(-1) != E || value.size(-1) != E)
    fail("nn::MultiheadAttention(%d, %d): expected query, key and value of shape %s with "
         "E = %d (or unbatched [L, E]), got query %s, key %s, value %s",
         E, H, batch_first ? "[N, L, E]" : "[L, N, E]", E, shape_str(query.shape()),
         shape_str(key.shape()), shape_str(value.shape()));
  if (is_causal && attn_mask.defined())
    fail("nn::MultiheadAttention: pass either attn_mask or is_causal = true, not both");
  const bool batched = nd == 3;
  const int64_t bdim = batch_first ? 0 : 1;
  Tensor q = batched ? query : query.unsqueeze(bdim);
  Tensor k = batched ? key : key.unsqueeze(bdim);
  Tensor v = batched ? value : value.unsqueeze(bdim);
  const int64_t N = q.size(bdim), L = q.size(1 - bdim), S = k.size(1 - bdim);
  if (k.size(bdim) != N || v.size(bdim) != N || v.size(1 - bdim) != S)
    fail("nn::MultiheadAttention: key %s and value %s must match query %s's batch and each "
         "other's length",
         shape_str(key.shape()), shape_str(value.shape()), shape_str(query.shape()));

  // Projections: one GEMM for self-attention (PyTorch's in_proj_packed), three otherwise.
  Tensor qp, kp, vp;
  if (query.impl() == key.impl() && key.impl() == value.impl()) {
    std::vector<Tensor> parts = linear(q, in_proj_weight, in_proj_bias).chunk(3, -1);
    qp = parts[0], kp = parts[1], vp = parts[2];
  } else {
    auto w = [&](int i) { return in_proj_weight.narrow(0, i * E, E); };
    auto b = [&](int i) { return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor(); };
    qp = linear(q, w(0), b(0)), kp = linear(k, w(1), b(1)), vp = linear(v, w(2), b(2));
  }
  // [L, N, E] / [N, L, E] -> [N, H, L, D].
  auto heads = [&](const Tensor& t, int64_t len) {
    return batch_first ? t.reshape({N, len, H, D}).permute({0, 2, 1, 3})
                       : t.reshape({len, N, H, D}).permute({1, 2, 0, 3});
  };
  const Tensor qh = heads(qp, L), kh = heads(kp, S), vh = heads(vp, S);

  // Masks, in scaled_dot_product_attention's terms (bool: true takes part; float: added),
  // broadcasting to [N, H, L, S].
  Tensor am = attn_mask, kpm = key_padding_mask;
  if (am.defined()) {
    const bool ok = (am.dim() == 2 && am.size(0) == L && am.size(1) == S) ||
                    (am.dim() == 3 && am.size(0) == N * H && am.size(1) == L && am.size(2) == S);
    if (!ok)
      fail("nn::MultiheadAttention: attn_mask %s must be [L, S] = [%d, %d] or "
           "[N * num_heads, L, S] = [%d, %d, %d]",
           shape_str(am.shape()), L, S, N * H, L, S);
    if (am.dim() == 3) am = am.reshape({N, H, L, S});
  }
  if (kpm.defined()) {
    if (kpm.dim() != (batched ? 2 : 1) || kpm.size(-1) != S || (batched && kpm.size(0) != N))
      fail("nn::MultiheadAttention: key_padding_mask %s must be [N, S] = [%d, %d]",
           shape_str(kpm.shape()), N, S);
    kpm = kpm.reshape({N, 1, 1, S});
    // Causal with padding: both go into one mask.
    if (is_causal) {
      am = logical_not(tril(ones({L, S}, TensorOptions().dtype(DType::kBool).device(q.device()))));
      is_causal = false;
    }
  }
  Tensor mask;
  const DType dt = q.dtype();
  if (am.defined() && kpm.defined()) {
    if (am.dtype() == DType::kBool && kpm.dtype() == DType::kBool) mask = logical_not(logical_or(am, kpm));
    else mask = additive(am, dt) + additive(kpm, dt);
  } else if (am.defined() || kpm.defined()) {
    const Tensor& m = am.defined() ? am : kpm;
    mask = m.dtype() == DType::kBool ? logical_not(m) : additive(m, dt);
  }

  const double p = is_training() ? dropout : 0.0;
  Tensor o, weights;
  if (!need_weights) {
    o = scaled_dot_product_attention(qh, kh, vh, mask, p, is_causal);
  } else {
    Tensor s = matmul(qh, kh.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(D)));
    if (is_causal) mask = tril(ones({L, S}, TensorOptions().dtype(DType::kBool).device(q.device())));
    if (mask.defined())
      s = mask.dtype() == DType::kBool ? masked_fill(s, logical_not(mask), kNegInf) : s + mask;
    Tensor a = softmax(s, -1);
    if (p > 0) a = sloth::dropout(a, p, true);
    o = matmul(a, vh);
    weights = average_attn_weights ? a.mean({1}) : a;
    if (!batched) weights = weights.squeeze(0);
  }
  o = batch_first ? o.permute({0, 2, 1, 3}).reshape({N, L, E})
                  : o.permute({2, 0, 1, 3}).reshape({L, N, E});
  o = out_proj->forward(o);
  if (!batched) o = o.squeeze(bdim);
  return {o, weights};
}

std::string MultiheadAttentionImpl::extra_repr() const {
  std::ostringstream os;
  os << "embed_dim=" << embed_dim << ", num_heads=" << num_heads << ", dropout=" << dropout
     << ", batch_first=" << (batch_first ? "True" : "False");
  return os.str();
}

}  // namespace sloth::nn
