#include "core/view_layout.h"

#include <algorithm>

#include "core/error.h"
#include "core/op_attrs.h"

namespace sloth {
namespace {

int64_t rank_of(const Shape& s) { return static_cast<int64_t>(s.size()); }

absl::Status check_perm(const char* op, const Shape& in, absl::Span<const int64_t> perm,
                        absl::InlinedVector<int64_t, 6>* out) {
  if (perm.size() != in.size())
    return invalid("%s: permutation %s has %d dims but the input %s has %d", op, shape_str(perm),
                   perm.size(), shape_str(in), in.size());
  std::vector<bool> seen(in.size(), false);
  out->clear();
  for (int64_t p : perm) {
    auto w = wrap_dim(op, p, rank_of(in));
    if (!w.ok()) return w.status();
    if (seen[*w]) return invalid("%s: dim %d repeats in permutation %s", op, *w, shape_str(perm));
    seen[*w] = true;
    out->push_back(*w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shape> view_shape(OpId op, const Shape& in, Attrs& a) {
  const char* name = op_name(op).data();
  const int64_t r = rank_of(in);
  switch (op) {
    case OpId::kReshape:
    case OpId::kView: {
      auto s = infer_size(name, a.dims, numel(in), in);
      if (!s.ok()) return s.status();
      a.dims.assign(s->begin(), s->end());
      return *s;
    }
    case OpId::kPermute: {
      absl::InlinedVector<int64_t, 6> p;
      SLOTH_RETURN_IF_ERROR(check_perm(name, in, a.dims, &p));
      a.dims = p;
      Shape s;
      for (int64_t d : p) s.push_back(in[d]);
      return s;
    }
    case OpId::kExpand: {
      if (rank_of(Shape(a.dims.begin(), a.dims.end())) < r)
        return invalid("expand: the target %s has fewer dims than the input %s", shape_str(a.dims),
                       shape_str(in));
      Shape s(a.dims.begin(), a.dims.end());
      size_t lead = s.size() - in.size();
      for (size_t i = 0; i < s.size(); ++i) {
        if (i < lead) {
          if (s[i] < 0) return invalid("expand: -1 is not allowed for the new leading dim %d in %s", i, shape_str(a.dims));
          continue;
        }
        int64_t have = in[i - lead];
        if (s[i] == -1) s[i] = have;
        else if (have != 1 && have != s[i])
          return invalid("expand: the size %d of the input %s must match the target %s at dim %d "
                         "(or be 1)",
                         have, shape_str(in), shape_str(a.dims), static_cast<int64_t>(i));
      }
      a.dims.assign(s.begin(), s.end());
      return s;
    }
    case OpId::kNarrow: {
      if (r == 0) return invalid("%s: cannot slice a 0-dim tensor", name);
      auto v = NarrowAttrs::of(a);
      auto d = wrap_dim(name, v.dim, r);
      if (!d.ok()) return d.status();
      int64_t size = in[*d];
      int64_t start = v.start < 0 ? v.start + size : v.start;
      if (start < 0 || start > size || v.length < 0 || start + v.length > size)
        return invalid("narrow: start %d with length %d is out of range for dim %d of size %d",
                       v.start, v.length, *d, size);
      v.dim = *d;
      v.start = start;
      v.store(a);
      Shape s = in;
      s[*d] = v.length;
      return s;
    }
    case OpId::kSlice: {
      if (r == 0) return invalid("%s: cannot slice a 0-dim tensor", name);
      auto v = SliceAttrs::of(a);
      auto d = wrap_dim(name, v.dim, r);
      if (!d.ok()) return d.status();
      v.dim = *d;
      v.store(a);  // the dim is normalized even when the step is then refused
      int64_t size = in[*d];
      if (v.step <= 0) return invalid("slice: step must be positive, got %d", v.step);
      int64_t start = v.start < 0 ? v.start + size : v.start;
      int64_t end = v.end < 0 ? v.end + size : v.end;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      v.start = start;
      v.end = end;
      v.store(a);
      Shape s = in;
      s[*d] = (end - start + v.step - 1) / v.step;
      return s;
    }
    case OpId::kSelect: {
      if (r == 0) return invalid("select: cannot select from a 0-dim tensor");
      auto v = SelectAttrs::of(a);
      auto d = wrap_dim(name, v.dim, r);
      if (!d.ok()) return d.status();
      v.dim = *d;
      v.store(a);
      int64_t size = in[*d];
      if (v.index < -size || v.index >= size)
        return invalid("select: index %d is out of range for dim %d of size %d (tensor %s)",
                       v.index, *d, size, shape_str(in));
      if (v.index < 0) v.index += size;
      v.store(a);
      Shape s = in;
      s.erase(s.begin() + *d);
      return s;
    }
    case OpId::kDiagonal: {
      if (r < 2) return invalid("diagonal: needs at least 2 dims, got %s", shape_str(in));
      auto v = DiagonalAttrs::of(a);
      auto d0 = wrap_dim(name, v.dim1, r), d1 = wrap_dim(name, v.dim2, r);
      if (!d0.ok()) return d0.status();
      if (!d1.ok()) return d1.status();
      if (*d0 == *d1) return invalid("diagonal: dims must differ, both are %d", *d0);
      v.dim1 = *d0;
      v.dim2 = *d1;
      v.store(a);
      const int64_t off = v.offset;
      int64_t n = off >= 0 ? std::min(in[*d0], in[*d1] - off) : std::min(in[*d0] + off, in[*d1]);
      Shape s;
      for (int64_t i = 0; i < r; ++i)
        if (i != *d0 && i != *d1) s.push_back(in[i]);
      s.push_back(std::max<int64_t>(n, 0));
      return s;
    }
    case OpId::kAsStrided: {
      const auto v = AsStridedAttrs::of(a);
      if (v.size.size() != v.stride.size())
        return invalid("as_strided: size %s and stride %s must have the same length",
                       shape_str(v.size), shape_str(v.stride));
      int64_t last = v.offset;
      bool empty = false;
      for (size_t i = 0; i < v.size.size(); ++i) {
        if (v.size[i] < 0 || v.stride[i] < 0)
          return invalid("as_strided: negative size or stride in %s / %s", shape_str(v.size),
                         shape_str(v.stride));
        if (v.size[i] == 0) empty = true;
        last += (v.size[i] - 1) * v.stride[i];
      }
      if (v.offset < 0) return invalid("as_strided: negative storage offset %d", v.offset);
      if (!empty && last >= numel(in))
        return invalid("as_strided: size %s, stride %s and offset %d reach element %d, but the "
                       "storage has only %d elements",
                       shape_str(v.size), shape_str(v.stride), v.offset, last, numel(in));
      return Shape(v.size.begin(), v.size.end());
    }
    case OpId::kFlatten: {
      auto v = FlattenAttrs::of(a);
      auto s0 = wrap_dim(name, v.start_dim, r), s1 = wrap_dim(name, v.end_dim, r);
      if (!s0.ok()) return s0.status();
      if (!s1.ok()) return s1.status();
      if (*s0 > *s1) return invalid("flatten: start_dim %d comes after end_dim %d", *s0, *s1);
      v.start_dim = *s0;
      v.end_dim = *s1;
      v.store(a);
      if (r == 0) return Shape{1};
      Shape s(in.begin(), in.begin() + *s0);
      int64_t m = 1;
      for (int64_t i = *s0; i <= *s1; ++i) m *= in[i];
      s.push_back(m);
      s.insert(s.end(), in.begin() + *s1 + 1, in.end());
      return s;
    }
    case OpId::kTranspose: {
      auto v = TransposeAttrs::of(a);
      auto d0 = wrap_dim(name, v.dim0, r), d1 = wrap_dim(name, v.dim1, r);
      if (!d0.ok()) return d0.status();
      if (!d1.ok()) return d1.status();
      v.dim0 = *d0;
      v.dim1 = *d1;
      v.store(a);
      Shape s = in;
      if (r > 0) std::swap(s[*d0], s[*d1]);
      return s;
    }
    case OpId::kT: {
      if (r > 2)
        return invalid("t: expects a tensor with <= 2 dims, got %s; use transpose(d0, d1)", shape_str(in));
      return r == 2 ? Shape{in[1], in[0]} : in;
    }
    case OpId::kSqueeze: {
      Shape s;
      if (SqueezeAttrs::of(a).all) {
        for (int64_t d : in) if (d != 1) s.push_back(d);
        return s;
      }
      auto dims = wrap_dims(name, a.dims, r);
      if (!dims.ok()) return dims.status();
      a.dims.assign(dims->begin(), dims->end());
      for (int64_t i = 0; i < r; ++i)
        if (in[i] != 1 || std::find(dims->begin(), dims->end(), i) == dims->end()) s.push_back(in[i]);
      return s;
    }
    case OpId::kUnsqueeze: {
      auto v = DimAttrs::of(a);
      auto d = wrap_dim(name, v.dim, r + 1);
      if (!d.ok()) return d.status();
      v.dim = *d;
      v.store(a);
      Shape s = in;
      s.insert(s.begin() + *d, 1);
      return s;
    }
    default:
      return invalid("%s is not a view op", name);
  }
}

std::optional<Layout> apply_view(OpId op, const Attrs& a, const Layout& in) {
  Layout out;
  out.offset = in.offset;
  switch (op) {
    case OpId::kReshape: {
      auto st = view_strides(in.shape, in.strides, a.dims);
      if (!st) return std::nullopt;
      out.shape.assign(a.dims.begin(), a.dims.end());
      out.strides = std::move(*st);
      return out;
    }
    case OpId::kPermute:
      for (int64_t d : a.dims) {
        out.shape.push_back(in.shape[d]);
        out.strides.push_back(in.strides[d]);
      }
      return out;
    case OpId::kExpand: {
      out.shape.assign(a.dims.begin(), a.dims.end());
      out.strides = broadcast_strides(in.shape, in.strides, out.shape);
      return out;
    }
    case OpId::kSlice: {
      const auto v = SliceAttrs::of(a);
      out.shape = in.shape;
      out.strides = in.strides;
      out.shape[v.dim] = (v.end - v.start + v.step - 1) / v.step;
      out.strides[v.dim] *= v.step;
      out.offset += v.start * in.strides[v.dim];
      return out;
    }
    case OpId::kSelect: {
      const auto v = SelectAttrs::of(a);
      out.shape = in.shape;
      out.strides = in.strides;
      out.offset += v.index * in.strides[v.dim];
      out.shape.erase(out.shape.begin() + v.dim);
      out.strides.erase(out.strides.begin() + v.dim);
      return out;
    }
    case OpId::kDiagonal: {
      const auto v = DiagonalAttrs::of(a);
      const int64_t d0 = v.dim1, d1 = v.dim2, off = v.offset;
      for (size_t i = 0; i < in.shape.size(); ++i) {
        if (static_cast<int64_t>(i) == d0 || static_cast<int64_t>(i) == d1) continue;
        out.shape.push_back(in.shape[i]);
        out.strides.push_back(in.strides[i]);
      }
      int64_t n = off >= 0 ? std::min(in.shape[d0], in.shape[d1] - off)
                           : std::min(in.shape[d0] + off, in.shape[d1]);
      n = std::max<int64_t>(n, 0);
      if (n > 0) out.offset += off >= 0 ? off * in.strides[d1] : -off * in.strides[d0];
      out.shape.push_back(n);
      out.strides.push_back(in.strides[d0] + in.strides[d1]);
      return out;
    }
    case OpId::kAsStrided: {
      if (!is_contiguous(in.shape, in.strides)) return std::nullopt;
      const auto v = AsStridedAttrs::of(a);
      out.shape.assign(v.size.begin(), v.size.end());
      out.strides.assign(v.stride.begin(), v.stride.end());
      out.offset = in.offset + v.offset;
      return out;
    }
    default:
      return std::nullopt;
  }
}

PrimitiveView lower_view(OpId op, const Shape& in, const Attrs& a) {
  PrimitiveView p{OpId::kReshape, {}};
  const int64_t r = rank_of(in);
  switch (op) {
    case OpId::kView: case OpId::kFlatten: case OpId::kSqueeze: case OpId::kUnsqueeze: {
      Attrs tmp = a;
      auto s = view_shape(op, in, tmp);
      p.attrs.dims.assign(s->begin(), s->end());
      return p;
    }
    case OpId::kTranspose: case OpId::kT: {
      p.op = OpId::kPermute;
      for (int64_t i = 0; i < r; ++i) p.attrs.dims.push_back(i);
      if (op == OpId::kTranspose && r > 0) {
        const auto v = TransposeAttrs::of(a);
        std::swap(p.attrs.dims[v.dim0], p.attrs.dims[v.dim1]);
      }
      if (op == OpId::kT && r == 2) std::swap(p.attrs.dims[0], p.attrs.dims[1]);
      return p;
    }
    case OpId::kNarrow: {
      const auto v = NarrowAttrs::of(a);
      p.op = OpId::kSlice;
      p.attrs = SliceAttrs{.dim = v.dim, .start = v.start, .end = v.start + v.length, .step = 1};
      return p;
    }
    default:
      return {op, a};
  }
}

std::optional<OpId> view_of_scatter(OpId scatter) {
  if (op_info(scatter).category != OpCategory::Scatter) return std::nullopt;
  return op_info(scatter).facts.inverse;
}

ViewInverse inverse_of_view(OpId view, const Attrs& attrs, const Shape& in_shape) {
  if (std::optional<OpId> scatter = op_info(view).facts.inverse) return {*scatter, attrs, true};
  Attrs a;
  switch (view) {
    case OpId::kPermute:
      a.dims.resize(attrs.dims.size());
      for (size_t i = 0; i < attrs.dims.size(); ++i)
        a.dims[attrs.dims[i]] = static_cast<int64_t>(i);
      return {OpId::kPermute, a, false};
    case OpId::kReshape: case OpId::kExpand:
      a.dims.assign(in_shape.begin(), in_shape.end());
      return {OpId::kReshape, a, false};
    default:
      fail("internal: %s is not a primitive view op (no inverse)", op_name(view));
  }
}

}  // namespace sloth
