// Shape and dtype rules of the attention and sequence ops (core/ops.def): scaled dot-product
// attention, cumsum, argsort, topk, tril/triu.
#include "core/sequence_rules.h"

#include <algorithm>

#include "core/op_attrs.h"
#include "core/rule_helpers.h"

namespace sloth {

using namespace rules;  // NOLINT: the shared rule vocabulary

// scaled_dot_product_attention: q [..., L, E], k [..., S, E], v [..., S, Ev] with the same
// batch dims; the mask (bool: true takes part; float: added to the scores) broadcasts to
// [..., L, S].
absl::Status rule_sdpa(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  if (in.size() != 3 && in.size() != 4)
    return invalid("%s: expects (query, key, value[, attn_mask]), got %d operands", op_name(op),
                   in.size());
  for (int i = 0; i < 3; ++i) {
    static const char* const kNames[] = {"query", "key", "value"};
    SLOTH_RETURN_IF_ERROR(need_floating(op, in[i], kNames[i]));
    if (rank(in[i]) < 2)
      return invalid("%s: %s must have at least 2 dims [..., seq, features], got %s", op_name(op),
                     kNames[i], sh(in[i]));
  }
  if (in[1].dtype != in[0].dtype || in[2].dtype != in[0].dtype)
    return invalid("%s: query, key and value must have the same dtype, got %s, %s and %s",
                   op_name(op), dtype_name(in[0].dtype), dtype_name(in[1].dtype),
                   dtype_name(in[2].dtype));
  const Shape &q = *in[0].shape, &k = *in[1].shape, &v = *in[2].shape;
  const bool same_batch = q.size() == k.size() && q.size() == v.size() &&
                          std::equal(q.begin(), q.end() - 2, k.begin()) &&
                          std::equal(q.begin(), q.end() - 2, v.begin());
  if (!same_batch || q.back() != k.back() || k[k.size() - 2] != v[v.size() - 2])
    return invalid("%s: expected query [..., L, E], key [..., S, E] and value [..., S, Ev] with "
                   "the same batch dims, got query %s, key %s, value %s",
                   op_name(op), sh(in[0]), sh(in[1]), sh(in[2]));
  Shape scores(q.begin(), q.end() - 1);
  scores.push_back(k[k.size() - 2]);
  if (in.size() == 4) {
    if (in[3].dtype != DType::kBool && in[3].dtype != in[0].dtype)
      return invalid("%s: attn_mask must be bool (true = take part) or %s like the query, got %s",
                     op_name(op), dtype_name(in[0].dtype), dtype_name(in[3].dtype));
    auto b = broadcast_shapes(op_name(op).data(), scores, *in[3].shape);
    if (!b.ok() || *b != scores)
      return invalid("%s: attn_mask %s must broadcast to the scores' shape [..., L, S] = %s",
                     op_name(op), sh(in[3]), shape_str(scores));
    if (SdpaAttrs::of(a).is_causal)
      return invalid("%s: pass either attn_mask or is_causal = true, not both", op_name(op));
  }
  out->shape = q;
  out->shape.back() = v.back();
  out->dtype = in[0].dtype;
  return absl::OkStatus();
}
// cumsum: floating and complex dtypes keep theirs, integers and bool accumulate as int64.
absl::Status rule_cumsum(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  SLOTH_RETURN_IF_ERROR(
      normalize_dim<DimAttrs>(op_name(op).data(), a, std::max<int64_t>(rank(in[0]), 1)).status());
  return unary(op, in, out, is_floating(in[0].dtype) ? in[0].dtype : DType::kInt64);
}
absl::Status rule_argsort(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (in[0].dtype == DType::kBool)
    return invalid("%s: not supported on bool tensors; convert with .to(kInt64)", op_name(op));
  SLOTH_RETURN_IF_ERROR(
      normalize_dim<SortAttrs>(op_name(op).data(), a, std::max<int64_t>(rank(in[0]), 1)).status());
  return unary(op, in, out, DType::kInt64);
}
absl::Status rule_topk(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (in[0].dtype == DType::kBool)
    return invalid("%s: not supported on bool tensors; convert with .to(kInt64)", op_name(op));
  ASSIGN_OR_RETURN(dim, normalize_dim<TopkAttrs>(op_name(op).data(), a,
                                                 std::max<int64_t>(rank(in[0]), 1)));
  const int64_t size = in[0].shape->empty() ? 1 : (*in[0].shape)[dim];
  const int64_t k = TopkAttrs::of(a).k;
  if (k < 0 || k > size)
    return invalid("%s: k = %d is out of range for dim %d of size %d (input %s); pick 0 <= k <= %d",
                   op_name(op), k, dim, size, sh(in[0]), size);
  out->shape = *in[0].shape;
  if (!out->shape.empty()) out->shape[dim] = k;
  out->dtype = DType::kInt64;
  return absl::OkStatus();
}
absl::Status rule_tril(OpId op, Metas in, Attrs&, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  if (rank(in[0]) < 2)
    return invalid("%s: input must have at least 2 dims, got %s", op_name(op), sh(in[0]));
  return unary(op, in, out, in[0].dtype);
}

}  // namespace sloth
