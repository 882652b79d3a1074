#include "sloth/indexing.h"

#include <algorithm>
#include <limits>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth::indexing {

TensorIndex::TensorIndex(const char* s) : kind_(Kind::kEllipsis) {
  if (s == nullptr || std::string(s) != "...")
    fail("TensorIndex: the only string index is \"...\" (Ellipsis), got \"%s\"; use Slice(), "
         "None or an integer", s == nullptr ? "(null)" : s);
}

std::string TensorIndex::to_string() const {
  const auto opt = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; };
  switch (kind_) {
    case Kind::kNone: return "None";
    case Kind::kEllipsis: return "...";
    case Kind::kInteger: return std::to_string(integer_);
    case Kind::kBoolean: return boolean_ ? "True" : "False";
    case Kind::kSlice: {
      std::string r = opt(slice_.start()) + ":" + opt(slice_.stop());
      if (slice_.step()) r += ":" + std::to_string(*slice_.step());
      return r;
    }
    case Kind::kTensor: return "tensor" + shape_str(tensor_.shape());
  }
  return "?";
}

namespace {

std::string indices_str(std::span<const TensorIndex> idx) {
  std::string r = "[";
  for (size_t i = 0; i < idx.size(); ++i) r += (i ? ", " : "") + idx[i].to_string();
  return r + "]";
}

// The indices with bool masks replaced by the int64 index tensors of their true positions
// (one per dim the mask covers). Reading a mask is a sync: its result size depends on it.
std::vector<TensorIndex> expand_masks(const Tensor& self, std::span<const TensorIndex> idx,
                                      int64_t* consumed) {
  std::vector<TensorIndex> out;
  *consumed = 0;
  int ellipses = 0;
  for (const TensorIndex& i : idx) {
    switch (i.kind()) {
      case TensorIndex::Kind::kEllipsis: ++ellipses; break;
      case TensorIndex::Kind::kInteger: case TensorIndex::Kind::kSlice: ++*consumed; break;
      case TensorIndex::Kind::kTensor: {
        const Tensor& t = i.tensor();
        if (!t.defined()) fail("Tensor::index: index %s is an undefined tensor", indices_str(idx));
        const DType d = t.dtype();
        if (d == DType::kBool || d == DType::kUInt8) *consumed += t.dim();  // 0-dim: a bool
        else if (d == DType::kInt64) ++*consumed;
        else
          fail("Tensor::index: tensors used as indices must be int64 or bool (masks), got %s in "
               "%s", dtype_name(d), indices_str(idx));
        break;
      }
      default: break;
    }
  }
  if (ellipses > 1) fail("Tensor::index: an index can only have a single ellipsis ('...'): %s",
                         indices_str(idx));
  if (*consumed > self.dim())
    fail("Tensor::index: too many indices for a tensor of dimension %d (shape %s): %s",
         self.dim(), shape_str(self.shape()), indices_str(idx));
  int64_t src = 0;  // the next dim of self an index applies to (before the ellipsis)
  for (const TensorIndex& i : idx) {
    if (i.kind() == TensorIndex::Kind::kTensor &&
        (i.tensor().dtype() == DType::kBool || i.tensor().dtype() == DType::kUInt8) &&
        i.tensor().dim() > 0) {
      const Tensor& m = i.tensor();
      const Shape ms = m.shape();
      for (size_t k = 0; k < ms.size(); ++k) {
        const int64_t d = src + static_cast<int64_t>(k);
        if (d >= self.dim() || self.size(d) != ms[k])
          fail("Tensor::index: the mask of shape %s does not match the shape %s of the indexed "
               "tensor at dim %d; a mask covers as many dims as it has, with their sizes",
               shape_str(ms), shape_str(self.shape()), d);
      }
      // Its true positions, as one int64 index per covered dim (row-major order, as nonzero).
      const std::vector<double> v = m.to(DType::kFloat64).to_vector<double>();
      std::vector<std::vector<int64_t>> pos(ms.size());
      for (int64_t flat = 0; flat < static_cast<int64_t>(v.size()); ++flat) {
        if (v[static_cast<size_t>(flat)] == 0) continue;
        int64_t rem = flat;
        for (size_t k = ms.size(); k-- > 0;) {
          pos[k].push_back(rem % ms[k]);
          rem /= ms[k];
        }
      }
      for (const auto& p : pos) {  // flat positions ascend: row-major order, as nonzero
        const int64_t n = static_cast<int64_t>(p.size());
        out.emplace_back(from_vector(p, {n}, TensorOptions().dtype(DType::kInt64).device(self.device())));
      }
      src += static_cast<int64_t>(ms.size());
      continue;
    }
    if (i.kind() == TensorIndex::Kind::kTensor && i.tensor().dim() == 0 &&
        (i.tensor().dtype() == DType::kBool || i.tensor().dtype() == DType::kUInt8)) {
      out.emplace_back(i.tensor().item() != 0);  // a 0-dim mask is x[True] / x[False]
      continue;
    }
    if (i.kind() == TensorIndex::Kind::kEllipsis) src = self.dim() - (*consumed - src);
    else if (i.kind() == TensorIndex::Kind::kInteger || i.kind() == TensorIndex::Kind::kSlice ||
             i.kind() == TensorIndex::Kind::kTensor)
      ++src;
    out.push_back(i);
  }
  return out;
}

// Applies the basic indices (integers, slices, None, Ellipsis) as views; the dims of the
// index tensors stay, listed in `adv_dims` (positions in `view`) with their tensors.
struct Applied {
  Tensor view;
  std::vector<int64_t> adv_dims;
  std::vector<Tensor> adv_idx;
};

Applied apply_basic(const Tensor& self, std::span<const TensorIndex> given) {
  int64_t consumed = 0;
  const std::vector<TensorIndex> idx = expand_masks(self, given, &consumed);
  Applied a{.view = self};
  int64_t d = 0;  // the current dim of a.view
  for (const TensorIndex& i : idx) {
    switch (i.kind()) {
      case TensorIndex::Kind::kNone:
        a.view = a.view.unsqueeze(d++);
        break;
      case TensorIndex::Kind::kBoolean:
        // x[True] adds a dim of size 1, x[False] one of size 0 (PyTorch's rule).
        a.view = a.view.unsqueeze(d);
        if (!i.boolean()) a.view = a.view.slice(d, 0, 0);
        ++d;
        break;
      case TensorIndex::Kind::kEllipsis:
        d += self.dim() - consumed;
        break;
      case TensorIndex::Kind::kInteger: {
        const int64_t n = a.view.size(d);
        int64_t k = i.integer();
        if (k < -n || k >= n)
          fail("Tensor::index: index %d is out of bounds for dimension %d with size %d "
               "(indices %s, tensor %s)",
               k, d, n, indices_str(given), shape_str(self.shape()));
        a.view = a.view.select(d, k < 0 ? k + n : k);
        break;
      }
      case TensorIndex::Kind::kSlice: {
        const int64_t n = a.view.size(d);
        const int64_t step = i.slice().step().value_or(1);
        if (step <= 0)
          fail("Tensor::index: slice step must be positive, got %d (indices %s)", step,
               indices_str(given));
        const auto clampi = [n](std::optional<int64_t> v, int64_t dflt) {
          if (!v) return dflt;
          const int64_t x = *v < 0 ? *v + n : *v;
          return std::clamp<int64_t>(x, 0, n);
        };
        const int64_t start = clampi(i.slice().start(), 0);
        const int64_t stop = std::max(start, clampi(i.slice().stop(), n));
        if (start != 0 || stop != n || step != 1) a.view = a.view.slice(d, start, stop, step);
        ++d;
        break;
      }
      case TensorIndex::Kind::kTensor:
        a.adv_dims.push_back(d++);
        a.adv_idx.push_back(i.tensor());
        break;
    }
  }
  return a;
}

// The common shape of the index tensors (NumPy broadcasting), or PyTorch's error.
Shape broadcast_indices(const std::vector<Tensor>& idx, std::span<const TensorIndex> given) {
  Shape b = idx[0].shape();
  for (size_t k = 1; k < idx.size(); ++k) {
    auto r = broadcast_shapes("index", b, idx[k].shape());
    if (!r.ok()) {
      std::string shapes;
      for (const Tensor& t : idx) shapes += (shapes.empty() ? "" : ", ") + shape_str(t.shape());
      fail("Tensor::index: shape mismatch: indexing tensors could not be broadcast together "
           "with shapes %s (indices %s)", shapes, indices_str(given));
    }
    b = *r;
  }
  return b;
}

// How the advanced dims are gathered: the view with them moved first, their flat (row-major)
// position per index element (shape `bshape`), and where their result dims go.
struct Gather {
  Tensor moved;        // view.permute(adv dims first, then the others): a view
  Tensor flat_index;   // [numel(bshape)] int64
  Shape bshape;        // the broadcast index shape
  Shape rest;          // the other dims of the view, in order
  int64_t adv_count = 0, adv_numel = 1;
  int64_t put_at = 0;  // where the index dims go in the result (first adv dim if adjacent)
};

Gather plan_gather(const Applied& a, std::span<const TensorIndex> given) {
  Gather g;
  g.bshape = broadcast_indices(a.adv_idx, given);
  const int64_t rank = a.view.dim();
  g.adv_count = static_cast<int64_t>(a.adv_dims.size());
  bool adjacent = true;
  for (size_t k = 1; k < a.adv_dims.size(); ++k) adjacent &= a.adv_dims[k] == a.adv_dims[k - 1] + 1;
  g.put_at = adjacent ? a.adv_dims[0] : 0;
  Shape perm;
  for (int64_t d : a.adv_dims) perm.push_back(d);
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(a.adv_dims.begin(), a.adv_dims.end(), d) == a.adv_dims.end()) {
      perm.push_back(d);
      g.rest.push_back(a.view.size(d));
    }
  g.moved = a.view.permute(perm);
  // Flat position over the advanced dims; negative indices count from the end.
  Tensor flat;
  for (size_t k = 0; k < a.adv_dims.size(); ++k) {
    const int64_t n = a.view.size(a.adv_dims[k]);
    g.adv_numel *= n;
    Tensor ik = a.adv_idx[k].expand(g.bshape);
    ik = where(ik < 0, ik + n, ik);
    flat = k == 0 ? ik : flat * n + ik;
  }
  g.flat_index = flat.reshape({-1});
  return g;
}

Shape concat(const Shape& a, const Shape& b) {
  Shape r = a;
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

// Moves the first `nb` dims of x to position `at` (a permutation; identity when at == 0).
Tensor move_front_dims(const Tensor& x, int64_t nb, int64_t at) {
  if (at == 0 || nb == 0) return x;
  Shape perm;
  const int64_t rank = x.dim();
  for (int64_t d = nb; d < nb + at; ++d) perm.push_back(d);
  for (int64_t d = 0; d < nb; ++d) perm.push_back(d);
  for (int64_t d = nb + at; d < rank; ++d) perm.push_back(d);
  return x.permute(perm);
}

Tensor index_impl(const Tensor& self, std::span<const TensorIndex> idx) {
  if (!self.defined()) fail("Tensor::index: the tensor is undefined");
  Applied a = apply_basic(self, idx);
  if (a.adv_idx.empty()) return a.view;
  if (a.adv_idx.size() == 1 && a.adv_idx[0].dim() <= 1) {
    // One 0-d or 1-d index: index_select on its dim, nothing moved.
    const int64_t d = a.adv_dims[0], n = a.view.size(d);
    const Tensor i = a.adv_idx[0].reshape({-1});
    Shape s = a.view.shape();
    if (a.adv_idx[0].dim() == 0) s.erase(s.begin() + d);
    else s[static_cast<size_t>(d)] = i.numel();
    return index_select(a.view, d, where(i < 0, i + n, i)).reshape(s);
  }
  Gather g = plan_gather(a, idx);
  const Tensor table = g.moved.reshape(concat({g.adv_numel}, g.rest));
  const Tensor picked = index_select(table, 0, g.flat_index).reshape(concat(g.bshape, g.rest));
  return move_front_dims(picked, static_cast<int64_t>(g.bshape.size()), g.put_at);
}

void put_impl(const Tensor& self, std::span<const TensorIndex> idx, const Tensor& values) {
  if (!self.defined()) fail("Tensor::index_put_: the tensor is undefined");
  if (!values.defined()) fail("Tensor::index_put_: the values are undefined (indices %s)",
                              indices_str(idx));
  Applied a = apply_basic(self, idx);
  if (a.adv_idx.empty()) {
    a.view.copy_(values);  // broadcasts and casts, as Python's x[...] = v
    return;
  }
  if (values.dtype() != self.dtype())
    fail("Tensor::index_put_: index put requires the source and destination dtypes match, got "
         "%s for the destination and %s for the source (indices %s); convert with .to(%s)",
         dtype_name(self.dtype()), dtype_name(values.dtype()), indices_str(idx),
         dtype_name(self.dtype()));
  Gather g = plan_gather(a, idx);
  // The indexed result's shape, which the values must broadcast to.
  Shape result = concat(g.bshape, g.rest);
  if (g.put_at > 0) {
    result = Shape(g.rest.begin(), g.rest.begin() + g.put_at);
    result.insert(result.end(), g.bshape.begin(), g.bshape.end());
    result.insert(result.end(), g.rest.begin() + g.put_at, g.rest.end());
  }
  auto b = broadcast_shapes("index_put_", values.shape(), result);
  if (!b.ok() || *b != result)
    fail("Tensor::index_put_: shape mismatch: value tensor of shape %s cannot be broadcast to "
         "indexing result of shape %s (indices %s)",
         shape_str(values.shape()), shape_str(result), indices_str(idx));
  Tensor v = values.expand(result);
  if (g.put_at > 0) {  // bring the index dims first, as in `moved`
    const int64_t nb = static_cast<int64_t>(g.bshape.size());
    Shape perm;
    for (int64_t d = g.put_at; d < g.put_at + nb; ++d) perm.push_back(d);
    for (int64_t d = 0; d < g.put_at; ++d) perm.push_back(d);
    for (int64_t d = g.put_at + nb; d < v.dim(); ++d) perm.push_back(d);
    v = v.permute(perm);
  }
  const Shape table_shape = concat({g.adv_numel}, g.rest);
  const Tensor table = g.moved.reshape(table_shape);
  const Tensor updated =
      index_put(table, g.flat_index, v.reshape(concat({g.flat_index.numel()}, g.rest)));
  g.moved.copy_(updated.reshape(g.moved.shape()));  // g.moved views self: writes it
}

}  // namespace
}  // namespace sloth::indexing

namespace sloth {

using indexing::TensorIndex;

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return indexing::index_impl(*this, std::span<const TensorIndex>(indices.begin(), indices.size()));
}
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  return indexing::index_impl(*this, indices);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values) const {
  indexing::put_impl(*this, std::span<const TensorIndex>(indices.begin(), indices.size()), values);
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& values) const {
  indexing::put_impl(*this, indices, values);
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Scalar& value) const {
  return index_put_(std::vector<TensorIndex>(indices), value);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Scalar& value) const {
  if (!defined()) fail("Tensor::index_put_: the tensor is undefined");
  check_fits("index_put_", value, dtype());
  indexing::put_impl(*this, indices, full({}, value, TensorOptions().dtype(dtype()).device(device())));
  return const_cast<Tensor&>(*this);
}

}  // namespace sloth
