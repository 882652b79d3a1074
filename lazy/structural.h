// The structural rules every backend follows the same way: which window of which buffer a
// view, a scatter, a concatenation or a clone reads and writes, and the host-side rules of
// the index ops (range checks and their messages, the geometry of the walks). Only the
// copies themselves and the index kernels are device-specific: a backend lends them through
// StructuralEnv, whose calls happen once per op (a window), never per element.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lazy/device_data.h"
#include "lazy/plan.h"

namespace sloth::lazy {

// A backend's run state as the shared rules see it.
class StructuralEnv {
 public:
  virtual ~StructuralEnv() = default;
  // "cpu backend", "cuda backend": the prefix of internal-error messages.
  virtual std::string_view name() const = 0;
  virtual const DeviceData& get(int slot) = 0;
  virtual void set(int slot, DeviceData d) = 0;
  // A fresh contiguous buffer.
  virtual DeviceData alloc(const Shape& shape, DType dtype) = 0;
  // A fresh contiguous copy of `x` converted to `dtype`.
  virtual DeviceData contiguous(const DeviceData& x, DType dtype) = 0;
  // dst (+)= src over dst's shape (src broadcasts, dtypes convert).
  virtual void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate) = 0;
};

// The StructuralEnv of a backend whose run state `Env` has get(slot), set(slot, d) and
// alloc(shape, dtype), and whose copies are the free functions Contiguous and Copy.
template <class Env, DeviceData (*Contiguous)(Env&, const DeviceData&, DType),
          void (*Copy)(const DeviceData&, const DeviceData&, bool)>
class StructuralOf final : public StructuralEnv {
 public:
  StructuralOf(Env& env, std::string_view name) : env_(env), name_(name) {}
  std::string_view name() const override { return name_; }
  const DeviceData& get(int slot) override { return env_.get(slot); }
  void set(int slot, DeviceData d) override { env_.set(slot, std::move(d)); }
  DeviceData alloc(const Shape& shape, DType dtype) override { return env_.alloc(shape, dtype); }
  DeviceData contiguous(const DeviceData& x, DType dtype) override {
    return Contiguous(env_, x, dtype);
  }
  void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate) override {
    Copy(dst, src, accumulate);
  }

 private:
  Env& env_;
  std::string_view name_;
};

// An instruction of the View, Scatter or Shape category:
// - a view is zero-copy (the input's storage, a new layout) when strides can express it,
//   else the same view of a contiguous copy;
// - a scatter (SliceScatter .. AsStridedScatter) is a contiguous copy of the base whose view
//   window (the scatter's view op over the copy) is overwritten by the source;
// - a concatenation copies each input into its window along dim; clone is a contiguous copy.
// Any other op is an internal error naming the backend.
absl::Status run_structural(StructuralEnv& env, const Instr& in);

// The index ops' kernels of one backend (each checks its indices with the helpers below).
template <class Env>
struct IndexKernels {
  using Fn = absl::Status (*)(Env&, const Instr&);
  Fn index_select, gather, scatter_add, index_add, index_put, one_hot;
};

// Any instruction of the View, Scatter, Index or Shape category: the backend's kernel for an
// index op, the shared rules above for the rest.
template <class Env>
absl::Status run_structural(StructuralEnv& s, Env& env, const IndexKernels<Env>& k,
                            const Instr& in) {
  switch (in.op) {
    case OpId::kIndexSelect: return k.index_select(env, in);
    case OpId::kGather: return k.gather(env, in);
    case OpId::kScatterAdd: return k.scatter_add(env, in);
    case OpId::kIndexAdd: return k.index_add(env, in);
    case OpId::kIndexPut: return k.index_put(env, in);
    case OpId::kOneHot: return k.one_hot(env, in);
    default: return run_structural(s, in);
  }
}

// ---- Index ops: what is decided on the host ----

// Which indices are valid in [.., size): kNonNegative [0, size), kWrapping [-size, size)
// (negatives count from the end; index_put), kClasses [0, classes) (one_hot).
enum class IndexRange { kNonNegative, kWrapping, kClasses };

inline bool index_in_range(int64_t i, int64_t size, IndexRange r) {
  return r == IndexRange::kWrapping ? (i >= -size && i < size) : (i >= 0 && i < size);
}
// The error for the first bad index: names the op, the index, the dim and the valid range.
absl::Status index_range_error(const Instr& in, int64_t i, int64_t dim, int64_t size,
                               IndexRange r);
// Ok, or index_range_error for the first index out of range.
absl::Status check_index_range(const Instr& in, absl::Span<const int64_t> idx, int64_t dim,
                               int64_t size, IndexRange r);

// The size indexed along `dim` (a 0-dim tensor indexes as one element).
inline int64_t indexed_size(const DeviceData& x, int64_t dim) {
  return x.layout.shape.empty() ? 1 : x.layout.shape[dim];
}

// `l` with `dim` fixed at `i` (the dim dropped).
Layout select_layout(const Layout& l, int64_t dim, int64_t i);

// gather (out[pos] = target[pos with dim := index[pos]]) and scatter_add (target[pos with
// dim := index[pos]] += other[pos]) walk the index's positions, row-major. The target is
// addressed along `dim` by the index's value, not by the position: its stride there moves to
// `dstride` and `target` holds 0 in that dim. 0-dim operands walk as one element.
struct IndexWalk {
  Shape shape;                  // the index's shape, at least 1-D
  Strides target, other, index;  // per dim of `shape`
  int64_t dim = 0;
  int64_t dstride = 0;
};
IndexWalk gather_walk(const DeviceData& target, const DeviceData& other, const DeviceData& index,
                      int64_t dim);
// index_select and index_add walk `other`'s positions; position pos takes the index at
// pos[dim] of the 1-D (or 0-dim) `index`.
IndexWalk along_dim_walk(const DeviceData& target, const DeviceData& other,
                         const DeviceData& index, int64_t dim);

// index_put: rows idx[i] of base take row i of `values` broadcast to base's shape with
// dim 0 of length `len`. The layout of `values` read that way.
Layout index_put_values(const DeviceData& base, const DeviceData& values, int64_t len);

}  // namespace sloth::lazy
