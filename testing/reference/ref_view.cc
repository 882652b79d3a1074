// Reference kernels: view ops (read through view_layout over a contiguous copy), their
// inverses (the Scatter ops), and split / chunk.
#include <algorithm>

#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"
#include "core/view_layout.h"

namespace sloth::ref {
namespace {

// The layout of `op`'s view of a contiguous tensor of shape `in`; attrs normalized.
absl::StatusOr<Layout> layout_of(OpId op, const Attrs& a, const Shape& in) {
  PrimitiveView p = lower_view(op, in, a);
  auto s = view_shape(p.op, in, p.attrs);
  if (!s.ok()) return s.status();
  auto l = apply_view(p.op, p.attrs, Layout{in, contiguous_strides(in), 0});
  if (!l) return invalid("%s (reference): no layout for this view", op_name(op));
  return *l;
}

int64_t offset_of(const Layout& l, const Index& idx) {
  int64_t off = l.offset;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * l.strides[i];
  return off;
}

Values read(const RefTensor& x, const Layout& l) {
  Values v(numel(l.shape));
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i)
    v[i] = x.v[offset_of(l, unravel(i, l.shape))];
  return v;
}

}  // namespace

absl::StatusOr<Values> eval_view(const Ctx& c) {
  const RefTensor& x = c.in[0];
  if (op_info(c.op).category == OpCategory::View) {
    auto l = layout_of(c.op, c.a, x.shape);
    if (!l.ok()) return l.status();
    return read(x, *l);
  }
  // Scatter: a copy of base with the view's window replaced by src (later writes win where an
  // as_strided window overlaps itself).
  auto l = layout_of(*view_of_scatter(c.op), c.a, x.shape);
  if (!l.ok()) return l.status();
  const RefTensor& src = c.in[1];
  Values v = x.v;
  for (int64_t i = 0; i < static_cast<int64_t>(src.v.size()); ++i)
    v[offset_of(*l, unravel(i, l->shape))] = src.v[i];
  return v;
}

absl::StatusOr<std::vector<RefTensor>> eval_split(const Ctx& c) {
  const RefTensor& x = c.in[0];
  const auto [n, d] = SplitAttrs::of(c.a);  // split: piece size; chunk: number of pieces
  const int64_t size = x.shape[d];
  std::vector<int64_t> sizes;
  if (c.op == OpId::kSplit) {
    int64_t pieces = std::max<int64_t>((size + n - 1) / n, 1);
    for (int64_t p = 0; p < pieces; ++p) sizes.push_back(std::min(n, size - p * n));
  } else {
    int64_t each = (size + n - 1) / n;
    if (each == 0) {
      sizes.assign(n, 0);  // torch.chunk of an empty dim: n empty chunks
    } else {
      for (int64_t start = 0; start < size; start += each) sizes.push_back(std::min(each, size - start));
    }
  }
  std::vector<RefTensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    const Attrs a = SliceAttrs{.dim = d, .start = start, .end = start + s, .step = 1};
    auto l = layout_of(OpId::kSlice, a, x.shape);
    if (!l.ok()) return l.status();
    out.push_back(RefTensor{l->shape, x.dtype, read(x, *l)});
    start += s;
  }
  return out;
}

}  // namespace sloth::ref
