// Attrs: the structural arguments of an op (dims, shapes, flags). They are part of a node's
// hash. Values that may change from step to step (fill values, alpha, learning rates) are
// never Attrs: they enter the graph as data (Scalar leaves).
//
// `dims` and `dtype` mean the same for every op that uses them (a shape, the dims to reduce,
// a permutation; the result or compute dtype). Every other argument lives in AttrSlots,
// whose fields have no meaning of their own: core/op_attrs.h gives each op family a typed
// view (SliceAttrs{dim, start, end, step}, DropoutAttrs{p, train}, ...) and is the only code
// that reads or writes the slots. Attrs stays the storage so hashing and plan-cache keys do
// not depend on which view wrote them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "core/dtype.h"

namespace sloth {

using AttrDims = absl::InlinedVector<int64_t, 6>;

template <class View>
struct AttrMap;  // core/op_attrs.h: where one view's fields are kept

class AttrSlots {
 public:
  friend bool operator==(const AttrSlots&, const AttrSlots&) = default;

 private:
  friend struct Attrs;  // hash, debug_string
  template <class View>
  friend struct AttrMap;
  AttrDims dims2;
  int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  double f0 = 0;
  bool flag = false;
};

struct Attrs {
  AttrDims dims;  // shape, dims to reduce, permutation, sizes
  DType dtype = DType::kFloat32;
  AttrSlots slots;  // read and written only through the views of core/op_attrs.h

  uint64_t hash() const;
  // No attribute set (most elementwise ops): the recorder then leaves a node's attrs alone.
  bool is_default() const {
    return dims.empty() && dtype == DType::kFloat32 && slots.dims2.empty() &&
           !(slots.i0 | slots.i1 | slots.i2 | slots.i3) && slots.f0 == 0 && !slots.flag;
  }
  // Every field, for IR dumps (which print attrs without knowing the op's view).
  std::string debug_string() const;
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

}  // namespace sloth
