// What the shape rules of core/ops.def share (op_rules.cc, conv_rules.cc,
// sequence_rules.cc): operand checks that name the op, and dim wrapping into attribute views.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/error.h"
#include "core/op_table.h"
#include "core/shape.h"

namespace sloth::rules {

using Metas = absl::Span<const TensorMeta>;
inline std::string sh(const TensorMeta& m) { return shape_str(*m.shape); }
inline int64_t rank(const TensorMeta& m) { return static_cast<int64_t>(m.shape->size()); }

#define ASSIGN_OR_RETURN(lhs, expr)                \
  auto lhs##_or = (expr);                          \
  if (!lhs##_or.ok()) return lhs##_or.status();    \
  auto lhs = *std::move(lhs##_or)

// Wraps a negative `dim` of the attrs view V (for a tensor of rank `rank`) in place.
template <class V>
absl::StatusOr<int64_t> normalize_dim(const char* op, Attrs& a, int64_t rank) {
  V v = V::of(a);
  auto d = wrap_dim(op, v.dim, rank);
  if (!d.ok()) return d.status();
  v.dim = *d;
  v.store(a);
  return *d;
}

// The op table's arity (variadic ops pass).
absl::Status check_arity(OpId op, Metas in);
absl::Status need_floating(OpId op, const TensorMeta& m, const char* what = "input");
absl::Status need_index(OpId op, const TensorMeta& m, const char* what = "index");
// Operand 0's shape with `dtype` (after check_arity).
absl::Status unary(OpId op, Metas in, OutputMeta* out, DType dtype);

}  // namespace sloth::rules
