// The structural rules every backend follows the same way: which window of which buffer a
// view, a scatter, a concatenation or a clone reads and writes, and what each index op is
// (lazy/structural.cc maps every index op to one of a few index primitives, its walk
// geometry, its index range rule and its output). Only the copies and the index primitives
// are device-specific: a backend lends them through StructuralEnv, whose calls happen once per
// op (a window, a walk), never per element.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lazy/device_data.h"
#include "lazy/plan.h"

namespace sloth::lazy {

// ---- Index ops: the vocabulary of the primitives and the host-side rules ----

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

// The positions an index primitive visits. At position pos (row-major over `shape`) the index
// value is v = index[pos] (v + size when negative) and the target's element is the one at pos
// with `dim` := v: the target is addressed along `dim` by the index's value, not by the
// position, so its stride there moves to `dstride` and `target` holds 0 in that dim. Offsets
// are in elements from each operand's element 0 (its layout offset); the index is read in its
// own dtype and layout.
struct IndexWalk {
  Shape shape;                   // at least 1-D
  Strides target, other, index;  // per dim of `shape`
  int64_t dim = 0;
  int64_t dstride = 0;
  int64_t size = 0;  // the target's size along dim (a negative index counts from its end)
};
// A walk over the index's positions, one index per position (gather, scatter_add). 0-dim
// operands walk as one element.
IndexWalk gather_walk(const DeviceData& target, const DeviceData& other, const DeviceData& index,
                      int64_t dim);
// A walk over `other`'s positions where pos takes the index at pos[dim] of the 1-D (or 0-dim)
// `index` (index_select, index_add, index_put): whole slices of the target move per index.
IndexWalk along_dim_walk(const DeviceData& target, const DeviceData& other,
                         const DeviceData& index, int64_t dim);

// What an index primitive does at each position of its walk, with t the target's element:
enum class IndexMode {
  kRead = 0,        // other[pos] = t
  kAccumulate = 1,  // t += other[pos]; positions that hit the same t all add
  // t = other[pos]; where positions hit the same t the one with the largest pos[dim] wins
  // (PyTorch's index_put with duplicate indices: the last write in index order). Only over an
  // along-dim walk, whose index varies along dim alone.
  kWrite = 2,
};

// index_put: rows idx[i] of base take row i of `values` broadcast to base's shape with
// dim 0 of length `len`. The layout of `values` read that way.
Layout index_put_values(const DeviceData& base, const DeviceData& values, int64_t len);

// The index primitives of a backend whose run state is `Env`. Each is one call per op; the
// indices they read were checked first (check), so they never see one out of range.
template <class Env>
struct IndexPrimitives {
  // Ok, or index_range_error for the first index of `idx` (row-major) outside `range` of
  // `size`. Called before anything is written.
  absl::Status (*check)(Env&, const Instr& in, const DeviceData& idx, int64_t dim, int64_t size,
                        IndexRange range);
  // `mode` at every position of `w`. target and other have one dtype.
  absl::Status (*walk)(Env&, IndexMode mode, const DeviceData& target, const DeviceData& other,
                       const DeviceData& idx, const IndexWalk& w);
  // out (contiguous int64, idx's shape + [classes]) := 0, then out[i, idx[i]] = 1 for each
  // index i in row-major order.
  absl::Status (*mark_classes)(Env&, const DeviceData& out, const DeviceData& idx,
                               int64_t classes);
};

// A backend's run state as the shared rules see it.
class StructuralEnv {
 public:
  virtual ~StructuralEnv() = default;
  // "cpu backend", "cuda backend": the prefix of internal-error messages.
  virtual std::string_view name() const = 0;
  virtual const DeviceData& get(int slot) = 0;
  virtual void set(int slot, DeviceData d) = 0;
  // A fresh contiguous buffer.
  virtual DeviceData alloc(IntSpan shape, DType dtype) = 0;
  // A fresh contiguous copy of `x` converted to `dtype`.
  virtual DeviceData contiguous(const DeviceData& x, DType dtype) = 0;
  // dst (+)= src over dst's shape (src broadcasts, dtypes convert).
  virtual void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate) = 0;
  // The index primitives (IndexPrimitives).
  virtual absl::Status check_indices(const Instr& in, const DeviceData& idx, int64_t dim,
                                     int64_t size, IndexRange range) = 0;
  virtual absl::Status index_walk(IndexMode mode, const DeviceData& target,
                                  const DeviceData& other, const DeviceData& idx,
                                  const IndexWalk& w) = 0;
  virtual absl::Status mark_classes(const DeviceData& out, const DeviceData& idx,
                                    int64_t classes) = 0;
};

// The StructuralEnv of a backend whose run state `Env` has get(slot), set(slot, d) and
// alloc(shape, dtype), whose copies are the free functions Contiguous and Copy, and whose
// index primitives are `index`.
template <class Env, DeviceData (*Contiguous)(Env&, const DeviceData&, DType),
          void (*Copy)(const DeviceData&, const DeviceData&, bool)>
class StructuralOf final : public StructuralEnv {
 public:
  StructuralOf(Env& env, std::string_view name, const IndexPrimitives<Env>& index)
      : env_(env), name_(name), index_(index) {}
  std::string_view name() const override { return name_; }
  const DeviceData& get(int slot) override { return env_.get(slot); }
  void set(int slot, DeviceData d) override { env_.set(slot, std::move(d)); }
  DeviceData alloc(IntSpan shape, DType dtype) override { return env_.alloc(shape, dtype); }
  DeviceData contiguous(const DeviceData& x, DType dtype) override {
    return Contiguous(env_, x, dtype);
  }
  void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate) override {
    Copy(dst, src, accumulate);
  }
  absl::Status check_indices(const Instr& in, const DeviceData& idx, int64_t dim, int64_t size,
                             IndexRange range) override {
    return index_.check(env_, in, idx, dim, size, range);
  }
  absl::Status index_walk(IndexMode mode, const DeviceData& target, const DeviceData& other,
                          const DeviceData& idx, const IndexWalk& w) override {
    return index_.walk(env_, mode, target, other, idx, w);
  }
  absl::Status mark_classes(const DeviceData& out, const DeviceData& idx,
                            int64_t classes) override {
    return index_.mark_classes(env_, out, idx, classes);
  }

 private:
  Env& env_;
  std::string_view name_;
  const IndexPrimitives<Env>& index_;
};

// An instruction of the View, Scatter, Index or Shape category:
// - a view is zero-copy (the input's storage, a new layout) when strides can express it,
//   else the same view of a contiguous copy;
// - a scatter (SliceScatter .. AsStridedScatter) is a contiguous copy of the base whose view
//   window (the scatter's view op over the copy) is overwritten by the source;
// - a concatenation copies each input into its window along dim; clone is a contiguous copy;
// - an index op checks its indices (check_indices), allocates its output (or copies its base)
//   and runs one index primitive over its walk (structural.cc says which, per op).
// Any other op is an internal error naming the backend.
absl::Status run_structural(StructuralEnv& env, const Instr& in);

}  // namespace sloth::lazy
