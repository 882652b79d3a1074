// Shared helpers of the reference kernels (not part of the library's interface).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "testing/reference/reference.h"
#include "core/error.h"

namespace sloth::ref {

using Values = std::vector<double>;
using Index = std::vector<int64_t>;

// What a kernel sees: the operands (values already as their dtypes hold them), the attrs as
// normalized by the rule, and the rule's result.
struct Ctx {
  OpId op;
  const std::vector<RefTensor>& in;
  const Attrs& a;
  const OutputMeta& out;
};

Index unravel(int64_t flat, const Shape& shape);
int64_t ravel(const Index& idx, const Shape& shape);
// Element of `t` read at `idx`, a multi-index of a shape `t` broadcasts to.
double bget(const RefTensor& t, const Index& idx);
// `t` broadcast to `shape` (a copy).
RefTensor broadcast_to(const RefTensor& t, const Shape& shape);
// `t`'s values cast to `dtype`.
RefTensor cast_to(const RefTensor& t, DType dtype);

// Per category; each returns the result's values (before the final cast to out.dtype).
absl::StatusOr<Values> eval_factory(const Ctx& c);
absl::StatusOr<Values> eval_elementwise(const Ctx& c);
absl::StatusOr<Values> eval_reduce(const Ctx& c);     // Reduce ops, Mean/Var/Std/Logsumexp
absl::StatusOr<Values> eval_nn(const Ctx& c);         // softmax, losses, dropout, layer_norm
absl::StatusOr<Values> eval_linalg(const Ctx& c);     // Matmul, Mm, Bmm, Linear
absl::StatusOr<Values> eval_view(const Ctx& c);       // View and Scatter ops
absl::StatusOr<std::vector<RefTensor>> eval_split(const Ctx& c);
absl::StatusOr<Values> eval_index(const Ctx& c);      // Index ops, Cat, Stack, Clone, ...
absl::StatusOr<Values> eval_kernel(const Ctx& c);     // Kernel ops (ref_kernel.cc)
// ---- convolution and pooling ----
absl::StatusOr<Values> eval_conv(const Ctx& c);       // unfold, fold, conv*, *pool2d (ref_conv.cc)
// ---- convolution kernels ----
absl::StatusOr<Values> eval_conv_kernel(const Ctx& c);  // conv_forward and its gradients (ref_conv_kernel.cc)

}  // namespace sloth::ref
