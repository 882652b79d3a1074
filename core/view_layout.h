// What each view op does to a tensor's layout (shape, strides, offset). One definition serves
// the shape rules, the executors (views of materialized data are offset + strides, no copy),
// functionalization (the inverse scatter writes through the same window) and autograd.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/op_table.h"
#include "core/shape.h"

namespace sloth {

struct Layout {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
};

// Checks and normalizes the view's attrs against the input shape (negative dims wrapped,
// slice bounds clamped, -1 sizes resolved) and returns the view's shape.
absl::StatusOr<Shape> view_shape(OpId op, const Shape& in, Attrs& attrs);

// The layout of the view of `in`, or nothing when no strides express it (a reshape of a
// non-viewable layout, as_strided of a non-contiguous input): then the caller copies.
// `attrs` must be normalized by view_shape. Only primitive view ops (Reshape, Permute,
// Expand, Slice, Select, Diagonal, AsStrided).
std::optional<Layout> apply_view(OpId op, const Attrs& attrs, const Layout& in);

// Public view ops (View, Flatten, Transpose, T, Narrow, Squeeze, Unsqueeze) as one primitive
// view op with its attrs. `attrs` must be normalized by view_shape.
struct PrimitiveView {
  OpId op;
  Attrs attrs;
};
PrimitiveView lower_view(OpId op, const Shape& in, const Attrs& attrs);

// The view a scatter op writes through (SliceScatter -> Slice, ...: the table's `.inverse`);
// nullopt for other ops.
std::optional<OpId> view_of_scatter(OpId scatter);

// How a value written into the result of a primitive view step goes back into the step's
// input. Slice, Select, Diagonal and AsStrided name their Scatter op in the table (`.inverse`),
// which takes (input, src). Reshape, Permute and Expand have no scatter: their inverse is a
// view of src alone, computed from the step (the reshape back to the input shape, the inverse
// permutation). For Expand that reshape is only right when the expand broadcasts nothing
// (numel unchanged); callers that must sum over broadcast elements (gradients) use sum_to.
// Functionalization, the view derivatives and view autograd all use this one function.
struct ViewInverse {
  OpId op;
  Attrs attrs;
  bool scatter;  // op takes (input, src); otherwise (src)
};
ViewInverse inverse_of_view(OpId view, const Attrs& attrs, const Shape& in_shape);

}  // namespace sloth
