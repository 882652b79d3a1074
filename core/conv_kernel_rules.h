// Shape and dtype rules of conv2d's dedicated kernels (core/ops.def): ConvForward,
// ConvInputGrad, ConvWeightGrad. They are internal (conv2d's decomposition and its
// derivatives call them with checked arguments), so the rules check consistency only.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/op_table.h"

namespace sloth {

// ConvForward (x [N,C,H,W], w [O,C,kh,kw][, b [O]]) -> [N,O,Ho,Wo];
// ConvInputGrad (dy [N,O,Ho,Wo], w [O,C,kh,kw]) -> [N,C,H,W] (H, W = output_size);
// ConvWeightGrad (dy [N,O,Ho,Wo], x [N,C,H,W]) -> [O,C,kh,kw]. WindowAttrs give the window.
absl::Status rule_conv_kernel(OpId op, absl::Span<const TensorMeta> in, Attrs& a,
                              OutputMeta* out);

}  // namespace sloth
