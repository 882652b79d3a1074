// nn::MultiheadAttention, PyTorch's (torch.nn.MultiheadAttention): the same parameter names
// and shapes (in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight [E, E],
// out_proj.bias [E]) and init (xavier_uniform_ in_proj_weight, zero biases), so a state dict
// maps one to one. Inputs are [L, N, E] ([N, L, E] with batch_first) or unbatched [L, E].
#pragma once

#include <cstdint>
#include <memory>
#include <tuple>

#include "nn/module.h"

namespace sloth::nn {

class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                     bool bias = true, bool batch_first = false);

  // (output, attention weights). Masks as in PyTorch: a bool key_padding_mask [N, S] or
  // attn_mask [L, S] / [N * num_heads, L, S] is true where attention is NOT allowed; float
  // masks are added to the scores. need_weights = false returns an undefined weights tensor
  // and runs the fused scaled_dot_product_attention; need_weights = true returns the
  // weights (after dropout, as PyTorch 1.13 does), averaged over heads unless
  // average_attn_weights = false ([N, num_heads, L, S]). is_causal (no attn_mask) masks key
  // j > query i.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {},
                                     bool need_weights = true, const Tensor& attn_mask = {},
                                     bool average_attn_weights = true, bool is_causal = false);
  // Self-attention without weights: forward(x, x, x, {}, false).
  Tensor forward(const Tensor& x) override;

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  bool batch_first;
  Tensor& in_proj_weight;
  Tensor& in_proj_bias;  // undefined when bias = false
  std::shared_ptr<LinearImpl> out_proj;

 protected:
  std::string extra_repr() const override;
};

// Holders (LibTorch's names) over the Impl classes above.
class MultiheadAttention : public ModuleHolder<MultiheadAttentionImpl> {
 public:
  using ModuleHolder<MultiheadAttentionImpl>::ModuleHolder;
  using Impl = MultiheadAttentionImpl;
  // Spelled out (not only the holder's forwarding template) so `{}` works for a mask.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {},
                                     bool need_weights = true, const Tensor& attn_mask = {},
                                     bool average_attn_weights = true,
                                     bool is_causal = false) const {
    return get()->forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                          average_attn_weights, is_causal);
  }
  Tensor forward(const Tensor& x) const { return get()->forward(x); }
};

}  // namespace sloth::nn
