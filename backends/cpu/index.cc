// The index ops (index_select, gather, scatter_add, index_add, index_put, one_hot) on the
// host; their checks and geometry are the shared rules of lazy/structural.h. Indices are read
// once into an int64 vector and checked before anything is written, so a bad index is
// reported (op, index, valid range) and never touches memory.
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "lazy/structural.h"

namespace sloth::cpu {
namespace {

using lazy::IndexRange;
using lazy::indexed_size;
using lazy::select_layout;

std::vector<int64_t> read_indices(const DeviceData& idx) {
  std::vector<int64_t> v(idx.numel());
  copy_strided(v.data(), DType::kInt64, contiguous_strides(idx.layout.shape), idx.raw(),
               idx.dtype, idx.layout.strides, idx.layout.shape);
  return v;
}

absl::Status index_select(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  std::vector<int64_t> idx = read_indices(env.get(in.in[1]));
  SLOTH_RETURN_IF_ERROR(
      lazy::check_index_range(in, idx, dim, indexed_size(x, dim), IndexRange::kNonNegative));
  DeviceData out = env.alloc(in.shape, in.dtype);
  if (x.layout.shape.empty()) {
    copy_into(out, x);
  } else if (x.is_contiguous() && x.dtype == out.dtype) {
    // Rows of a contiguous input are contiguous blocks: copy them directly (embeddings).
    const Shape& s = x.layout.shape;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= s[d];
    for (size_t d = dim + 1; d < s.size(); ++d) inner *= s[d];
    const size_t bytes = inner * dtype_size(x.dtype);
    const int64_t len = static_cast<int64_t>(idx.size());
    const char* src = ptr(x);
    char* dst = ptr(out);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < len; ++i)
        std::memcpy(dst + (o * len + i) * bytes, src + (o * s[dim] + idx[i]) * bytes, bytes);
  } else {
    for (size_t i = 0; i < idx.size(); ++i)
      copy_into(with_layout(out, select_layout(out.layout, dim, i)),
                with_layout(x, select_layout(x.layout, dim, idx[i])));
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

// out[pos] = x[pos with dim := index[pos]] (gather), or
// out[pos with dim := index[pos]] += src[pos] (scatter_add), over the index's positions.
template <bool kScatter>
absl::Status gather_scatter(Env& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& x = env.get(in.in[0]);
  const DeviceData& index = env.get(in.in[1]);
  std::vector<int64_t> idx = read_indices(index);
  SLOTH_RETURN_IF_ERROR(
      lazy::check_index_range(in, idx, dim, indexed_size(x, dim), IndexRange::kNonNegative));
  DeviceData out = kScatter ? make_contiguous(env, x, in.dtype) : env.alloc(in.shape, in.dtype);
  if (idx.empty()) {
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  const DeviceData& target = kScatter ? out : x;
  const DeviceData* other = kScatter ? &env.get(in.in[2]) : &out;
  const lazy::IndexWalk w = lazy::gather_walk(target, *other, index, dim);
  const Shape& shape = w.shape;
  const Strides &ts = w.target, &os = w.other;
  const int64_t dstride = w.dstride;
  const int nd = static_cast<int>(shape.size());
  visit_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    T* t = target.data<T>();
    T* o = other->data<T>();
    int64_t lin = 0;
    for_each_run<2>(shape.data(), nd, {ts.data(), os.data()}, 0, numel(shape),
                    [&](const std::array<int64_t, 2>& off, int64_t run) {
                      for (int64_t j = 0; j < run; ++j, ++lin) {
                        T* tp = t + off[0] + j * ts[nd - 1] + idx[lin] * dstride;
                        T* op = o + off[1] + j * os[nd - 1];
                        if constexpr (kScatter) *tp = static_cast<T>(*tp + *op);
                        else *op = *tp;
                      }
                    });
  });
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status index_add(Env& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& src = env.get(in.in[2]);
  std::vector<int64_t> idx = read_indices(env.get(in.in[1]));
  SLOTH_RETURN_IF_ERROR(
      lazy::check_index_range(in, idx, dim, indexed_size(base, dim), IndexRange::kNonNegative));
  DeviceData out = make_contiguous(env, base, in.dtype);
  if (base.layout.shape.empty()) {
    if (!idx.empty()) copy_into(out, src, /*accumulate=*/true);
  } else {
    for (size_t i = 0; i < idx.size(); ++i)
      copy_into(with_layout(out, select_layout(out.layout, dim, idx[i])),
                with_layout(src, select_layout(src.layout, dim, i)), /*accumulate=*/true);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status index_put(Env& env, const Instr& in) {
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& values = env.get(in.in[2]);
  std::vector<int64_t> idx = read_indices(env.get(in.in[1]));
  const int64_t size = base.layout.shape[0];
  SLOTH_RETURN_IF_ERROR(lazy::check_index_range(in, idx, 0, size, IndexRange::kWrapping));
  for (int64_t& i : idx)
    if (i < 0) i += size;
  DeviceData out = make_contiguous(env, base, in.dtype);
  const Layout vl = lazy::index_put_values(base, values, static_cast<int64_t>(idx.size()));
  DeviceData vb = with_layout(values, vl);
  // In index order, so with duplicate indices the last write wins.
  for (size_t i = 0; i < idx.size(); ++i)
    copy_into(with_layout(out, select_layout(out.layout, 0, idx[i])),
              with_layout(vb, select_layout(vl, 0, i)));
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status one_hot(Env& env, const Instr& in) {
  const int64_t classes = OneHotAttrs::of(in.attrs).num_classes;
  std::vector<int64_t> idx = read_indices(env.get(in.in[0]));
  SLOTH_RETURN_IF_ERROR(lazy::check_index_range(in, idx, 0, classes, IndexRange::kClasses));
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  int64_t* o = out.data<int64_t>();
  std::memset(o, 0, out.numel() * sizeof(int64_t));
  for (size_t i = 0; i < idx.size(); ++i) o[i * classes + idx[i]] = 1;
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

const lazy::IndexKernels<Env> kIndexKernels{index_select,         gather_scatter<false>,
                                               gather_scatter<true>, index_add,
                                               index_put,            one_hot};

}  // namespace sloth::cpu
