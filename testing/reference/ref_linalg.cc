// Reference kernels: matmul (torch.matmul: 1-D, 2-D, batched with broadcasting), mm, bmm,
// linear.
#include "testing/reference/ref_internal.h"

namespace sloth::ref {
namespace {

// torch.matmul on plain tensors; the result's row-major values (the rule's shape drops the
// dims a 1-D operand was promoted with, which leaves the row-major order unchanged).
absl::StatusOr<Values> matmul(const RefTensor& a, const RefTensor& b) {
  Shape as = a.shape, bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), 1);  // [k] -> [1, k]
  if (bs.size() == 1) bs.push_back(1);           // [k] -> [k, 1]
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = broadcast_shapes("matmul (reference)", ba, bb);
  if (!batch.ok()) return batch.status();
  RefTensor A{as, a.dtype, a.v}, B{bs, b.dtype, b.v};
  Values v;
  v.reserve(numel(*batch) * n * m);
  for (int64_t p = 0; p < numel(*batch); ++p) {
    Index bi = unravel(p, *batch);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          Index ia = bi, ib = bi;
          ia.push_back(i); ia.push_back(q);
          ib.push_back(q); ib.push_back(j);
          s += bget(A, ia) * bget(B, ib);
        }
        v.push_back(s);
      }
  }
  return v;
}

}  // namespace

absl::StatusOr<Values> eval_linalg(const Ctx& c) {
  switch (c.op) {
    case OpId::kMatmul: case OpId::kMm: case OpId::kBmm:
      return matmul(c.in[0], c.in[1]);
    case OpId::kLinear: {
      const RefTensor &x = c.in[0], &w = c.in[1];
      const int64_t k = w.shape[1], o = w.shape[0];
      const int64_t rows = numel(Shape(x.shape.begin(), x.shape.end() - 1));
      Values v;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < o; ++j) {
          double s = c.in.size() > 2 ? c.in[2].v[j] : 0.0;
          for (int64_t q = 0; q < k; ++q) s += x.v[r * k + q] * w.v[j * k + q];
          v.push_back(s);
        }
      return v;
    }
    default:
      return invalid("%s: not a matmul op", op_name(c.op));
  }
}

}  // namespace sloth::ref
