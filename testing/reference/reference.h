// Reference kernels: simple, obviously-correct loops in double precision over plain row-major
// host tensors, one per op of core/ops.def (except the leaves Data and Scalar). They are the
// oracle the backends, the decompositions and the derivatives are tested against.
//
// ref_eval first runs the op's rule (sloth::infer), so invalid operands fail with the same
// message as the runtime; the result then has the rule's shape and dtype, with its values
// rounded as that dtype holds them (float32 through float, integers truncated like
// static_cast, bool as 0/1).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/dtype.h"
#include "core/op_table.h"
#include "core/shape.h"

namespace sloth {

struct RefTensor {
  Shape shape;
  DType dtype = DType::kFloat32;
  std::vector<double> v;  // row-major, v.size() == numel(shape)
};

// `x` as `dtype` holds it.
double ref_cast(double x, DType dtype);
// A tensor with its values cast to `dtype`.
RefTensor ref_tensor(Shape shape, DType dtype, std::vector<double> v);
RefTensor ref_scalar(double v, DType dtype = DType::kFloat64);  // 0-dim

// The rule's verdict on these operands (attrs normalized in place).
absl::StatusOr<OutputMeta> ref_infer(OpId op, const std::vector<RefTensor>& inputs, Attrs* attrs);

// Every op but Data, Scalar, Split and Chunk. In-place ops give the new value of operand 0.
// Dropout in train mode with 0 < p < 1 is random: it fails with "nondeterministic".
absl::StatusOr<RefTensor> ref_eval(OpId op, const std::vector<RefTensor>& inputs, Attrs attrs);

// Split and Chunk (ops that return a list of views).
absl::StatusOr<std::vector<RefTensor>> ref_eval_list(OpId op, const std::vector<RefTensor>& inputs,
                                                     Attrs attrs);

}  // namespace sloth
