#include "backends/cpu/strided.h"

#include "backends/cpu/thread_pool.h"

namespace sloth::cpu {

namespace {

// The first o entries of v removed (a std::vector or an inline Dims).
template <class V>
void drop_front(V& v, size_t o) {
  std::copy(v.begin() + static_cast<ptrdiff_t>(o), v.end(), v.begin());
  v.resize(v.size() - o);
}

template <class V>
void coalesce_dims(V& shape, absl::Span<V* const> strides) {
  // In place (no allocation: reductions and tile programs coalesce on every run).
  size_t w = 0;  // drop size-1 dims
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    shape[w] = shape[d];
    for (V* st : strides) (*st)[w] = (*st)[d];
    ++w;
  }
  if (w == 0) {
    // A 0-dim or all-ones shape: one element. Keep stride 0 so loaders see a broadcast.
    shape.resize(1);
    shape[0] = 1;
    for (V* st : strides) {
      st->resize(1);
      (*st)[0] = 0;
    }
    return;
  }
  shape.resize(w);
  for (V* st : strides) st->resize(w);
  // Merge dim d into the outermost kept dim o when every operand steps over o exactly once
  // per step of d; kept dims collect at the back (o only moves down, and o > d).
  size_t o = w - 1;
  for (int d = static_cast<int>(w) - 2; d >= 0; --d) {
    bool merge = true;
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = (*strides[k])[d] == (*strides[k])[o] * shape[o];
    if (merge) {
      shape[o] *= shape[d];
    } else {
      --o;
      shape[o] = shape[d];
      for (V* st : strides) (*st)[o] = (*st)[d];
    }
  }
  if (o > 0) {
    drop_front(shape, o);
    for (V* st : strides) drop_front(*st, o);
  }
}

}  // namespace

void coalesce(Shape& shape, absl::Span<Strides* const> strides) { coalesce_dims(shape, strides); }
void coalesce(Dims& shape, absl::Span<Dims* const> strides) { coalesce_dims(shape, strides); }

namespace {

template <typename S, typename D, bool kAcc>
void copy_range(D* dst, const int64_t* dst_st, const S* src, const int64_t* src_st,
                const Shape& shape, int64_t start, int64_t n) {
  const int nd = static_cast<int>(shape.size());
  const int64_t ds = dst_st[nd - 1], ss = src_st[nd - 1];
  for_each_run<2>(shape.data(), nd, {dst_st, src_st}, start, n,
                  [&](const std::array<int64_t, 2>& off, int64_t run) {
                    D* o = dst + off[0];
                    const S* i = src + off[1];
                    if (ds == 1 && ss == 1) {
                      for (int64_t j = 0; j < run; ++j) {
                        if constexpr (kAcc) o[j] = static_cast<D>(o[j] + convert_to<D>(i[j]));
                        else o[j] = convert_to<D>(i[j]);
                      }
                    } else if (ds == 1 && ss == 0) {
                      // A broadcast source (a zero base expanded, a scalar): a vector fill.
                      const D v = convert_to<D>(*i);
                      for (int64_t j = 0; j < run; ++j) {
                        if constexpr (kAcc) o[j] = static_cast<D>(o[j] + v);
                        else o[j] = v;
                      }
                    } else {
                      for (int64_t j = 0; j < run; ++j) {
                        if constexpr (kAcc)
                          o[j * ds] = static_cast<D>(o[j * ds] + convert_to<D>(i[j * ss]));
                        else o[j * ds] = convert_to<D>(i[j * ss]);
                      }
                    }
                  });
}

}  // namespace

void copy_strided(void* dst, DType dst_type, IntSpan dst_strides, const void* src,
                  DType src_type, IntSpan src_strides, IntSpan shape_in, bool accumulate) {
  Shape shape(shape_in.begin(), shape_in.end());
  const int64_t n = numel(shape);
  if (n == 0) return;
  Strides ds(dst_strides.begin(), dst_strides.end()), ss(src_strides.begin(), src_strides.end());
  coalesce(shape, {&ds, &ss});
  visit_dtype(dst_type, [&](auto d0) {
    using D = decltype(d0);
    visit_dtype(src_type, [&](auto s0) {
      using S = decltype(s0);
      auto body = [&](int64_t b, int64_t e) {
        if (accumulate)
          copy_range<S, D, true>(static_cast<D*>(dst), ds.data(), static_cast<const S*>(src),
                                 ss.data(), shape, b, e - b);
        else
          copy_range<S, D, false>(static_cast<D*>(dst), ds.data(), static_cast<const S*>(src),
                                  ss.data(), shape, b, e - b);
      };
      // Accumulating writes may alias (a broadcast dst is never passed, but be safe): serial.
      if (n >= kParallelThreshold && !accumulate) parallel_for(n, 4096, body);
      else body(0, n);
    });
  });
}

void copy_into(const lazy::DeviceData& dst, const lazy::DeviceData& src, bool accumulate) {
  Strides ss = broadcast_strides(src.layout.shape, src.layout.strides, dst.layout.shape);
  copy_strided(ptr(dst), dst.dtype, dst.layout.strides, ptr(src), src.dtype, ss,
               dst.layout.shape, accumulate);
}

}  // namespace sloth::cpu
