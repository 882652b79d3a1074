// nn::TransformerEncoderLayer, PyTorch's: the submodules self_attn, linear1, dropout,
// linear2, norm1, norm2, dropout1, dropout2 (registered in that order, so the state dict
// maps one to one), post-norm by default and pre-norm with norm_first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/module.h"

namespace sloth::nn {

class TransformerEncoderLayerImpl : public Module {
 public:
  // activation: "relu" or "gelu".
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, const std::string& activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false);

  // src [L, N, E] ([N, L, E] with batch_first); masks as in MultiheadAttention (src_mask is
  // its attn_mask); is_causal (no src_mask) masks future positions.
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = {}, bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }

  std::shared_ptr<MultiheadAttentionImpl> self_attn;
  std::shared_ptr<LinearImpl> linear1;
  std::shared_ptr<DropoutImpl> dropout;
  std::shared_ptr<LinearImpl> linear2;
  std::shared_ptr<LayerNormImpl> norm1, norm2;
  std::shared_ptr<DropoutImpl> dropout1, dropout2;
  bool norm_first;
  bool gelu_activation;

 private:
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool is_causal);
  Tensor ff_block(const Tensor& x);
};

// Holders (LibTorch's names) over the Impl classes above.
class TransformerEncoderLayer : public ModuleHolder<TransformerEncoderLayerImpl> {
 public:
  using ModuleHolder<TransformerEncoderLayerImpl>::ModuleHolder;
  using Impl = TransformerEncoderLayerImpl;
  // Spelled out (not only the holder's forwarding template) so `{}` works for a mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = {}, bool is_causal = false) const {
    return get()->forward(src, src_mask, src_key_padding_mask, is_causal);
  }
  Tensor forward(const Tensor& src) const { return get()->forward(src); }
};

}  // namespace sloth::nn
