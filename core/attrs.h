// Attrs: the structural arguments of an op (dims, shapes, flags). They are part of a node's
// hash. Values that may change from step to step (fill values, alpha, learning rates) are
// never Attrs: they enter the graph as data (Scalar leaves). ops.def says which fields an
// op uses.
#pragma once

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "core/dtype.h"

namespace sloth {

struct Attrs {
  absl::InlinedVector<int64_t, 6> dims;   // shape, dims to reduce, permutation, sizes
  absl::InlinedVector<int64_t, 6> dims2;  // strides (as_strided)
  int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  double f0 = 0;
  bool flag = false;
  DType dtype = DType::kFloat32;

  uint64_t hash() const;
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

}  // namespace sloth
