// Rewrites of gradients as autograd builds them, for layouts that run faster. Gradient
// accumulation (autograd's sum of the gradients flowing into one tensor): gradients that are disjoint slices scattered into zeros (the backward of
// chunk/split/narrow, e.g. the q, k, v thirds of a packed attention projection) are joined
// into one concatenation instead of being zero-filled, scattered and added pairwise.
#pragma once

#include "sloth/tensor.h"

namespace sloth::internal {

// The transpose of a gradient. When g is a pending 2-D product A B (the gradient of a
// weight used transposed, as nn::Linear's matmul(x, w.t()) does), it is computed as the
// product B^T A^T, written in the weight's own layout, instead of a transposed view of A B
// that every later reader (the optimizer's update) reads with a stride.
Tensor transpose_grad(const Tensor& g);

// a + b, exactly (up to the sign of zero: 0 + -0 is +0, a concatenation keeps -0).
Tensor accumulate_grads(const Tensor& a, const Tensor& b);

}  // namespace sloth::internal
