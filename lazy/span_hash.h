// Transparent hashing for maps keyed by a Shape: looked up by any IntSpan (a Dims, a slice of
// a layout) without making a Shape (a heap block) per lookup.
#pragma once

#include <cstddef>

#include "absl/hash/hash.h"
#include "core/shape.h"

namespace sloth::lazy {

struct SpanHash {
  using is_transparent = void;
  size_t operator()(IntSpan s) const { return absl::HashOf(s); }
};
struct SpanEq {
  using is_transparent = void;
  bool operator()(IntSpan a, IntSpan b) const { return a == b; }
};

}  // namespace sloth::lazy
