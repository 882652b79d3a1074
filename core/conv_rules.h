// Shape and dtype rules of the convolution and pooling ops (core/ops.def): Unfold, Fold and
// the Conv/Pool composites. Their errors follow PyTorch's (which check failed, with the
// shapes) and say how to fix the call.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/op_table.h"

namespace sloth {

absl::Status rule_unfold(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_fold(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_conv(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_pool(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_adaptive_pool(OpId op, absl::Span<const TensorMeta> in, Attrs& a,
                                OutputMeta* out);

// The pooled size of one spatial dim (ATen's pooling_output_shape): with ceil_mode the last
// window may hang over the bottom/right padding, but must start inside the input or the
// left padding.
int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                      bool ceil_mode);

// ---- pooling (Kernel) ----
// MaxPool2dIndices: max_pool2d's shape and checks (errors name max_pool2d), int64 result.
absl::Status rule_max_pool_indices(OpId op, absl::Span<const TensorMeta> in, Attrs& a,
                                   OutputMeta* out);
// MaxPool2dGather (x [N, C, H, W], idx int64 [N, C, Ho, Wo]) and MaxPool2dScatter (g [N, C, Ho,
// Wo], idx int64 of g's shape; dims = (H, W)).
absl::Status rule_max_pool_gather(OpId op, absl::Span<const TensorMeta> in, Attrs& a,
                                  OutputMeta* out);
absl::Status rule_max_pool_scatter(OpId op, absl::Span<const TensorMeta> in, Attrs& a,
                                   OutputMeta* out);

}  // namespace sloth
