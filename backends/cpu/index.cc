// The index primitives on the host (lazy/structural.h: IndexPrimitives); which op runs which
// primitive over which walk is lazy/structural.cc's. Indices are checked before anything is
// written, so a bad index is reported (op, index, valid range) and never touches memory.
#include <atomic>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "lazy/structural.h"

namespace sloth::cpu {
namespace {

using lazy::IndexMode;
using lazy::IndexRange;
using lazy::IndexWalk;

// The indices in row-major order as int64 (a copy unless they already are contiguous int64).
struct Indices {
  std::vector<int64_t> copy;
  absl::Span<const int64_t> v;
  explicit Indices(const DeviceData& idx) {
    if (idx.dtype == DType::kInt64 && idx.is_contiguous()) {
      v = {idx.data<int64_t>(), static_cast<size_t>(idx.numel())};
      return;
    }
    copy.resize(idx.numel());
    copy_strided(copy.data(), DType::kInt64, contiguous_strides(idx.layout.shape), idx.raw(),
                 idx.dtype, idx.layout.strides, idx.layout.shape);
    v = copy;
  }
};

// A branch-free pass (vectorized, split across the pool when large) decides whether every
// index is in range; only a failing check walks again for the first bad index to name it.
absl::Status check(Env&, const Instr& in, const DeviceData& idx, int64_t dim, int64_t size,
                   IndexRange range) {
  const Indices ix(idx);
  const int64_t* v = ix.v.data();
  const int64_t n = static_cast<int64_t>(ix.v.size());
  const int64_t lo = range == IndexRange::kWrapping ? -size : 0;
  const uint64_t span = static_cast<uint64_t>(size - lo);  // i in range: i - lo in [0, span)
  auto any_bad = [&](int64_t b, int64_t e) {
    bool bad = false;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<uint64_t>(v[i] - lo) >= span;
    return bad;
  };
  std::atomic<bool> bad{false};
  if (n >= kParallelThreshold && num_threads() > 1) {
    parallel_for(n, kParallelThreshold, [&](int64_t b, int64_t e) {
      if (any_bad(b, e)) bad.store(true, std::memory_order_relaxed);
    });
  } else {
    bad = any_bad(0, n);
  }
  if (!bad.load()) return absl::OkStatus();
  return lazy::check_index_range(in, ix.v, dim, size, range);
}

// One element of `kMode` (IndexMode): t is the target's element, o the other's.
template <IndexMode kMode, class T>
inline void apply(T* t, T* o) {
  if constexpr (kMode == IndexMode::kRead) *o = *t;
  else if constexpr (kMode == IndexMode::kAccumulate) *t = static_cast<T>(*t + *o);
  else *t = *o;
}

// `kMode` over a run of n elements that share one index: a slice of the target (an embedding
// row) moves as a block. Unit strides (kUnit) copy with memcpy or add in a loop the compiler
// vectorizes; other strides step element by element.
template <IndexMode kMode, bool kUnit, class T>
inline void apply_run(T* __restrict t, int64_t ts, T* __restrict o, int64_t os, int64_t n) {
  if constexpr (kUnit) {
    if constexpr (kMode == IndexMode::kRead) std::memcpy(o, t, n * sizeof(T));
    else if constexpr (kMode == IndexMode::kWrite) std::memcpy(t, o, n * sizeof(T));
    else
      for (int64_t j = 0; j < n; ++j) t[j] = static_cast<T>(t[j] + o[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) apply<kMode>(t + j * ts, o + j * os);
  }
}

// The slices of a walk whose index is the same along its whole last dim: for_each_run walks
// the other dims and each of its positions moves one slice of shape[nd - 1] elements, so the
// per-slice cost is a pointer step, not a walk step (embedding rows: one memcpy each).
template <IndexMode kMode, bool kUnit, class T, class At>
void walk_slices(T* t, T* o, const Shape& shape, const Strides& ts, const Strides& os,
                 const Strides& is, At at) {
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = shape[nd - 1], tl = ts[nd - 1], ol = os[nd - 1];
  if (nd == 1) {
    apply_run<kMode, kUnit>(t + at(0), tl, o, ol, inner);
    return;
  }
  const int64_t t2 = ts[nd - 2], o2 = os[nd - 2], i2 = is[nd - 2];
  int64_t outer = 1;
  for (int d = 0; d < nd - 1; ++d) outer *= shape[d];
  for_each_run<3>(shape.data(), nd - 1, {ts.data(), os.data(), is.data()}, 0, outer,
                  [&](const std::array<int64_t, 3>& off, int64_t run) {
                    for (int64_t j = 0; j < run; ++j)
                      apply_run<kMode, kUnit>(t + off[0] + j * t2 + at(off[2] + j * i2), tl,
                                              o + off[1] + j * o2, ol, inner);
                  });
}

// The walk, row-major (so with kWrite the last write in index order lands last); only a
// per-element walk is split across threads, where that order is kept (see below).
// Coalescing keeps the order; it merges the dims every operand
// (the index included) walks contiguously, so an along-dim walk's last dim is a whole slice.
template <IndexMode kMode, class T, class I>
void walk_typed(T* t, T* o, const I* ix, const IndexWalk& w) {
  Shape shape = w.shape;
  Strides ts = w.target, os = w.other, is = w.index;
  coalesce(shape, {&ts, &os, &is});
  const int nd = static_cast<int>(shape.size());
  const int64_t tl = ts[nd - 1], ol = os[nd - 1], il = is[nd - 1];
  const int64_t dstride = w.dstride, size = w.size;
  // The target offset of the index at element offset i. Indices were checked: a negative one
  // is in [-size, 0) and counts from the end.
  auto at = [&](int64_t i) {
    const int64_t v = static_cast<int64_t>(ix[i]);
    return (v < 0 ? v + size : v) * dstride;
  };
  if (il == 0) {
    if (tl == 1 && ol == 1) walk_slices<kMode, true>(t, o, shape, ts, os, is, at);
    else walk_slices<kMode, false>(t, o, shape, ts, os, is, at);
    return;
  }
  // One index per element (gather, scatter_add).
  auto range = [&](int64_t start, int64_t n) {
    for_each_run<3>(shape.data(), nd, {ts.data(), os.data(), is.data()}, start, n,
                    [&](const std::array<int64_t, 3>& off, int64_t run) {
                      for (int64_t j = 0; j < run; ++j)
                        apply<kMode>(t + off[0] + j * tl + at(off[2] + j * il),
                                     o + off[1] + j * ol);
                    });
  };
  const int64_t total = numel(shape);
  // Split across the pool when large. A read writes each `other` element once, so any split
  // is safe. An accumulation is split only between positions of the outermost dim, and only
  // when the target moves along it (so it is not the indexed dim): those positions address
  // distinct target elements, and within a chunk the order stays row-major.
  int64_t unit = 0;
  if (total >= kParallelThreshold && num_threads() > 1) {
    if constexpr (kMode == IndexMode::kRead) unit = 1;
    else if (kMode == IndexMode::kAccumulate && nd >= 2 && ts[0] != 0) unit = total / shape[0];
  }
  if (unit == 0) {
    range(0, total);
    return;
  }
  parallel_for(total / unit, std::max<int64_t>(1, kParallelThreshold / 4 / unit),
               [&](int64_t b, int64_t e) { range(b * unit, (e - b) * unit); });
}

template <IndexMode kMode>
void walk_mode(const DeviceData& target, const DeviceData& other, const DeviceData& idx,
               const IndexWalk& w) {
  visit_dtype(target.dtype, [&](auto z) {
    using T = decltype(z);
    auto run = [&](auto i0) {
      using I = decltype(i0);
      walk_typed<kMode>(target.data<T>(), other.data<T>(), idx.data<I>(), w);
    };
    // Index tensors are int32 or int64 (the op table's rule).
    if (idx.dtype == DType::kInt32) run(int32_t{});
    else run(int64_t{});
  });
}

absl::Status walk(Env&, IndexMode mode, const DeviceData& target, const DeviceData& other,
                  const DeviceData& idx, const IndexWalk& w) {
  if (numel(w.shape) == 0) return absl::OkStatus();
  switch (mode) {
    case IndexMode::kRead: walk_mode<IndexMode::kRead>(target, other, idx, w); break;
    case IndexMode::kAccumulate: walk_mode<IndexMode::kAccumulate>(target, other, idx, w); break;
    case IndexMode::kWrite: walk_mode<IndexMode::kWrite>(target, other, idx, w); break;
  }
  return absl::OkStatus();
}

absl::Status mark_classes(Env&, const DeviceData& out, const DeviceData& idx, int64_t classes) {
  const Indices ix(idx);
  int64_t* o = out.data<int64_t>();
  std::memset(o, 0, out.numel() * sizeof(int64_t));
  for (size_t i = 0; i < ix.v.size(); ++i) o[i * classes + ix.v[i]] = 1;
  return absl::OkStatus();
}

}  // namespace

const lazy::IndexPrimitives<Env> kIndexPrimitives{check, walk, mark_classes};

}  // namespace sloth::cpu
