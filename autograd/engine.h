// The backward engine: walks the grad_fn graph from the roots in dependency order (newest
// node first among the ready ones, as PyTorch does), runs each node's formula (which records
// lazy ops, so the gradients are IR) and either accumulates into leaves' .grad (backward) or
// returns the gradients of chosen inputs (autograd::grad).
#pragma once

#include <vector>

#include "autograd/function.h"

namespace sloth::autograd {

// `grad_roots[i]` may be null for a scalar root (then it is 1). With `inputs` empty, the
// gradients accumulate into the leaves' .grad and an empty vector is returned.
std::vector<TensorImplPtr> run_backward(const std::vector<TensorImplPtr>& roots,
                                        const std::vector<TensorImplPtr>& grad_roots,
                                        bool retain_graph, bool create_graph,
                                        const std::vector<TensorImplPtr>& inputs,
                                        bool allow_unused);

// The leaf's accumulator node (made on first use; it lives as long as some graph uses it).
GradFnPtr grad_accumulator(const TensorImplPtr& leaf);

}  // namespace sloth::autograd
