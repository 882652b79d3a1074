// Helpers for writing op samples (internal to op_samples).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/op_samples.h"

namespace sloth::samples {

inline constexpr DType f32 = DType::kFloat32, f64 = DType::kFloat64, i64 = DType::kInt64,
                       b8 = DType::kBool;

// Collects the samples of one op, with a fixed LCG seeded by the op id.
class Builder {
 public:
  explicit Builder(OpId op)
      : state_((static_cast<uint64_t>(op) + 1) * 0xD1B54A32D192ED03ull ^ 0x9E3779B97F4A7C15ull) {}

  double u() {  // uniform in [0, 1)
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state_ >> 11) * (1.0 / 9007199254740992.0);
  }
  // Floats of magnitude in [0.25, 2] with a random sign; ints in [-4, 4] but not 0; bools.
  RefTensor T(Shape s, DType d = f32) {
    std::vector<double> v(numel(s));
    for (double& x : v) {
      double sign = u() < 0.5 ? -1.0 : 1.0;
      if (d == b8) x = u() < 0.5 ? 1 : 0;
      else if (is_integral(d)) x = sign * (1 + std::floor(u() * 4));
      else x = sign * (0.25 + 1.75 * u());
    }
    return ref_tensor(std::move(s), d, std::move(v));
  }
  // Positive: floats in [0.25, 2.25], ints in [1, 5].
  RefTensor P(Shape s, DType d = f32) {
    std::vector<double> v(numel(s));
    for (double& x : v) x = is_integral(d) ? 1 + std::floor(u() * 5) : 0.25 + 2 * u();
    return ref_tensor(std::move(s), d, std::move(v));
  }
  // Uniform in [lo, hi).
  RefTensor R(Shape s, double lo, double hi, DType d = f32) {
    std::vector<double> v(numel(s));
    for (double& x : v) x = lo + (hi - lo) * u();
    return ref_tensor(std::move(s), d, std::move(v));
  }
  // int64 indices in [0, hi).
  RefTensor Idx(Shape s, int64_t hi) {
    std::vector<double> v(numel(s));
    for (double& x : v) x = std::floor(u() * static_cast<double>(hi));
    return ref_tensor(std::move(s), i64, std::move(v));
  }
  // Distinct values (a shuffled 0..n-1, shifted), for ops that must not see ties.
  RefTensor Distinct(Shape s, DType d = f32) {
    int64_t n = numel(s);
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
    for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[static_cast<int64_t>(u() * (i + 1))]);
    for (double& x : v) x = is_integral(d) ? x - n / 2 : (x - n / 2.0) * 0.37 + 0.11;
    return ref_tensor(std::move(s), d, std::move(v));
  }

  // tr: indices of rank-2 inputs to feed as non-contiguous views.
  void add(std::string name, std::vector<RefTensor> in, Attrs a = {}, std::vector<int> tr = {}) {
    OpSample s{std::move(name), std::move(in), {}, std::move(a)};
    s.transposed.assign(s.inputs.size(), false);
    for (int i : tr) s.transposed[i] = true;
    out.push_back(std::move(s));
  }

  std::vector<OpSample> out;

 private:
  uint64_t state_;
};

inline RefTensor V(Shape s, std::vector<double> v, DType d = f32) {
  return ref_tensor(std::move(s), d, std::move(v));
}
inline RefTensor S(double v, DType d = f64) { return ref_scalar(v, d); }

// Values within `margin` of a kink moved 2 * margin above it.
inline RefTensor away(RefTensor t, const std::vector<double>& kinks, double margin = 0.1) {
  for (double& x : t.v)
    for (double k : kinks)
      if (std::fabs(x - k) < margin) x = k + 2 * margin;
  return ref_tensor(t.shape, t.dtype, t.v);
}
// Values kept 0.1 away from every multiple of 0.5 (floor, ceil, round).
inline RefTensor off_grid(RefTensor t) {
  for (double& x : t.v) {
    double r = std::round(x * 2) / 2;
    if (std::fabs(x - r) < 0.1) x = r + 0.2;
  }
  return ref_tensor(t.shape, t.dtype, t.v);
}

void factory_samples(Builder& b, OpId op);
void elementwise_samples(Builder& b, OpId op);
void reduce_samples(Builder& b, OpId op);       // Reduce ops and reducing composites
void view_samples(Builder& b, OpId op);         // View and Scatter ops
void index_samples(Builder& b, OpId op);        // Index, Shape and the other composites
void inplace_samples(Builder& b, OpId op);
void kernel_samples(Builder& b, OpId op);       // Kernel ops (op_samples_kernel.cc)
// ---- convolution and pooling ----
void conv_samples(Builder& b, OpId op);         // unfold, fold, conv*, *pool2d (op_samples_conv.cc)
// ---- convolution kernels ----
void conv_kernel_samples(Builder& b, OpId op);  // conv_forward and its gradients (op_samples_conv_kernel.cc)

}  // namespace sloth::samples
