#include "nn/transformer.h"

namespace sloth::nn {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double p,
                                                 const std::string& activation, double eps,
                                                 bool batch_first, bool nf)
    : Module("TransformerEncoderLayer"), norm_first(nf), gelu_activation(activation == "gelu") {
  if (activation != "relu" && activation != "gelu")
    fail("nn::TransformerEncoderLayer: activation should be \"relu\" or \"gelu\", not \"%s\"",
         activation);
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttentionImpl>(d_model, nhead, p, true, batch_first));
  linear1 = register_module("linear1", std::make_shared<LinearImpl>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<DropoutImpl>(p));
  linear2 = register_module("linear2", std::make_shared<LinearImpl>(dim_feedforward, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNormImpl>(Shape{d_model}, eps));
  norm2 = register_module("norm2", std::make_shared<LayerNormImpl>(Shape{d_model}, eps));
  dropout1 = register_module("dropout1", std::make_shared<DropoutImpl>(p));
  dropout2 = register_module("dropout2", std::make_shared<DropoutImpl>(p));
}

Tensor TransformerEncoderLayerImpl::sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                         bool is_causal) {
  Tensor y = std::get<0>(self_attn->forward(x, x, x, kpm, false, mask, true, is_causal));
  return dropout1->forward(y);
}

Tensor TransformerEncoderLayerImpl::ff_block(const Tensor& x) {
  Tensor h = linear1->forward(x);
  h = gelu_activation ? gelu(h) : relu(h);
  return dropout2->forward(linear2->forward(dropout->forward(h)));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  if (norm_first) {
    x = x + sa_block(norm1->forward(x), src_mask, src_key_padding_mask, is_causal);
    x = x + ff_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x, src_mask, src_key_padding_mask, is_causal));
    x = norm2->forward(x + ff_block(x));
  }
  return x;
}

}  // namespace sloth::nn
