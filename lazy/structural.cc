#include "lazy/structural.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"

namespace sloth::lazy {

namespace {

absl::Status internal(const StructuralEnv& env, std::string_view what) {
  return absl::InternalError(absl::StrFormat("%s: %s", env.name(), what));
}

absl::Status cat(StructuralEnv& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData out = env.alloc(in.shape, in.dtype);
  int64_t at = 0;
  for (int32_t slot : in.in) {
    const DeviceData& x = env.get(slot);
    const int64_t len = x.layout.shape[dim];
    if (len > 0 && x.numel() > 0) {
      Layout w = out.layout;
      w.offset += at * w.strides[dim];
      w.shape[dim] = len;
      env.copy_into(with_layout(out, std::move(w)), x, /*accumulate=*/false);
    }
    at += len;
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status view(StructuralEnv& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  if (in.op == OpId::kSplit || in.op == OpId::kChunk)
    return internal(env, absl::StrFormat(
                             "%s returns several tensors and must be lowered before planning",
                             op_name(in.op)));
  PrimitiveView pv = lower_view(in.op, x.layout.shape, in.attrs);
  std::optional<Layout> l = apply_view(pv.op, pv.attrs, x.layout);
  if (l) {
    env.set(in.out, with_layout(x, std::move(*l)));
    return absl::OkStatus();
  }
  // No strides express this view of x's layout: view a contiguous copy instead.
  DeviceData c = env.contiguous(x, x.dtype);
  l = apply_view(pv.op, pv.attrs, c.layout);
  if (!l)
    return internal(env, absl::StrFormat("%s cannot view %s", op_name(in.op),
                                         shape_str(x.layout.shape)));
  env.set(in.out, with_layout(c, std::move(*l)));
  return absl::OkStatus();
}

absl::Status scatter(StructuralEnv& env, const Instr& in) {
  const std::optional<OpId> view = view_of_scatter(in.op);
  if (!view) return internal(env, absl::StrFormat("%s is not a scatter op", op_name(in.op)));
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& src = env.get(in.in[1]);
  DeviceData out = env.contiguous(base, in.dtype);
  std::optional<Layout> window = apply_view(*view, in.attrs, out.layout);
  if (!window)
    return internal(env, absl::StrFormat("%s: no window in %s", op_name(in.op),
                                         shape_str(out.layout.shape)));
  env.copy_into(with_layout(out, std::move(*window)), src, /*accumulate=*/false);
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

// ---- The index ops: each is one index primitive over one walk ----
// Every op checks all of its indices before it allocates or writes, so a bad index leaves
// nothing behind. Operands are read in the op's dtype (a converted copy where they differ), so
// a primitive sees one dtype for target and other.

DeviceData operand_as(StructuralEnv& env, int slot, DType dtype) {
  const DeviceData& x = env.get(slot);
  return x.dtype == dtype ? x : env.contiguous(x, dtype);
}

// out[pos] = x[pos with dim := index[pos]] (gather), or with the index at pos[dim] of a 1-D
// index (along_dim: index_select, an embedding lookup, which moves whole slices of x).
absl::Status read_at(StructuralEnv& env, const Instr& in, bool along_dim) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& idx = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(env.check_indices(in, idx, dim, indexed_size(env.get(in.in[0]), dim),
                                          IndexRange::kNonNegative));
  const DeviceData x = operand_as(env, in.in[0], in.dtype);
  DeviceData out = env.alloc(in.shape, in.dtype);
  if (along_dim && x.layout.shape.empty()) {
    env.copy_into(out, x, /*accumulate=*/false);  // a 0-dim x is its only slice
  } else if (idx.numel() > 0) {
    const IndexWalk w =
        along_dim ? along_dim_walk(x, out, idx, dim) : gather_walk(x, out, idx, dim);
    SLOTH_RETURN_IF_ERROR(env.index_walk(IndexMode::kRead, x, out, idx, w));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

// out = base; out[pos with dim := index[pos]] += src[pos] (scatter_add), or with the index at
// pos[dim] of a 1-D index (along_dim: index_add, an embedding's backward).
absl::Status add_at(StructuralEnv& env, const Instr& in, bool along_dim) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& idx = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(
      env.check_indices(in, idx, dim, indexed_size(base, dim), IndexRange::kNonNegative));
  const DeviceData src = operand_as(env, in.in[2], in.dtype);
  DeviceData out = env.contiguous(base, in.dtype);
  if (idx.numel() > 0) {
    if (base.layout.shape.empty()) {
      env.copy_into(out, src, /*accumulate=*/true);  // a 0-dim base is its only slice
    } else {
      const IndexWalk w =
          along_dim ? along_dim_walk(out, src, idx, dim) : gather_walk(out, src, idx, dim);
      SLOTH_RETURN_IF_ERROR(env.index_walk(IndexMode::kAccumulate, out, src, idx, w));
    }
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

// out = base; rows idx[i] (negative: from the end) := row i of values broadcast; with
// duplicate indices the last one wins.
absl::Status index_put(StructuralEnv& env, const Instr& in) {
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& idx = env.get(in.in[1]);
  SLOTH_RETURN_IF_ERROR(
      env.check_indices(in, idx, 0, base.layout.shape[0], IndexRange::kWrapping));
  const DeviceData values = operand_as(env, in.in[2], in.dtype);
  DeviceData out = env.contiguous(base, in.dtype);
  if (const int64_t len = idx.numel(); len > 0) {
    const DeviceData rows = with_layout(values, index_put_values(base, values, len));
    SLOTH_RETURN_IF_ERROR(
        env.index_walk(IndexMode::kWrite, out, rows, idx, along_dim_walk(out, rows, idx, 0)));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

// out[..., c] = (indices[...] == c), int64.
absl::Status one_hot(StructuralEnv& env, const Instr& in) {
  const int64_t classes = OneHotAttrs::of(in.attrs).num_classes;
  const DeviceData& idx = env.get(in.in[0]);
  SLOTH_RETURN_IF_ERROR(env.check_indices(in, idx, 0, classes, IndexRange::kClasses));
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  SLOTH_RETURN_IF_ERROR(env.mark_classes(out, idx, classes));
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

absl::Status run_structural(StructuralEnv& env, const Instr& in) {
  const OpCategory c = op_info(in.op).category;
  if (c == OpCategory::View) return view(env, in);
  if (c == OpCategory::Scatter) return scatter(env, in);
  switch (in.op) {
    case OpId::kCat: return cat(env, in);
    case OpId::kClone:
      env.set(in.out, env.contiguous(env.get(in.in[0]), in.dtype));
      return absl::OkStatus();
    case OpId::kIndexSelect: return read_at(env, in, /*along_dim=*/true);
    case OpId::kGather: return read_at(env, in, /*along_dim=*/false);
    case OpId::kScatterAdd: return add_at(env, in, /*along_dim=*/false);
    case OpId::kIndexAdd: return add_at(env, in, /*along_dim=*/true);
    case OpId::kIndexPut: return index_put(env, in);
    case OpId::kOneHot: return one_hot(env, in);
    default:
      return internal(env, absl::StrFormat("%s is not an index or shape op", op_name(in.op)));
  }
}

absl::Status index_range_error(const Instr& in, int64_t i, int64_t dim, int64_t size,
                               IndexRange r) {
  switch (r) {
    case IndexRange::kClasses:
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d is out of range for num_classes %d (valid: 0 to %d)", op_name(in.op), i,
          size, size - 1));
    case IndexRange::kWrapping:
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d is out of range for dim %d of size %d (valid: %d to %d)",
          op_name(in.op), i, dim, size, -size, size - 1));
    case IndexRange::kNonNegative: break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: index %d is out of range for dim %d of size %d (valid: 0 to %d)",
                      op_name(in.op), i, dim, size, size - 1));
}

absl::Status check_index_range(const Instr& in, absl::Span<const int64_t> idx, int64_t dim,
                               int64_t size, IndexRange r) {
  for (int64_t i : idx)
    if (!index_in_range(i, size, r)) return index_range_error(in, i, dim, size, r);
  return absl::OkStatus();
}

IndexWalk gather_walk(const DeviceData& target, const DeviceData& other, const DeviceData& index,
                      int64_t dim) {
  IndexWalk w;
  w.dim = dim;
  w.shape = index.layout.shape;
  w.index = index.layout.strides;
  w.target = target.layout.strides;
  w.other = other.layout.strides;
  if (w.shape.empty()) w.shape = {1}, w.index = {0};
  if (w.target.empty()) w.target = {0};
  if (w.other.empty()) w.other = {0};
  w.dstride = w.target[dim];
  w.target[dim] = 0;
  w.size = indexed_size(target, dim);
  return w;
}

IndexWalk along_dim_walk(const DeviceData& target, const DeviceData& other,
                         const DeviceData& index, int64_t dim) {
  IndexWalk w;
  w.dim = dim;
  w.shape = other.layout.shape;
  w.target = target.layout.strides;
  w.other = other.layout.strides;
  w.dstride = w.target[dim];
  w.target[dim] = 0;
  w.index.assign(w.shape.size(), 0);
  w.index[dim] = index.layout.shape.empty() ? 0 : index.layout.strides[0];
  w.size = target.layout.shape[dim];
  return w;
}

Layout index_put_values(const DeviceData& base, const DeviceData& values, int64_t len) {
  Shape target = base.layout.shape;
  target[0] = len;
  Strides s = broadcast_strides(values.layout.shape, values.layout.strides, target);
  return Layout{std::move(target), std::move(s), values.layout.offset};
}

}  // namespace sloth::lazy
