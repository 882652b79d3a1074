// Reference kernels: indexing (index_select, gather, scatter_add, index_add, index_put,
// one_hot, embedding, masked_fill) and shape ops (cat, stack, clone, contiguous).
#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"

namespace sloth::ref {
namespace {

// An index value checked against [0, size) (or [-size, size) when `wrap`, then wrapped).
absl::StatusOr<int64_t> checked(OpId op, double value, int64_t size, bool wrap = false) {
  int64_t i = static_cast<int64_t>(value);
  if (wrap && i < 0 && i >= -size) i += size;
  if (i < 0 || i >= size)
    return invalid("%s: index %d is out of bounds for size %d", op_name(op), i, size);
  return i;
}

#define REF_ASSIGN(lhs, expr)                    \
  auto lhs##_or = (expr);                        \
  if (!lhs##_or.ok()) return lhs##_or.status();  \
  lhs = *lhs##_or

}  // namespace

absl::StatusOr<Values> eval_index(const Ctx& c) {
  const RefTensor& x = c.in[0];
  const Shape& os = c.out.shape;
  const int64_t n = numel(os);
  const int64_t d = DimAttrs::of(c.a).dim;
  Values v;
  switch (c.op) {
    case OpId::kClone: case OpId::kContiguous:
      return x.v;
    case OpId::kIndexSelect: {
      const RefTensor& idx = c.in[1];
      for (int64_t i = 0; i < n; ++i) {
        Index oi = unravel(i, os);
        int64_t k;
        if (x.shape.empty()) {
          REF_ASSIGN(k, checked(c.op, idx.v[0], 1));
          v.push_back(x.v[0]);
          continue;
        }
        REF_ASSIGN(k, checked(c.op, idx.v[oi[d]], x.shape[d]));
        oi[d] = k;
        v.push_back(x.v[ravel(oi, x.shape)]);
      }
      return v;
    }
    case OpId::kGather: {
      const RefTensor& idx = c.in[1];
      for (int64_t i = 0; i < n; ++i) {
        Index oi = unravel(i, os);
        int64_t k;
        REF_ASSIGN(k, checked(c.op, idx.v[i], x.shape.empty() ? 1 : x.shape[d]));
        if (!x.shape.empty()) oi[d] = k;
        v.push_back(x.v[ravel(oi, x.shape)]);
      }
      return v;
    }
    case OpId::kScatterAdd: {
      const RefTensor &idx = c.in[1], &src = c.in[2];
      v = x.v;
      for (int64_t i = 0; i < static_cast<int64_t>(idx.v.size()); ++i) {
        Index bi = unravel(i, idx.shape);
        int64_t k;
        REF_ASSIGN(k, checked(c.op, idx.v[i], x.shape.empty() ? 1 : x.shape[d]));
        if (!x.shape.empty()) bi[d] = k;
        for (size_t q = 0; q < bi.size(); ++q)
          if (bi[q] >= x.shape[q])
            return invalid("scatter_add: index %s is out of bounds for base %s", shape_str(bi),
                           shape_str(x.shape));
        v[ravel(bi, x.shape)] += src.v[i];
      }
      return v;
    }
    case OpId::kIndexAdd: {
      const RefTensor &idx = c.in[1], &src = c.in[2];
      v = x.v;
      for (int64_t i = 0; i < static_cast<int64_t>(src.v.size()); ++i) {
        Index si = unravel(i, src.shape);
        int64_t k;
        if (x.shape.empty()) {
          REF_ASSIGN(k, checked(c.op, idx.v[0], 1));
        } else {
          REF_ASSIGN(k, checked(c.op, idx.v[si[d]], x.shape[d]));
          si[d] = k;
        }
        v[ravel(si, x.shape)] += src.v[i];
      }
      return v;
    }
    case OpId::kIndexPut: case OpId::kIndexPut_: {
      const RefTensor& idx = c.in[1];
      Shape target = x.shape;
      target[0] = idx.shape[0];
      RefTensor vals = broadcast_to(c.in[2], target);
      v = x.v;
      for (int64_t i = 0; i < static_cast<int64_t>(vals.v.size()); ++i) {
        Index ti = unravel(i, target);
        int64_t k;
        REF_ASSIGN(k, checked(c.op, idx.v[ti[0]], x.shape[0], /*wrap=*/true));
        ti[0] = k;
        v[ravel(ti, x.shape)] = ref_cast(vals.v[i], x.dtype);  // later duplicates win
      }
      return v;
    }
    case OpId::kOneHot: {
      for (int64_t i = 0; i < static_cast<int64_t>(x.v.size()); ++i) {
        int64_t k;
        const int64_t classes = OneHotAttrs::of(c.a).num_classes;
        REF_ASSIGN(k, checked(c.op, x.v[i], classes));
        for (int64_t j = 0; j < classes; ++j) v.push_back(j == k ? 1.0 : 0.0);
      }
      return v;
    }
    case OpId::kCat: {
      for (int64_t i = 0; i < n; ++i) {
        Index oi = unravel(i, os);
        for (const RefTensor& t : c.in) {
          if (oi[d] < t.shape[d]) {
            v.push_back(ref_cast(t.v[ravel(oi, t.shape)], c.out.dtype));
            break;
          }
          oi[d] -= t.shape[d];
        }
      }
      return v;
    }
    case OpId::kStack: {
      for (int64_t i = 0; i < n; ++i) {
        Index oi = unravel(i, os);
        const RefTensor& t = c.in[oi[d]];
        oi.erase(oi.begin() + d);
        v.push_back(ref_cast(t.v[ravel(oi, t.shape)], c.out.dtype));
      }
      return v;
    }
    case OpId::kEmbedding: {
      const RefTensor& idx = c.in[1];
      const int64_t rows = x.shape[0], dim = x.shape[1];
      for (double id : idx.v) {
        int64_t k;
        REF_ASSIGN(k, checked(c.op, id, rows));
        for (int64_t j = 0; j < dim; ++j) v.push_back(x.v[k * dim + j]);
      }
      return v;
    }
    case OpId::kMaskedFill: {
      const RefTensor &mask = c.in[1], &value = c.in[2];
      if (value.shape.size() != 0)
        return invalid("masked_fill: value must be a 0-dim tensor, got %s", shape_str(value.shape));
      for (int64_t i = 0; i < n; ++i)
        v.push_back(bget(mask, unravel(i, os)) != 0 ? ref_cast(value.v[0], x.dtype) : x.v[i]);
      return v;
    }
    default:
      return invalid("%s: no reference kernel in eval_index", op_name(c.op));
  }
}

}  // namespace sloth::ref
