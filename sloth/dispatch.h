// The one path every op takes: check the operands with the op table's rule, then record
// (primitives), build a view (views), functionalize (in-place ops) or decompose (composites),
// attaching autograd history where grad is needed. Also usable to call any op by id.
#pragma once

#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "autograd/function.h"

#include "core/attrs.h"
#include "core/op_table.h"
#include "core/scalar.h"
#include "sloth/tensor.h"

namespace sloth {

// Calls op `op` on `inputs` (scalar operands as 0-dim tensors, e.g. from wrap_scalar).
Tensor call_op(OpId op, absl::Span<const Tensor> inputs, Attrs attrs = {});
// call_op on operands the caller holds for the whole call, without copying their handles
// (two locked refcount updates per copied operand): the binary operators' fast path.
Tensor call_op_borrowed(OpId op, const Tensor& a, const Tensor& b);
// call_op(op, {t, wrap_scalar(v)}), or {wrap_scalar(v), t} when `number_first`: the same
// result, checks and errors, without a tensor for the number where nothing can keep one
// (the binary operators with a number on one side: `x * 2.0`, `1 - x`, `x < 0.5`).
Tensor call_op_number(OpId op, const Tensor& t, const Scalar& v, bool number_first = false);
// Split and Chunk: the list of views.
std::vector<Tensor> call_op_list(OpId op, const Tensor& x, Attrs attrs);
// A C++ number as an operand. It is data (a Scalar leaf), so changing it between steps does
// not change the graph. In type promotion it is a "wrapped number" of the kind the caller
// wrote (like a Python number in PyTorch): 2 acts as int64, 2.0 as a float (it never widens
// a float32 tensor), true as bool. The value travels as a double: exact up to 2^53.
// (sloth/scalar_operand.cc)
Tensor wrap_scalar(const Scalar& v);
// Throws when `v` cannot be stored as `d` without overflow (as c10::checked_convert does for
// fill_, full and masked_fill): 2^40 into int32, 1e300 into float32, NaN into int64.
void check_fits(const char* op, const Scalar& v, DType d);
// `v` (already converted to `d`) as an operand of a tensor of dtype `d` on `device`: a wrapped
// number when a double holds it exactly, else an exact 0-dim tensor (int64 beyond 2^53).
Tensor exact_operand(const Scalar& v, DType d, Device device);

namespace internal {
// Composite ops register their decomposition here (sloth/composites.cc), by op id.
using Decomposition = Tensor (*)(absl::Span<const Tensor> inputs, const Attrs& attrs);
void register_decomposition(OpId op, Decomposition d);
Decomposition decomposition(OpId op);
// The derivative formula of a Kernel-category op (sloth/derivatives_kernel.cc), or nullptr.
autograd::Formula kernel_op_formula(OpId op);
// ---- attention and sequence ops ----
// softmax's input in scaled_dot_product_attention: q k^T * scale with the causal and the
// given mask applied, in sloth ops (sloth/attention_ops.cc; the composite path and kSdpa's
// derivative).
Tensor attention_scores(const Tensor& q, const Tensor& k, const Tensor& mask, double scale,
                        bool is_causal);
// Materializes `t`'s data (a sync of just what it needs).
void sync_tensor(const Tensor& t);
// `t`'s data on the host, synced (zero-copy for CPU tensors; its layout is `t`'s own).
lazy::DeviceData host_data(const Tensor& t);
// add/sub's `b * alpha` (b itself when alpha is 1). alpha takes no part in promotion (as in
// PyTorch), so it must not be of a higher category than the result: throws for a floating
// alpha with integer tensors and a bool alpha with non-bool ones. (sloth/scalar_operand.cc)
Tensor scaled_by_alpha(const Tensor& a, const Tensor& b, const Scalar& alpha, const char* op);
// The checks of scaled_by_alpha; true when alpha is 1 (b is used as is).
bool alpha_is_one(const Tensor& a, const Tensor& b, const Scalar& alpha, const char* op);
// batch_norm's per-channel batch statistics of x [N, C, *]: the mean and the biased variance,
// each kept as [1, C, 1, ...]. While a BatchStatsCapture is alive on this thread, the
// BatchNorm composite's decomposition (training) stores the statistics it computed there,
// so the public batch_norm updates the running statistics from the same nodes instead of
// recomputing them (two scalar leaves of equal value are different data: CSE cannot merge).
struct BatchStats {
  Tensor mean, var;
};
struct BatchStatsCapture {
  BatchStatsCapture();
  ~BatchStatsCapture();
  BatchStatsCapture(const BatchStatsCapture&) = delete;
  BatchStatsCapture& operator=(const BatchStatsCapture&) = delete;
  BatchStats stats;
  BatchStatsCapture* previous;
};
}  // namespace internal

}  // namespace sloth
