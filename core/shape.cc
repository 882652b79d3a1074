#include "core/shape.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/error.h"

namespace sloth {

int64_t numel(IntSpan shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void contiguous_strides_into(IntSpan shape, absl::Span<int64_t> out) {
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    out[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
}

Strides contiguous_strides(IntSpan shape) {
  Strides s(shape.size());
  contiguous_strides_into(shape, absl::MakeSpan(s));
  return s;
}

bool is_contiguous(IntSpan shape, IntSpan strides) {
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != acc) return false;
    acc *= shape[i];
  }
  return true;
}

std::string shape_str(IntSpan shape) { return "[" + absl::StrJoin(shape, ", ") + "]"; }

absl::StatusOr<int64_t> wrap_dim(const char* op, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    return invalid("%s: dim %d is out of range for a tensor of rank %d (valid: %d to %d)", op, dim,
                   rank, -r, r - 1);
  }
  return dim < 0 ? dim + r : dim;
}

absl::StatusOr<std::vector<int64_t>> wrap_dims(const char* op, IntSpan dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    auto w = wrap_dim(op, d, rank);
    if (!w.ok()) return w.status();
    if (std::find(out.begin(), out.end(), *w) != out.end())
      return invalid("%s: dim %d appears more than once in %s", op, *w, shape_str(dims));
    out.push_back(*w);
  }
  if (rank == 0) out.clear();  // dim 0 / -1 of a scalar means "the scalar itself"
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<Shape> broadcast_shapes(const char* op, IntSpan a, IntSpan b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      return invalid(
          "%s: shapes %s and %s cannot be broadcast together (dim %d: %d vs %d); sizes must "
          "match or one of them must be 1",
          op, shape_str(a), shape_str(b), static_cast<int64_t>(i), da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void broadcast_strides_into(IntSpan shape, IntSpan strides, absl::Span<int64_t> out_strides) {
  const size_t off = out_strides.size() - shape.size();
  for (size_t i = 0; i < off; ++i) out_strides[i] = 0;
  for (size_t i = 0; i < shape.size(); ++i) out_strides[off + i] = shape[i] == 1 ? 0 : strides[i];
}

Strides broadcast_strides(IntSpan shape, IntSpan strides, IntSpan out) {
  Strides s(out.size());
  broadcast_strides_into(shape, strides, absl::MakeSpan(s));
  return s;
}

absl::StatusOr<Shape> infer_size(const char* op, IntSpan target, int64_t n, IntSpan from) {
  Shape out(target.begin(), target.end());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) return invalid("%s: only one dimension can be -1, got %s", op, shape_str(target));
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      return invalid("%s: invalid size %d in %s", op, out[i], shape_str(target));
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      return invalid("%s: shape %s is invalid for input %s of size %d", op, shape_str(target),
                     shape_str(from), n);
    out[infer_at] = n / known;
  } else if (known != n) {
    return invalid("%s: shape %s is invalid for input %s of size %d", op, shape_str(target),
                   shape_str(from), n);
  }
  return out;
}

std::optional<Strides> view_strides(IntSpan old_shape, IntSpan old_strides, IntSpan target) {
  // Port of the algorithm in ATen's computeStride (TensorUtils.cpp): walk chunks of old dims
  // that are contiguous with each other and match them to runs of new dims.
  Strides out(target.size());
  if (old_shape.empty()) return Strides(target.size(), 1);
  int64_t n = numel(old_shape);
  if (n == 0) {
    if (std::equal(old_shape.begin(), old_shape.end(), target.begin(), target.end()))
      return Strides(old_strides.begin(), old_strides.end());
    return contiguous_strides(target);
  }
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace sloth
