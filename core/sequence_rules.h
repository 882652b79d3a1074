// Shape and dtype rules of the attention and sequence ops (core/ops.def).
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/op_table.h"

namespace sloth {

absl::Status rule_sdpa(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_cumsum(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_argsort(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_topk(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);
absl::Status rule_tril(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);

}  // namespace sloth
