// Gradient clipping, as torch.nn.utils.clip_grad_norm_ and clip_grad_value_ (PyTorch 1.13).
#pragma once

#include <initializer_list>
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
// Clamps each gradient of `parameters` into [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

// LibTorch's spellings (torch::nn::utils): clip_grad_norm_ returns the norm as a double, so it
// reads it (a sync, as LibTorch's .item() does); sloth::nn::clip_grad_norm_ keeps it lazy.
namespace utils {
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
inline double clip_grad_norm_(std::initializer_list<Tensor> parameters, double max_norm,
                              double norm_type = 2.0, bool error_if_nonfinite = false) {
  return clip_grad_norm_(std::vector<Tensor>(parameters), max_norm, norm_type,
                         error_if_nonfinite);
}
inline double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                              bool error_if_nonfinite = false) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}
inline void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  nn::clip_grad_value_(parameters, clip_value);
}
inline void clip_grad_value_(std::initializer_list<Tensor> parameters, double clip_value) {
  nn::clip_grad_value_(std::vector<Tensor>(parameters), clip_value);
}
inline void clip_grad_value_(const Tensor& parameter, double clip_value) {
  nn::clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}
}  // namespace utils

}  // namespace sloth::nn
