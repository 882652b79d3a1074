// Shape and dtype rules of every op in core/ops.def. Each rule checks its operands before
// anything is recorded and returns an error that names the op, the shapes and the fix.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/conv_rules.h"  // convolution and pooling
#include "core/conv_kernel_rules.h"  // convolution kernels
#include "core/rule_helpers.h"
#include "core/sequence_rules.h"  // attention and sequence ops
#include "core/dist_rules.h"  // distributed
#include "core/error.h"
#include "core/op_attrs.h"
#include "core/op_table.h"
#include "core/view_layout.h"

namespace sloth {

uint64_t Attrs::hash() const {
  // A cheap order-dependent mix: this runs once per recorded op.
  auto mix = [](uint64_t h, uint64_t v) { return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))); };
  const AttrSlots& s = slots;
  uint64_t h = 0x84222325cbf29ce4ull;
  if (dims.empty() && s.dims2.empty() && !(s.i0 | s.i1 | s.i2 | s.i3) && s.f0 == 0 && !s.flag)
    return mix(h, static_cast<uint64_t>(dtype));  // most elementwise ops: no attributes
  for (int64_t d : dims) h = mix(h, static_cast<uint64_t>(d));
  h = mix(h, dims.size() | 0x100);
  for (int64_t d : s.dims2) h = mix(h, static_cast<uint64_t>(d));
  h = mix(h, s.dims2.size() | 0x200);
  uint64_t fbits;
  std::memcpy(&fbits, &s.f0, sizeof fbits);
  for (uint64_t v : {static_cast<uint64_t>(s.i0), static_cast<uint64_t>(s.i1),
                     static_cast<uint64_t>(s.i2), static_cast<uint64_t>(s.i3), fbits,
                     static_cast<uint64_t>(s.flag), static_cast<uint64_t>(dtype)})
    h = mix(h, v);
  return h;
}

std::string Attrs::debug_string() const {
  const AttrSlots& s = slots;
  std::vector<std::string> parts;
  if (!dims.empty()) parts.push_back("dims=" + shape_str(dims));
  if (!s.dims2.empty()) parts.push_back("dims2=" + shape_str(s.dims2));
  if (s.i0 || s.i1 || s.i2 || s.i3)
    parts.push_back(absl::StrFormat("i=(%d,%d,%d,%d)", s.i0, s.i1, s.i2, s.i3));
  if (s.f0 != 0) parts.push_back(absl::StrFormat("f=%g", s.f0));
  if (s.flag) parts.push_back("flag");
  return absl::StrJoin(parts, " ");
}

namespace {
// at::native's combine_categories: a lower tier only matters when it is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType result_type(absl::Span<const TensorMeta> in) {
  // Three tiers as in at::native::result_type: dimensioned tensors, zero-dim tensors, wrapped
  // numbers (a C++ double is float32-like, an integral one int64-like).
  std::optional<DType> tier[3];
  for (const auto& m : in) {
    int t = m.wrapped_number ? 2 : m.shape->empty() ? 1 : 0;
    DType d = m.dtype;
    if (t == 2) d = is_floating(d) ? kDefaultFloat : d == DType::kBool ? d : DType::kInt64;
    tier[t] = tier[t] ? promote_types(*tier[t], d) : d;
  }
  return combine(tier[0], combine(tier[1], tier[2])).value_or(kDefaultFloat);
}

namespace {

using rules::check_arity;
using rules::Metas;
using rules::need_floating;
using rules::need_index;
using rules::normalize_dim;
using rules::rank;
using rules::sh;
using rules::unary;

absl::Status rule_leaf(OpId op, Metas, Attrs&, OutputMeta*) {
  return invalid("%s: leaves are made by factories, not called as ops", op_name(op));
}

absl::Status rule_factory(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  for (int64_t d : a.dims)
    if (d < 0) return invalid("%s: negative size %d in shape %s", op_name(op), d, shape_str(a.dims));
  if (auto r = RandintAttrs::of(a); op == OpId::kRandint && r.low >= r.high)
    return invalid("randint: low (%d) must be less than high (%d)", r.low, r.high);
  if ((op == OpId::kRand || op == OpId::kRandn) && !is_floating(a.dtype))
    return invalid("%s: dtype must be floating point, got %s", op_name(op), dtype_name(a.dtype));
  out->shape.assign(a.dims.begin(), a.dims.end());
  out->dtype = a.dtype;
  return absl::OkStatus();
}

absl::Status rule_unary_same(OpId op, Metas in, Attrs&, OutputMeta* out) {
  return unary(op, in, out, in.empty() ? kFloat32 : in[0].dtype);
}
absl::Status rule_unary_numeric(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (!in.empty() && in[0].dtype == DType::kBool)
    return invalid("%s: not supported on bool tensors; use logical_not / logical ops, or convert "
                   "with .to(kInt64)",
                   op_name(op));
  return rule_unary_same(op, in, a, out);
}
absl::Status rule_unary_float(OpId op, Metas in, Attrs&, OutputMeta* out) {
  if (in.empty()) return check_arity(op, in);
  return unary(op, in, out, is_floating(in[0].dtype) ? in[0].dtype : kDefaultFloat);
}
absl::Status rule_unary_bool(OpId op, Metas in, Attrs&, OutputMeta* out) {
  return unary(op, in, out, DType::kBool);
}
absl::Status rule_cast(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  return unary(op, in, out, a.dtype);
}

absl::Status broadcast_all(OpId op, Metas in, Shape* out) {
  // Fast path (the common case): equal shapes and 0-dim operands need no broadcasting work.
  const Shape* big = nullptr;
  bool simple = true;
  for (const auto& m : in) {
    if (m.shape->empty()) continue;
    if (big == nullptr) big = m.shape;
    else if (*m.shape != *big) simple = false;
  }
  if (simple) {
    if (big) *out = *big;
    else out->clear();
    return absl::OkStatus();
  }
  Shape s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i == 0) { s = *in[0].shape; continue; }
    ASSIGN_OR_RETURN(b, broadcast_shapes(op_name(op).data(), s, *in[i].shape));
    s = std::move(b);
  }
  *out = std::move(s);
  return absl::OkStatus();
}

// The fast path below runs for every recorded x + y and x * 2.0: shapes of a few dims are
// compared and copied inline, not through memcmp and memmove calls that cost more than the dims.
inline bool same_dims(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}
inline void set_dims(Shape& dst, const Shape& src) {
  const size_t n = src.size();
  if (n > 4) {
    dst = src;
    return;
  }
  if (dst.size() != n) dst.resize(n);
  int64_t* d = dst.data();
  switch (n) {  // stores, not a loop (which the compiler turns into a memmove call)
    case 4: d[3] = src[3]; [[fallthrough]];
    case 3: d[2] = src[2]; [[fallthrough]];
    case 2: d[1] = src[1]; [[fallthrough]];
    case 1: d[0] = src[0]; [[fallthrough]];
    default: break;
  }
}

absl::Status rule_binary_arith(OpId op, Metas in, Attrs&, OutputMeta* out) {
  // Fast path (every user of this rule is a two-operand op): `x * 2.0` (a floating tensor
  // and a wrapped number: the tensor's shape and dtype) and `x + y` of one shape and non-bool
  // dtype need neither broadcasting nor the promotion tiers, and agree with them.
  if (in.size() == 2) {
    const TensorMeta& a = in[0];
    const TensorMeta& b = in[1];
    const TensorMeta* t = b.wrapped_number ? (a.wrapped_number ? nullptr : &a)
                                           : (a.wrapped_number ? &b : nullptr);
    if ((t != nullptr && is_floating(t->dtype)) ||
        (t == nullptr && !a.wrapped_number && a.dtype == b.dtype && a.dtype != DType::kBool &&
         same_dims(*a.shape, *b.shape))) {
      if (t == nullptr) t = &a;
      set_dims(out->shape, *t->shape);
      out->dtype = t->dtype;
      return absl::OkStatus();
    }
  }
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(broadcast_all(op, in, &out->shape));
  out->dtype = result_type(in);
  if (op == OpId::kPow && out->dtype == DType::kBool) out->dtype = DType::kInt64;
  return absl::OkStatus();
}
absl::Status rule_binary_sub(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(rule_binary_arith(op, in, a, out));
  if (out->dtype == DType::kBool)
    return invalid("sub: subtracting two bool tensors is not supported; use logical_xor / "
                   "logical_not, or convert with .to(kInt64)");
  return absl::OkStatus();
}
absl::Status rule_binary_div(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(rule_binary_arith(op, in, a, out));
  if (!is_floating(out->dtype)) out->dtype = kDefaultFloat;  // true division
  return absl::OkStatus();
}
absl::Status rule_binary_mod(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(rule_binary_arith(op, in, a, out));
  if (out->dtype == DType::kBool)
    return invalid("%s: not implemented for bool tensors; convert with .to(kInt64)", op_name(op));
  return absl::OkStatus();
}
absl::Status rule_binary_compare(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(rule_binary_arith(op, in, a, out));
  a.dtype = out->dtype;  // the type both sides are compared in
  out->dtype = DType::kBool;
  return absl::OkStatus();
}
absl::Status rule_binary_logical(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  return rule_binary_compare(op, in, a, out);
}
absl::Status rule_where(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (in[0].dtype != DType::kBool)
    return invalid("where: condition must be a bool tensor, got %s; compare first (x > 0)",
                   dtype_name(in[0].dtype));
  SLOTH_RETURN_IF_ERROR(broadcast_all(op, in, &out->shape));
  out->dtype = result_type(in.subspan(1));
  return absl::OkStatus();
}
absl::Status rule_clamp(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (in[0].dtype == DType::kBool) return invalid("clamp: not supported on bool tensors");
  SLOTH_RETURN_IF_ERROR(broadcast_all(op, in, &out->shape));
  out->dtype = result_type(in);
  return absl::OkStatus();
}

// ---- reductions ----------------------------------------------------------------------------
absl::Status reduce_shape(OpId op, const TensorMeta& m, Attrs& a, OutputMeta* out) {
  ASSIGN_OR_RETURN(dims, wrap_dims(op_name(op).data(), a.dims, rank(m)));
  if (dims.empty())  // {} means every dim
    for (int64_t d = 0; d < rank(m); ++d) dims.push_back(d);
  a.dims.assign(dims.begin(), dims.end());
  const bool keepdim = ReduceAttrs::of(a).keepdim;
  out->shape.clear();
  for (int64_t d = 0; d < rank(m); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out->shape.push_back((*m.shape)[d]);
    else if (keepdim) out->shape.push_back(1);
  }
  return absl::OkStatus();
}
absl::Status rule_reduce_sum(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(reduce_shape(op, in[0], a, out));
  out->dtype = is_floating(in[0].dtype) ? in[0].dtype : DType::kInt64;
  return absl::OkStatus();
}
absl::Status rule_reduce_same(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(reduce_shape(op, in[0], a, out));
  for (int64_t d : a.dims)
    if ((*in[0].shape)[d] == 0)
      return invalid("%s: cannot reduce over dim %d of size 0 in %s (no identity); use sum for "
                     "empty tensors",
                     op_name(op), d, sh(in[0]));
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_reduce_arg(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  ASSIGN_OR_RETURN(d, normalize_dim<ArgReduceAttrs>(op_name(op).data(), a, rank(in[0])));
  a.dims.clear();
  if (rank(in[0]) > 0) a.dims.push_back(d);
  SLOTH_RETURN_IF_ERROR(rule_reduce_same(op, in, a, out));
  out->dtype = DType::kInt64;
  return absl::OkStatus();
}
absl::Status rule_reduce_float(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (op != OpId::kLogsumexp) SLOTH_RETURN_IF_ERROR(need_floating(op, in[0]));
  SLOTH_RETURN_IF_ERROR(reduce_shape(op, in[0], a, out));
  out->dtype = is_floating(in[0].dtype) ? in[0].dtype : kDefaultFloat;
  return absl::OkStatus();
}

// ---- matmul ----------------------------------------------------------------------------------
absl::Status rule_matmul(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  const Shape &a = *in[0].shape, &b = *in[1].shape;
  if (a.empty() || b.empty())
    return invalid("matmul: both operands need at least 1 dimension, got %s and %s; use mul for "
                   "scalars",
                   sh(in[0]), sh(in[1]));
  if (in[0].dtype != in[1].dtype)
    return invalid("matmul: operands must have the same dtype, got %s and %s; convert one with .to()",
                   dtype_name(in[0].dtype), dtype_name(in[1].dtype));
  if (in[0].dtype == DType::kBool) return invalid("matmul: bool tensors are not supported");
  int64_t k1 = a.back(), k2 = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k1 != k2)
    return invalid("matmul: shapes %s and %s cannot be multiplied (%d != %d)", sh(in[0]), sh(in[1]),
                   k1, k2);
  Shape ba(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  Shape bb(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  ASSIGN_OR_RETURN(batch, broadcast_shapes("matmul (batch dims)", ba, bb));
  out->shape = batch;
  if (a.size() >= 2) out->shape.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out->shape.push_back(b.back());
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_mm(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (rank(in[0]) != 2 || rank(in[1]) != 2)
    return invalid("mm: expects two 2-D tensors, got %s and %s; use matmul for other ranks",
                   sh(in[0]), sh(in[1]));
  return rule_matmul(OpId::kMatmul, in, a, out);
}
absl::Status rule_bmm(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (rank(in[0]) != 3 || rank(in[1]) != 3 || (*in[0].shape)[0] != (*in[1].shape)[0])
    return invalid("bmm: expects two 3-D tensors with the same batch size, got %s and %s",
                   sh(in[0]), sh(in[1]));
  return rule_matmul(OpId::kMatmul, in, a, out);
}
absl::Status rule_linear(OpId op, Metas in, Attrs&, OutputMeta* out) {
  if (in.size() < 2 || in.size() > 3) return invalid("linear: expects (x, w) or (x, w, b)");
  const Shape &x = *in[0].shape, &w = *in[1].shape;
  if (w.size() != 2 || x.empty() || x.back() != w[1])
    return invalid("linear: input %s and weight %s do not match; weight must be [out_features, "
                   "%d]",
                   sh(in[0]), sh(in[1]), x.empty() ? 0 : x.back());
  if (in.size() == 3 && (*in[2].shape != Shape{w[0]}))
    return invalid("linear: bias %s must have shape [%d]", sh(in[2]), w[0]);
  if (in[0].dtype != in[1].dtype || !is_floating(in[0].dtype))
    return invalid("linear: input and weight must be the same floating dtype, got %s and %s",
                   dtype_name(in[0].dtype), dtype_name(in[1].dtype));
  out->shape = x;
  out->shape.back() = w[0];
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

// ---- views -------------------------------------------------------------------------------------
absl::Status from_view(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  ASSIGN_OR_RETURN(s, view_shape(op, *in[0].shape, a));
  out->shape = std::move(s);
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_reshape(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_permute(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_expand(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_slice(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_select(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_diagonal(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_as_strided(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_flatten(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_transpose(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_t(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_narrow(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_squeeze(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_unsqueeze(OpId op, Metas in, Attrs& a, OutputMeta* out) { return from_view(op, in, a, out); }
absl::Status rule_split(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(normalize_dim<SplitAttrs>(op_name(op).data(), a, rank(in[0])).status());
  if (rank(in[0]) == 0) return invalid("%s: cannot split a 0-dim tensor", op_name(op));
  if (int64_t n = SplitAttrs::of(a).size_or_n; n <= 0)
    return invalid("%s: %s must be positive, got %d", op_name(op),
                   op == OpId::kSplit ? "split size" : "number of chunks", n);
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_chunk(OpId op, Metas in, Attrs& a, OutputMeta* out) { return rule_split(op, in, a, out); }

absl::Status scatter_rule(OpId op, OpId view, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  ASSIGN_OR_RETURN(s, view_shape(view, *in[0].shape, a));
  if (s != *in[1].shape)
    return invalid("%s: src has shape %s but the %s window of base %s has shape %s", op_name(op),
                   sh(in[1]), op_name(view), sh(in[0]), shape_str(s));
  if (in[0].dtype != in[1].dtype)
    return invalid("%s: src dtype %s differs from base dtype %s", op_name(op),
                   dtype_name(in[1].dtype), dtype_name(in[0].dtype));
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_slice_scatter(OpId op, Metas in, Attrs& a, OutputMeta* out) { return scatter_rule(op, OpId::kSlice, in, a, out); }
absl::Status rule_select_scatter(OpId op, Metas in, Attrs& a, OutputMeta* out) { return scatter_rule(op, OpId::kSelect, in, a, out); }
absl::Status rule_diagonal_scatter(OpId op, Metas in, Attrs& a, OutputMeta* out) { return scatter_rule(op, OpId::kDiagonal, in, a, out); }
absl::Status rule_as_strided_scatter(OpId op, Metas in, Attrs& a, OutputMeta* out) { return scatter_rule(op, OpId::kAsStrided, in, a, out); }

// ---- indexing ----------------------------------------------------------------------------------
absl::Status rule_index_select(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1]));
  if (rank(in[1]) > 1) return invalid("index_select: index must be 0-D or 1-D, got %s", sh(in[1]));
  ASSIGN_OR_RETURN(d, normalize_dim<DimAttrs>("index_select", a, rank(in[0])));
  out->shape = *in[0].shape;
  if (!out->shape.empty()) out->shape[d] = numel(*in[1].shape);
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_gather(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1]));
  ASSIGN_OR_RETURN(d, normalize_dim<DimAttrs>("gather", a, rank(in[0])));
  if (rank(in[1]) != rank(in[0]))
    return invalid("gather: index %s must have the same rank as input %s", sh(in[1]), sh(in[0]));
  for (int64_t i = 0; i < rank(in[0]); ++i)
    if (i != d && (*in[1].shape)[i] > (*in[0].shape)[i])
      return invalid("gather: index %s is larger than input %s at dim %d", sh(in[1]), sh(in[0]), i);
  out->shape = *in[1].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_scatter_add(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1]));
  SLOTH_RETURN_IF_ERROR(normalize_dim<DimAttrs>("scatter_add", a, rank(in[0])).status());
  if (*in[1].shape != *in[2].shape || rank(in[1]) != rank(in[0]))
    return invalid("scatter_add: index %s and src %s must have the same shape and the rank of "
                   "base %s",
                   sh(in[1]), sh(in[2]), sh(in[0]));
  if (in[0].dtype != in[2].dtype) return invalid("scatter_add: src dtype must match base dtype");
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_index_add(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1]));
  if (rank(in[1]) > 1) return invalid("index_add: index must be 1-D, got %s", sh(in[1]));
  ASSIGN_OR_RETURN(d, normalize_dim<DimAttrs>("index_add", a, rank(in[0])));
  Shape want = *in[0].shape;
  if (!want.empty()) want[d] = numel(*in[1].shape);
  if (*in[2].shape != want || in[0].dtype != in[2].dtype)
    return invalid("index_add: src %s must have shape %s and dtype %s", sh(in[2]), shape_str(want),
                   dtype_name(in[0].dtype));
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_index_put(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1]));
  if (rank(in[1]) != 1 || rank(in[0]) == 0)
    return invalid("%s: index must be a 1-D int64 tensor into dim 0 of a tensor with at least 1 "
                   "dim, got index %s for %s",
                   op_name(op), sh(in[1]), sh(in[0]));
  Shape target = *in[0].shape;
  target[0] = (*in[1].shape)[0];
  auto b = broadcast_shapes(op_name(op).data(), *in[2].shape, target);
  if (!b.ok() || *b != target)
    return invalid("%s: values %s cannot be broadcast to the indexed shape %s", op_name(op),
                   sh(in[2]), shape_str(target));
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_one_hot(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (in[0].dtype != DType::kInt64) return invalid("one_hot: indices must be int64, got %s", dtype_name(in[0].dtype));
  const int64_t classes = OneHotAttrs::of(a).num_classes;
  if (classes <= 0) return invalid("one_hot: num_classes must be positive, got %d", classes);
  out->shape = *in[0].shape;
  out->shape.push_back(classes);
  out->dtype = DType::kInt64;
  return absl::OkStatus();
}
absl::Status rule_cat(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.empty()) return invalid("%s: expects a non-empty list of tensors", op_name(op));
  const Shape& s0 = *in[0].shape;
  if (s0.empty()) return invalid("cat: zero-dimensional tensor (at position 0) cannot be concatenated; use stack");
  ASSIGN_OR_RETURN(d, normalize_dim<DimAttrs>("cat", a, static_cast<int64_t>(s0.size())));
  out->shape = s0;
  out->shape[d] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = *in[i].shape;
    bool ok = s.size() == s0.size();
    for (size_t j = 0; ok && j < s.size(); ++j) ok = static_cast<int64_t>(j) == d || s[j] == s0[j];
    if (!ok)
      return invalid("cat: tensor %d has shape %s, incompatible with %s (all dims but dim %d must "
                     "match)",
                     static_cast<int64_t>(i), shape_str(s), shape_str(s0), d);
    out->shape[d] += s[d];
  }
  out->dtype = result_type(in);
  return absl::OkStatus();
}
absl::Status rule_stack(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.empty()) return invalid("stack: expects a non-empty list of tensors");
  for (size_t i = 1; i < in.size(); ++i)
    if (*in[i].shape != *in[0].shape)
      return invalid("stack: all tensors must have the same shape; tensor 0 is %s, tensor %d is %s",
                     sh(in[0]), static_cast<int64_t>(i), sh(in[i]));
  ASSIGN_OR_RETURN(d, normalize_dim<DimAttrs>("stack", a, rank(in[0]) + 1));
  out->shape = *in[0].shape;
  out->shape.insert(out->shape.begin() + d, static_cast<int64_t>(in.size()));
  out->dtype = result_type(in);
  return absl::OkStatus();
}
absl::Status rule_clone(OpId op, Metas in, Attrs&, OutputMeta* out) {
  return unary(op, in, out, in.empty() ? kFloat32 : in[0].dtype);
}

// ---- composites --------------------------------------------------------------------------------
absl::Status rule_softmax(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  // PyTorch refuses integer input here ("not implemented for 'Long'") rather than promoting.
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0], "input"));
  SLOTH_RETURN_IF_ERROR(normalize_dim<DimAttrs>(op_name(op).data(), a, rank(in[0])).status());
  return unary(op, in, out, in[0].dtype);
}
absl::Status rule_nll(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0], "input"));
  if (in[1].dtype != DType::kInt64)
    return invalid("%s: target must be an int64 tensor of class indices, got %s", op_name(op),
                   dtype_name(in[1].dtype));
  const Shape &x = *in[0].shape, &t = *in[1].shape;
  bool ok = (x.size() == 2 && t.size() == 1 && t[0] == x[0]) || (x.size() == 1 && t.empty());
  if (!ok)
    return invalid("%s: input %s and target %s do not match; expected input [N, C] with target "
                   "[N], or input [C] with a 0-dim target",
                   op_name(op), sh(in[0]), sh(in[1]));
  const LossAttrs la = LossAttrs::of(a);
  if (!(la.label_smoothing >= 0 && la.label_smoothing <= 1))
    return invalid("%s: label_smoothing must be between 0.0 and 1.0, got %g", op_name(op),
                   la.label_smoothing);
  if (op == OpId::kNllLoss && la.label_smoothing != 0)
    return invalid("nll_loss: label_smoothing is a cross_entropy option (nll_loss takes log "
                   "probabilities as they are)");
  if (la.reduction != LossReduction::kMean && la.reduction != LossReduction::kSum &&
      la.reduction != LossReduction::kNone)
    return invalid("%s: unknown reduction %d (use mean, sum or none)", op_name(op),
                   static_cast<int64_t>(la.reduction));
  out->shape = la.reduction == LossReduction::kNone && x.size() == 2 ? Shape{x[0]} : Shape{};
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_pair_loss(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0], "input"));
  if (*in[0].shape != *in[1].shape)
    return invalid("%s: input %s and target %s must have the same shape", op_name(op), sh(in[0]),
                   sh(in[1]));
  out->shape = {};
  out->dtype = promote_types(in[0].dtype, is_floating(in[1].dtype) ? in[1].dtype : in[0].dtype);
  return absl::OkStatus();
}
absl::Status rule_dropout(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (double p = DropoutAttrs::of(a).p; !(p >= 0 && p <= 1))
    return invalid("dropout: probability has to be between 0 and 1, but got %g", p);
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0]));
  return unary(op, in, out, in[0].dtype);
}
absl::Status rule_layer_norm(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.empty() || in.size() > 3) return invalid("layer_norm: expects (x[, w[, b]])");
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0]));
  const Shape& x = *in[0].shape;
  size_t k = a.dims.size();
  bool ok = k >= 1 && k <= x.size() && std::equal(a.dims.begin(), a.dims.end(), x.end() - k);
  if (!ok)
    return invalid("layer_norm: normalized_shape %s must match the trailing dims of input %s",
                   shape_str(a.dims), sh(in[0]));
  for (size_t i = 1; i < in.size(); ++i)
    if (!std::equal(a.dims.begin(), a.dims.end(), in[i].shape->begin(), in[i].shape->end()))
      return invalid("layer_norm: %s %s must have shape %s", i == 1 ? "weight" : "bias", sh(in[i]),
                     shape_str(a.dims));
  return unary(op, in, out, in[0].dtype);
}
absl::Status rule_embedding(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (rank(in[0]) != 2) return invalid("embedding: weight must be 2-D [num_embeddings, dim], got %s", sh(in[0]));
  SLOTH_RETURN_IF_ERROR(need_index(op, in[1], "indices"));
  out->shape = *in[1].shape;
  out->shape.push_back((*in[0].shape)[1]);
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status mask_check(OpId op, const TensorMeta& x, const TensorMeta& mask) {
  if (mask.dtype != DType::kBool)
    return invalid("%s: mask must be a bool tensor, got %s", op_name(op), dtype_name(mask.dtype));
  auto b = broadcast_shapes(op_name(op).data(), *x.shape, *mask.shape);
  if (!b.ok() || *b != *x.shape)
    return invalid("%s: mask %s cannot be broadcast to the input shape %s", op_name(op), sh(mask),
                   sh(x));
  return absl::OkStatus();
}
absl::Status rule_masked_fill(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(mask_check(op, in[0], in[1]));
  return unary(op, in, out, in[0].dtype);
}

// ---- in-place ------------------------------------------------------------------------------------
absl::Status self_result(OpId op, Metas in, OutputMeta* out) {
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status fits_self(OpId op, const TensorMeta& self, Metas operands, DType result) {
  for (const auto& m : operands) {
    auto b = broadcast_shapes(op_name(op).data(), *self.shape, *m.shape);
    if (!b.ok()) return b.status();
    if (*b != *self.shape)
      return invalid("%s: output with shape %s doesn't match the broadcast shape %s; the operand "
                     "%s must broadcast to the shape of the tensor written in place",
                     op_name(op), sh(self), shape_str(*b), sh(m));
  }
  if (dtype_category(result) > dtype_category(self.dtype))
    return invalid("%s: result type %s can't be cast to the desired output type %s; use the "
                   "out-of-place op, or convert the tensor first",
                   op_name(op), dtype_name(result), dtype_name(self.dtype));
  return absl::OkStatus();
}
// ---- normalization (nn) ----
// Channels are dim 1 of an input [N, C, *]; per-channel operands are 1-D [C].
absl::Status check_channel_operands(OpId op, Metas in, size_t first, const char* const* names) {
  const int64_t c = (*in[0].shape)[1];
  for (size_t i = first; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype)
      return invalid("%s: %s is %s but input is %s; convert one of them with .to(...)",
                     op_name(op), names[i - first], dtype_name(in[i].dtype),
                     dtype_name(in[0].dtype));
    if (*in[i].shape != Shape{c})
      return invalid("%s: %s %s must have shape [%d], one value per channel of input %s",
                     op_name(op), names[i - first], sh(in[i]), c, sh(in[0]));
  }
  return absl::OkStatus();
}
absl::Status rule_batch_norm(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  const BatchNormAttrs b = BatchNormAttrs::of(a);
  const size_t want = 1 + (b.training ? 0 : 2) + b.has_weight + b.has_bias;
  if (in.size() != want)
    return invalid("batch_norm: expects %d tensor operands (input%s%s%s), got %d", want,
                   b.training ? "" : ", running_mean, running_var", b.has_weight ? ", weight" : "",
                   b.has_bias ? ", bias" : "", in.size());
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0]));
  if (rank(in[0]) < 2)
    return invalid("batch_norm: input %s must have at least 2 dims [N, C, *]", sh(in[0]));
  const char* names[4];
  size_t k = 0;
  if (!b.training) names[k++] = "running_mean", names[k++] = "running_var";
  if (b.has_weight) names[k++] = "weight";
  if (b.has_bias) names[k++] = "bias";
  SLOTH_RETURN_IF_ERROR(check_channel_operands(op, in, 1, names));
  if (b.training) {
    const int64_t c = (*in[0].shape)[1];
    int64_t n = 1;
    for (int64_t d : *in[0].shape) n *= d;
    if (c > 0 && n / c == 1)
      return invalid("batch_norm: Expected more than 1 value per channel when training, got "
                     "input size %s (use a batch of 2 or more, or eval mode)",
                     sh(in[0]));
  }
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
absl::Status rule_group_norm(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  const GroupNormAttrs g = GroupNormAttrs::of(a);
  const size_t want = 1 + g.has_weight + g.has_bias;
  if (in.size() != want)
    return invalid("group_norm: expects %d tensor operands (input%s%s), got %d", want,
                   g.has_weight ? ", weight" : "", g.has_bias ? ", bias" : "", in.size());
  SLOTH_RETURN_IF_ERROR(need_floating(op, in[0]));
  if (rank(in[0]) < 2)
    return invalid("group_norm: input %s must have at least 2 dims [N, C, *]", sh(in[0]));
  const int64_t c = (*in[0].shape)[1];
  if (g.num_groups <= 0 || c % g.num_groups != 0)
    return invalid("group_norm: Expected number of channels in input to be divisible by "
                   "num_groups, but got input of shape %s and num_groups=%d",
                   sh(in[0]), g.num_groups);
  const char* names[2];
  size_t k = 0;
  if (g.has_weight) names[k++] = "weight";
  if (g.has_bias) names[k++] = "bias";
  SLOTH_RETURN_IF_ERROR(check_channel_operands(op, in, 1, names));
  out->shape = *in[0].shape;
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}

absl::Status rule_copy_(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  auto b = broadcast_shapes("copy_", *in[0].shape, *in[1].shape);
  if (!b.ok() || *b != *in[0].shape)
    return invalid("copy_: src %s cannot be broadcast to self %s", sh(in[1]), sh(in[0]));
  return self_result(op, in, out);
}
absl::Status rule_fill_(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (rank(in[1]) != 0)
    return invalid("fill_: only supports a 0-dim value tensor, got %s", sh(in[1]));
  return self_result(op, in, out);
}
absl::Status rule_inplace_unary(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (op == OpId::kRelu_ && in[0].dtype == DType::kBool) return invalid("relu_: not supported on bool tensors");
  return self_result(op, in, out);
}
absl::Status rule_inplace_binary(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  const OpId fn = *op_info(op).facts.functional;
  SLOTH_RETURN_IF_ERROR(fits_self(op, in[0], in.subspan(1), in[0].dtype));  // names op_
  OutputMeta r;
  SLOTH_RETURN_IF_ERROR(infer(fn, in, a, &r));
  SLOTH_RETURN_IF_ERROR(fits_self(op, in[0], in.subspan(1), r.dtype));
  return self_result(op, in, out);
}
absl::Status rule_inplace_clamp(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  OutputMeta r;
  SLOTH_RETURN_IF_ERROR(infer(OpId::kClamp, in, a, &r));
  SLOTH_RETURN_IF_ERROR(fits_self(op, in[0], in.subspan(1), r.dtype));
  return self_result(op, in, out);
}
absl::Status rule_inplace_masked_fill(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(mask_check(op, in[0], in[1]));
  return self_result(op, in, out);
}
absl::Status rule_inplace_index_put(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  return rule_index_put(op, in, a, out);
}

constexpr OpInfo kOps[] = {
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...)                          \
  {OpId::k##Id, #name,          OpCategory::cat, arity,                                    \
   AliasKind::alias, &rule,     GradKind::grad,  ApiKind::api, OpFacts{__VA_ARGS__}},
#include "core/ops.def"
#undef OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps);

}  // namespace

const OpInfo& op_info(OpId id) { return kOps[static_cast<int>(id)]; }

absl::Status infer(OpId id, absl::Span<const TensorMeta> in, Attrs& attrs, OutputMeta* out) {
  return op_info(id).rule(id, in, attrs, out);
}

}  // namespace sloth
