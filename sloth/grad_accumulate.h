// Gradient accumulation (autograd's sum of the gradients flowing into one tensor) with one
// rewrite: gradients that are disjoint slices scattered into zeros (the backward of
// chunk/split/narrow, e.g. the q, k, v thirds of a packed attention projection) are joined
// into one concatenation instead of being zero-filled, scattered and added pairwise.
#pragma once

#include "sloth/tensor.h"

namespace sloth::internal {

// a + b, exactly (up to the sign of zero: 0 + -0 is +0, a concatenation keeps -0).
Tensor accumulate_grads(const Tensor& a, const Tensor& b);

}  // namespace sloth::internal
