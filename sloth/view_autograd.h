// Autograd for views and in-place writes through them (PyTorch's CopySlices rule): writing
// a view of a tensor that requires grad rebases the base's history on a CopySlices node, and
// every view of that base gets its grad_fn regenerated from the base the next time it is used.
#pragma once

#include "absl/types/span.h"
#include "autograd/function.h"
#include "lazy/tensor_impl.h"
#include "sloth/tensor.h"

namespace sloth::internal {

// The edge a gradient for `t` flows through; regenerates a stale view's grad_fn first.
autograd::Edge gradient_edge_of(const Tensor& t);
// requires_grad, after regenerating a stale view's history.
// strict: the caller needs the history (recording an op with grad on). A stale output of
// split/chunk then raises PyTorch's error; requires_grad()/is_leaf() pass strict = false.
bool tracks_grad(const Tensor& t, bool strict = true);
// PyTorch's error for writing a split/chunk output in place (when `t` is one), or nothing;
// called when the write involves grad (self or an operand requires it).
void check_multi_output_write(const Tensor& t, const char* op);
// Before `view` is written with `r`: the base's grad_fn becomes CopySlices(old base, r).
void rebase_view_history(const Tensor& view, const Tensor& r);
// After a write: the view's grad_fn is its chain replayed on the base's current history.
void refresh_view_grad_fn(const Tensor& view);

// The node of an in-place write that discards self's old value (copy_, fill_, zero_): the
// old history gets a zero gradient (so it stays connected, as PyTorch's CopyBackwards,
// FillBackward, ZeroBackward0), the written value the incoming one.
autograd::GradFnPtr overwrite_backward(OpId op, autograd::Edge old_self, autograd::Edge value,
                                       autograd::OutputInfo self);

// Functional helpers over a view chain, written with public ops (so they are differentiable).
Tensor replay_chain(const Tensor& base, absl::Span<const lazy::ViewStep> chain);
// `base` with the chain's window replaced by `src`; an Expand step sums (gradient semantics).
Tensor scatter_chain(const Tensor& base, const Tensor& src, absl::Span<const lazy::ViewStep> chain);
// Sums `g` down to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace sloth::internal
