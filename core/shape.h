// Shapes, strides and the dimension arithmetic every op shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sloth {

using Shape = std::vector<int64_t>;  // {2, 3}; {} is a 0-dim scalar
using Strides = std::vector<int64_t>;
using IntSpan = absl::Span<const int64_t>;

int64_t numel(IntSpan shape);
Strides contiguous_strides(IntSpan shape);
// The same, written into `out` (size == shape.size()): for inline stride storage (Dims).
void contiguous_strides_into(IntSpan shape, absl::Span<int64_t> out);
bool is_contiguous(IntSpan shape, IntSpan strides);
std::string shape_str(IntSpan shape);  // "[2, 3]"

// Wraps a possibly negative dim into [0, rank); `rank` 0 accepts -1 and 0 like PyTorch.
absl::StatusOr<int64_t> wrap_dim(const char* op, int64_t dim, int64_t rank);
// Wraps and de-duplicates a dim list; {} stays {} (meaning all dims, decided by the caller).
absl::StatusOr<std::vector<int64_t>> wrap_dims(const char* op, IntSpan dims, int64_t rank);

// NumPy broadcasting of two shapes; the error names the op and both shapes.
absl::StatusOr<Shape> broadcast_shapes(const char* op, IntSpan a, IntSpan b);
// Strides that read `shape`/`strides` broadcast to `out` (0 where a dim is broadcast).
Strides broadcast_strides(IntSpan shape, IntSpan strides, IntSpan out);
// The same, written into `out_strides` (its size is the broadcast rank, >= shape.size()).
void broadcast_strides_into(IntSpan shape, IntSpan strides, absl::Span<int64_t> out_strides);

// Resolves a view/reshape target with at most one -1 against `numel`.
absl::StatusOr<Shape> infer_size(const char* op, IntSpan target, int64_t numel, IntSpan from);

// PyTorch's computeStride: strides that view `old` (with `old_strides`) as `target`,
// or nothing if the memory layout makes that impossible (then reshape copies).
std::optional<Strides> view_strides(IntSpan old_shape, IntSpan old_strides, IntSpan target);

}  // namespace sloth
