#include "sloth/grad_accumulate.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/op_attrs.h"
#include "lazy/tensor_impl.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth::internal {
namespace {

using lazy::NodePtr;

// A pending slice_scatter(zeros, src, dim, start:end:1): the pieces of src (the operands of
// src itself when it is a pending concatenation along the same dim, so joins stay flat).
struct ZeroScatter {
  NodePtr zeros;
  std::vector<NodePtr> pieces;
  int64_t dim = 0, start = 0, end = 0;
};

bool is_zero_fill(const NodePtr& n) {
  return n->op == OpId::kFull && !n->materialized() && n->inputs.size() == 1 &&
         n->inputs[0]->op == OpId::kScalar && n->inputs[0]->scalar == 0.0;
}

std::optional<ZeroScatter> as_zero_scatter(const Tensor& t) {
  const lazy::TensorImplPtr& impl = t.impl();
  if (!impl || impl->is_view() || !impl->pending() || t.requires_grad()) return std::nullopt;
  NodePtr n = impl->value();
  if (n->op != OpId::kSliceScatter || n->materialized() || n->inputs.size() != 2 ||
      !is_zero_fill(n->inputs[0]))
    return std::nullopt;
  const SliceAttrs s = SliceAttrs::of(n->attrs);
  if (s.step != 1) return std::nullopt;
  ZeroScatter z{n->inputs[0], {}, s.dim, s.start, s.end};
  const NodePtr& src = n->inputs[1];
  if (src->op == OpId::kCat && !src->materialized() && DimAttrs::of(src->attrs).dim == s.dim)
    z.pieces.assign(src->inputs.begin(), src->inputs.end());
  else
    z.pieces.push_back(src);
  return z;
}

// Pieces that are copies of [..., h, d] views merged into [..., h * d] along the joined
// (last) dim: attention's per-head gradients permuted back from [N, H, L, D] to [N, L, H, D]
// and copied to merge the heads. Joining the views along the head dim and merging after
// reads each view once, instead of a copy per piece and then the concatenation.
std::optional<Tensor> join_merged_heads(const std::vector<NodePtr>& pieces, int64_t dim,
                                        const Shape& out, Device dev) {
  const size_t r = out.size();
  if (r == 0 || dim != static_cast<int64_t>(r) - 1) return std::nullopt;
  std::vector<Tensor> inner;
  int64_t d = -1;
  for (const NodePtr& p : pieces) {
    if (p->op != OpId::kReshape || p->materialized()) return std::nullopt;
    NodePtr v = p->inputs[0];
    if (v->op == OpId::kClone && !v->materialized()) v = v->inputs[0];
    const Dims& s = v->shape;
    if (s.size() != r + 1 || (d >= 0 && s[r] != d)) return std::nullopt;
    d = s[r];
    for (size_t i = 0; i + 1 < r; ++i)
      if (s[i] != p->shape[i]) return std::nullopt;
    if (s[r - 1] * s[r] != p->shape[r - 1]) return std::nullopt;
    inner.push_back(Tensor(lazy::TensorImpl::make(v, dev)));
  }
  return cat(inner, dim).reshape(out);
}

}  // namespace

Tensor transpose_grad(const Tensor& g) {
  const lazy::TensorImplPtr& impl = g.impl();
  if (impl && !impl->is_view() && impl->pending() && !g.requires_grad()) {
    NodePtr n = impl->value();
    if (n->op == OpId::kMatmul && !n->materialized() && n->inputs.size() == 2 &&
        n->inputs[0]->shape.size() == 2 && n->inputs[1]->shape.size() == 2 &&
        (n->dtype == DType::kFloat32 || n->dtype == DType::kFloat64)) {
      const Device dev = g.device();
      Tensor a(lazy::TensorImpl::make(n->inputs[0], dev)), b(lazy::TensorImpl::make(n->inputs[1], dev));
      return matmul(b.t(), a.t());
    }
  }
  return g.t();
}

Tensor accumulate_grads(const Tensor& a, const Tensor& b) {
  std::optional<ZeroScatter> x = as_zero_scatter(a), y = as_zero_scatter(b);
  if (x && y && x->dim == y->dim && x->zeros->shape == y->zeros->shape &&
      x->zeros->dtype == y->zeros->dtype && (x->end == y->start || y->end == x->start)) {
    if (y->end == x->start) std::swap(x, y);
    const Device dev = a.device();
    std::vector<NodePtr> nodes;
    for (const ZeroScatter* z : {&*x, &*y}) nodes.insert(nodes.end(), z->pieces.begin(), z->pieces.end());
    auto tensors = [&](const std::vector<NodePtr>& ns) {
      std::vector<Tensor> t;
      for (const NodePtr& p : ns) t.push_back(Tensor(lazy::TensorImpl::make(p, dev)));
      return t;
    };
    const int64_t len = x->zeros->shape[x->dim];
    if (x->start == 0 && y->end == len) {  // covers the whole dim: no zeros
      if (std::optional<Tensor> t = join_merged_heads(nodes, x->dim, x->zeros->shape.to_shape(), dev)) return *t;
      return cat(tensors(nodes), x->dim);
    }
    Tensor joined = cat(tensors(nodes), x->dim);
    Attrs attrs;
    SliceAttrs{.dim = x->dim, .start = x->start, .end = y->end, .step = 1}.store(attrs);
    return call_op(OpId::kSliceScatter,
                   {Tensor(lazy::TensorImpl::make(x->zeros, dev)), joined}, attrs);
  }
  return a + b;
}

}  // namespace sloth::internal
