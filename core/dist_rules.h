// Shape and dtype rules of the distributed collectives (core/ops.def, `---- distributed ----`).
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/op_table.h"

namespace sloth {

absl::Status rule_collective(OpId op, absl::Span<const TensorMeta> in, Attrs& a, OutputMeta* out);

}  // namespace sloth
