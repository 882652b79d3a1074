// Index and shape ops: index_select, gather, scatter_add, index_add, index_put, one_hot, cat,
// clone. Indices are read once into an int64 vector and checked before anything is written,
// so a bad index is reported (op, index, valid range) and never touches memory.
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "core/error.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

std::vector<int64_t> read_indices(const DeviceData& idx) {
  std::vector<int64_t> v(idx.numel());
  copy_strided(v.data(), DType::kInt64, contiguous_strides(idx.layout.shape), idx.raw(),
               idx.dtype, idx.layout.strides, idx.layout.shape);
  return v;
}

absl::Status check_range(const Instr& in, const std::vector<int64_t>& idx, int64_t dim,
                         int64_t size) {
  for (int64_t i : idx)
    if (i < 0 || i >= size)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d is out of range for dim %d of size %d (valid: 0 to %d)", op_name(in.op),
          i, dim, size, size - 1));
  return absl::OkStatus();
}

Layout select_layout(const Layout& l, int64_t dim, int64_t i) {
  Layout o = l;
  o.offset += i * l.strides[dim];
  o.shape.erase(o.shape.begin() + dim);
  o.strides.erase(o.strides.begin() + dim);
  return o;
}

int64_t dim_size(const DeviceData& x, int64_t dim) {
  return x.layout.shape.empty() ? 1 : x.layout.shape[dim];
}

absl::Status index_select(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  std::vector<int64_t> idx = read_indices(env.get(in.in[1]));
  SLOTH_RETURN_IF_ERROR(check_range(in, idx, dim, dim_size(x, dim)));
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
  SLOTH_RETURN_IF_ERROR(check_range(in, idx, dim, dim_size(x, dim)));
  DeviceData out = kScatter ? make_contiguous(env, x, in.dtype) : env.alloc(in.shape, in.dtype);
  if (idx.empty()) {
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  // The indexed tensor (x for gather, out for scatter_add) walked with stride 0 along dim;
  // the index's value supplies that coordinate.
  const DeviceData& target = kScatter ? out : x;
  const DeviceData* other = kScatter ? &env.get(in.in[2]) : &out;
  Shape shape = index.layout.shape;
  if (shape.empty()) shape = {1};
  Strides ts = target.layout.strides, os = other->layout.strides;
  if (ts.empty()) ts = {0};
  if (os.empty()) os = {0};
  const int64_t dstride = ts[dim];
  ts[dim] = 0;
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
  SLOTH_RETURN_IF_ERROR(check_range(in, idx, dim, dim_size(base, dim)));
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
  for (int64_t& i : idx) {
    if (i < -size || i >= size)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d is out of range for dim 0 of size %d (valid: %d to %d)", op_name(in.op),
          i, size, -size, size - 1));
    if (i < 0) i += size;
  }
  DeviceData out = make_contiguous(env, base, in.dtype);
  Shape target = base.layout.shape;
  target[0] = static_cast<int64_t>(idx.size());
  Layout vl{target, broadcast_strides(values.layout.shape, values.layout.strides, target),
            values.layout.offset};
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
  for (int64_t i : idx)
    if (i < 0 || i >= classes)
      return absl::InvalidArgumentError(absl::StrFormat(
          "one_hot: index %d is out of range for num_classes %d (valid: 0 to %d)", i, classes,
          classes - 1));
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  int64_t* o = out.data<int64_t>();
  std::memset(o, 0, out.numel() * sizeof(int64_t));
  for (size_t i = 0; i < idx.size(); ++i) o[i * classes + idx[i]] = 1;
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status cat(Env& env, const Instr& in) {
  const int64_t dim = DimAttrs::of(in.attrs).dim;
  DeviceData out = env.alloc(in.shape, in.dtype);
  int64_t at = 0;
  for (int32_t slot : in.in) {
    const DeviceData& x = env.get(slot);
    const int64_t len = x.layout.shape[dim];
    if (len > 0 && x.numel() > 0) {
      Layout w = out.layout;
      w.offset += at * w.strides[dim];
      w.shape[dim] = len;
      copy_into(with_layout(out, w), x);
    }
    at += len;
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

absl::Status run_index(Env& env, const Instr& in) {
  switch (in.op) {
    case OpId::kIndexSelect: return index_select(env, in);
    case OpId::kGather: return gather_scatter<false>(env, in);
    case OpId::kScatterAdd: return gather_scatter<true>(env, in);
    case OpId::kIndexAdd: return index_add(env, in);
    case OpId::kIndexPut: return index_put(env, in);
    case OpId::kOneHot: return one_hot(env, in);
    case OpId::kCat: return cat(env, in);
    case OpId::kClone:
      env.set(in.out, make_contiguous(env, env.get(in.in[0]), in.dtype));
      return absl::OkStatus();
    default:
      return absl::InternalError(
          absl::StrFormat("cpu backend: %s is not an index or shape op", op_name(in.op)));
  }
}

}  // namespace sloth::cpu
