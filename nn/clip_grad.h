// Gradient clipping, as torch.nn.utils.clip_grad_norm_ (PyTorch 1.13).
#pragma once

#include <vector>

#include "sloth/sloth_core.h"

namespace sloth::nn {

// Scales the gradients of `parameters` in place so that their joint norm (the norm of the
// vector of every gradient's norm) is at most max_norm, and returns that norm before
// clipping as a 0-dim tensor. Nothing syncs: the norm and the factor
// min(max_norm / (norm + 1e-6), 1) are computed in the step graph. norm_type may be
// INFINITY (the largest |g|). Parameters without a gradient are skipped; with none, the
// norm is 0. error_if_nonfinite = true reads the norm (a sync) and throws when it is NaN or
// infinite, leaving the gradients unchanged.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);

}  // namespace sloth::nn
