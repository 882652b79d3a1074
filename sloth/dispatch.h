// The one path every op takes: check the operands with the op table's rule, then record
// (primitives), build a view (views), functionalize (in-place ops) or decompose (composites),
// attaching autograd history where grad is needed. Also usable to call any op by id.
#pragma once

#include <vector>

#include "absl/types/span.h"

#include "core/attrs.h"
#include "core/op_table.h"
#include "sloth/tensor.h"

namespace sloth {

// Calls op `op` on `inputs` (scalar operands as 0-dim tensors, e.g. from wrap_scalar).
Tensor call_op(OpId op, absl::Span<const Tensor> inputs, Attrs attrs = {});
// Split and Chunk: the list of views.
std::vector<Tensor> call_op_list(OpId op, const Tensor& x, Attrs attrs);
// A C++ number as an operand. It is data (a Scalar leaf), so changing it between steps does
// not change the graph; integral values act as int64 and others as float64 "wrapped numbers"
// in type promotion (like Python numbers in PyTorch).
Tensor wrap_scalar(double v);

namespace internal {
// Composite ops register their decomposition here (sloth/composites.cc), by op id.
using Decomposition = Tensor (*)(absl::Span<const Tensor> inputs, const Attrs& attrs);
void register_decomposition(OpId op, Decomposition d);
Decomposition decomposition(OpId op);
// Materializes `t`'s data (a sync of just what it needs).
void sync_tensor(const Tensor& t);
}  // namespace internal

}  // namespace sloth
