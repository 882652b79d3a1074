#include "core/view_layout.h"

#include <algorithm>

#include "core/error.h"

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
    case OpId::kSlice: case OpId::kNarrow: {
      if (r == 0) return invalid("%s: cannot slice a 0-dim tensor", name);
      auto d = wrap_dim(name, a.i0, r);
      if (!d.ok()) return d.status();
      a.i0 = *d;
      int64_t size = in[*d];
      if (op == OpId::kNarrow) {
        int64_t start = a.i1 < 0 ? a.i1 + size : a.i1;
        if (start < 0 || start > size || a.i2 < 0 || start + a.i2 > size)
          return invalid("narrow: start %d with length %d is out of range for dim %d of size %d",
                         a.i1, a.i2, *d, size);
        a.i1 = start;
        Shape s = in;
        s[*d] = a.i2;
        return s;
      }
      if (a.i3 <= 0) return invalid("slice: step must be positive, got %d", a.i3);
      int64_t start = a.i1 < 0 ? a.i1 + size : a.i1, end = a.i2 < 0 ? a.i2 + size : a.i2;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      a.i1 = start;
      a.i2 = end;
      Shape s = in;
      s[*d] = (end - start + a.i3 - 1) / a.i3;
      return s;
    }
    case OpId::kSelect: {
      if (r == 0) return invalid("select: cannot select from a 0-dim tensor");
      auto d = wrap_dim(name, a.i0, r);
      if (!d.ok()) return d.status();
      a.i0 = *d;
      int64_t size = in[*d];
      if (a.i1 < -size || a.i1 >= size)
        return invalid("select: index %d is out of range for dim %d of size %d (tensor %s)", a.i1,
                       *d, size, shape_str(in));
      if (a.i1 < 0) a.i1 += size;
      Shape s = in;
      s.erase(s.begin() + *d);
      return s;
    }
    case OpId::kDiagonal: {
      if (r < 2) return invalid("diagonal: needs at least 2 dims, got %s", shape_str(in));
      auto d0 = wrap_dim(name, a.i1, r), d1 = wrap_dim(name, a.i2, r);
      if (!d0.ok()) return d0.status();
      if (!d1.ok()) return d1.status();
      if (*d0 == *d1) return invalid("diagonal: dims must differ, both are %d", *d0);
      a.i1 = *d0;
      a.i2 = *d1;
      int64_t n = a.i0 >= 0 ? std::min(in[*d0], in[*d1] - a.i0) : std::min(in[*d0] + a.i0, in[*d1]);
      Shape s;
      for (int64_t i = 0; i < r; ++i)
        if (i != *d0 && i != *d1) s.push_back(in[i]);
      s.push_back(std::max<int64_t>(n, 0));
      return s;
    }
    case OpId::kAsStrided: {
      if (a.dims.size() != a.dims2.size())
        return invalid("as_strided: size %s and stride %s must have the same length",
                       shape_str(a.dims), shape_str(a.dims2));
      int64_t last = a.i0;
      bool empty = false;
      for (size_t i = 0; i < a.dims.size(); ++i) {
        if (a.dims[i] < 0 || a.dims2[i] < 0)
          return invalid("as_strided: negative size or stride in %s / %s", shape_str(a.dims), shape_str(a.dims2));
        if (a.dims[i] == 0) empty = true;
        last += (a.dims[i] - 1) * a.dims2[i];
      }
      if (a.i0 < 0) return invalid("as_strided: negative storage offset %d", a.i0);
      if (!empty && last >= numel(in))
        return invalid("as_strided: size %s, stride %s and offset %d reach element %d, but the "
                       "storage has only %d elements",
                       shape_str(a.dims), shape_str(a.dims2), a.i0, last, numel(in));
      return Shape(a.dims.begin(), a.dims.end());
    }
    case OpId::kFlatten: {
      auto s0 = wrap_dim(name, a.i0, r), s1 = wrap_dim(name, a.i1, r);
      if (!s0.ok()) return s0.status();
      if (!s1.ok()) return s1.status();
      if (*s0 > *s1) return invalid("flatten: start_dim %d comes after end_dim %d", *s0, *s1);
      a.i0 = *s0;
      a.i1 = *s1;
      if (r == 0) return Shape{1};
      Shape s(in.begin(), in.begin() + *s0);
      int64_t m = 1;
      for (int64_t i = *s0; i <= *s1; ++i) m *= in[i];
      s.push_back(m);
      s.insert(s.end(), in.begin() + *s1 + 1, in.end());
      return s;
    }
    case OpId::kTranspose: {
      auto d0 = wrap_dim(name, a.i0, r), d1 = wrap_dim(name, a.i1, r);
      if (!d0.ok()) return d0.status();
      if (!d1.ok()) return d1.status();
      a.i0 = *d0;
      a.i1 = *d1;
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
      if (a.flag) {
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
      auto d = wrap_dim(name, a.i0, r + 1);
      if (!d.ok()) return d.status();
      a.i0 = *d;
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
    case OpId::kSlice:
      out.shape = in.shape;
      out.strides = in.strides;
      out.shape[a.i0] = (a.i2 - a.i1 + a.i3 - 1) / a.i3;
      out.strides[a.i0] *= a.i3;
      out.offset += a.i1 * in.strides[a.i0];
      return out;
    case OpId::kSelect:
      out.shape = in.shape;
      out.strides = in.strides;
      out.offset += a.i1 * in.strides[a.i0];
      out.shape.erase(out.shape.begin() + a.i0);
      out.strides.erase(out.strides.begin() + a.i0);
      return out;
    case OpId::kDiagonal: {
      int64_t d0 = a.i1, d1 = a.i2;
      for (size_t i = 0; i < in.shape.size(); ++i) {
        if (static_cast<int64_t>(i) == d0 || static_cast<int64_t>(i) == d1) continue;
        out.shape.push_back(in.shape[i]);
        out.strides.push_back(in.strides[i]);
      }
      int64_t n = a.i0 >= 0 ? std::min(in.shape[d0], in.shape[d1] - a.i0)
                            : std::min(in.shape[d0] + a.i0, in.shape[d1]);
      n = std::max<int64_t>(n, 0);
      if (n > 0) out.offset += a.i0 >= 0 ? a.i0 * in.strides[d1] : -a.i0 * in.strides[d0];
      out.shape.push_back(n);
      out.strides.push_back(in.strides[d0] + in.strides[d1]);
      return out;
    }
    case OpId::kAsStrided:
      if (!is_contiguous(in.shape, in.strides)) return std::nullopt;
      out.shape.assign(a.dims.begin(), a.dims.end());
      out.strides.assign(a.dims2.begin(), a.dims2.end());
      out.offset = in.offset + a.i0;
      return out;
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
      if (op == OpId::kTranspose && r > 0) std::swap(p.attrs.dims[a.i0], p.attrs.dims[a.i1]);
      if (op == OpId::kT && r == 2) std::swap(p.attrs.dims[0], p.attrs.dims[1]);
      return p;
    }
    case OpId::kNarrow:
      p.op = OpId::kSlice;
      p.attrs.i0 = a.i0;
      p.attrs.i1 = a.i1;
      p.attrs.i2 = a.i1 + a.i2;
      p.attrs.i3 = 1;
      return p;
    default:
      return {op, a};
  }
}

std::optional<OpId> view_of_scatter(OpId scatter) {
  switch (scatter) {
    case OpId::kSliceScatter: return OpId::kSlice;
    case OpId::kSelectScatter: return OpId::kSelect;
    case OpId::kDiagonalScatter: return OpId::kDiagonal;
    case OpId::kAsStridedScatter: return OpId::kAsStrided;
    default: return std::nullopt;
  }
}

}  // namespace sloth
