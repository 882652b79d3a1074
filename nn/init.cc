#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace sloth::nn::init {
namespace {

void check_defined(const char* fn, const Tensor& t) {
  if (!t.defined())
    fail("nn::init::%s: the tensor is undefined (a module's absent parameter, e.g. a bias "
         "built with bias(false)); check it with .defined() first", fn);
}

void check_floating(const char* fn, const Tensor& t) {
  if (!is_floating(t.dtype()))
    fail("nn::init::%s: needs a floating-point tensor, got %s %s", fn, dtype_name(t.dtype()),
         shape_str(t.shape()));
}

double fan(const char* fn, const Tensor& t, FanMode mode) {
  if (t.dim() < 2)
    fail("nn::init::%s: Fan in and fan out can not be computed for tensor with fewer than 2 "
         "dimensions (got %s); use uniform_ or normal_ for a bias", fn, shape_str(t.shape()));
  const auto [in, out] = _calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == kFanIn ? in : out);
}

// Copies host values (row-major over the tensor's shape) into it.
Tensor write_values(Tensor t, const std::vector<double>& v) {
  t.copy_(tensor(v, t.shape(), TensorOptions().dtype(t.dtype()).device(t.device())));
  return t;
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::kTanh: return 5.0 / 3.0;
    case Nonlinearity::kReLU: return std::sqrt(2.0);
    case Nonlinearity::kLeakyReLU: return std::sqrt(2.0 / (1 + param * param));
    default: return 1.0;  // linear, the convolutions, sigmoid
  }
}

std::tuple<int64_t, int64_t> _calculate_fan_in_and_fan_out(const Tensor& tensor) {
  check_defined("_calculate_fan_in_and_fan_out", tensor);
  if (tensor.dim() < 2)
    fail("nn::init::_calculate_fan_in_and_fan_out: Fan in and fan out can not be computed for "
         "tensor with fewer than 2 dimensions (got %s)", shape_str(tensor.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor constant_(Tensor tensor, Scalar value) {
  check_defined("constant_", tensor);
  NoGradGuard guard;
  tensor.fill_(value);
  return tensor;
}
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1); }
Tensor zeros_(Tensor tensor) {
  check_defined("zeros_", tensor);
  NoGradGuard guard;
  tensor.zero_();
  return tensor;
}

Tensor uniform_(Tensor tensor, double low, double high) {
  check_defined("uniform_", tensor);
  NoGradGuard guard;
  tensor.uniform_(low, high);
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std) {
  check_defined("normal_", tensor);
  NoGradGuard guard;
  tensor.normal_(mean, std);
  return tensor;
}

Tensor eye_(Tensor matrix) {
  check_defined("eye_", matrix);
  if (matrix.dim() != 2)
    fail("nn::init::eye_: Only tensors with 2 dimensions are supported, got %s",
         shape_str(matrix.shape()));
  const int64_t rows = matrix.size(0), cols = matrix.size(1);
  std::vector<double> v(rows * cols, 0.0);
  for (int64_t i = 0; i < std::min(rows, cols); ++i) v[i * cols + i] = 1;
  NoGradGuard guard;
  return write_values(std::move(matrix), v);
}

Tensor dirac_(Tensor tensor, int64_t groups) {
  check_defined("dirac_", tensor);
  const int64_t dims = tensor.dim();
  if (dims < 3 || dims > 5)
    fail("nn::init::dirac_: Only tensors with 3, 4, or 5 dimensions are supported, got %s",
         shape_str(tensor.shape()));
  if (groups <= 0 || tensor.size(0) % groups != 0)
    fail("nn::init::dirac_: dim 0 (%d) must be divisible by groups (%d)", tensor.size(0), groups);
  const int64_t out_per_group = tensor.size(0) / groups;
  const int64_t channels = std::min(out_per_group, tensor.size(1));
  const Strides st = contiguous_strides(tensor.shape());
  int64_t centre = 0;
  for (int64_t d = 2; d < dims; ++d) centre += (tensor.size(d) / 2) * st[d];
  std::vector<double> v(tensor.numel(), 0.0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t d = 0; d < channels; ++d) v[(g * out_per_group + d) * st[0] + d * st[1] + centre] = 1;
  NoGradGuard guard;
  return write_values(std::move(tensor), v);
}

Tensor xavier_uniform_(Tensor tensor, double gain) {
  check_defined("xavier_uniform_", tensor);
  check_floating("xavier_uniform_", tensor);
  const double sum = fan("xavier_uniform_", tensor, kFanIn) + fan("xavier_uniform_", tensor, kFanOut);
  const double a = std::sqrt(3.0) * gain * std::sqrt(2.0 / sum);
  return uniform_(std::move(tensor), -a, a);
}

Tensor xavier_normal_(Tensor tensor, double gain) {
  check_defined("xavier_normal_", tensor);
  check_floating("xavier_normal_", tensor);
  const double sum = fan("xavier_normal_", tensor, kFanIn) + fan("xavier_normal_", tensor, kFanOut);
  return normal_(std::move(tensor), 0, gain * std::sqrt(2.0 / sum));
}

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_defined("kaiming_uniform_", tensor);
  check_floating("kaiming_uniform_", tensor);
  if (tensor.numel() == 0) return tensor;  // PyTorch: a no-op (with a warning)
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan("kaiming_uniform_", tensor, mode));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_defined("kaiming_normal_", tensor);
  check_floating("kaiming_normal_", tensor);
  if (tensor.numel() == 0) return tensor;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan("kaiming_normal_", tensor, mode));
  return normal_(std::move(tensor), 0, std);
}

Tensor orthogonal_(Tensor tensor, double gain) {
  check_defined("orthogonal_", tensor);
  check_floating("orthogonal_", tensor);
  if (tensor.dim() < 2)
    fail("nn::init::orthogonal_: Only tensors with 2 or more dimensions are supported, got %s",
         shape_str(tensor.shape()));
  if (tensor.numel() == 0) return tensor;
  const int64_t rows = tensor.size(0), cols = tensor.numel() / rows;
  // QR of the tall orientation (m >= n) by modified Gram-Schmidt, each column orthogonalized
  // twice: its R has a positive diagonal, which is PyTorch's Q * sign(diag(R)).
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  const std::vector<double> a = randn({rows, cols}, kFloat64).to_vector<double>();
  std::vector<std::vector<double>> q(n, std::vector<double>(m));  // q[j] = column j
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) q[j][i] = wide ? a[j * cols + i] : a[i * cols + j];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        const double r = std::inner_product(q[k].begin(), q[k].end(), q[j].begin(), 0.0);
        for (int64_t i = 0; i < m; ++i) q[j][i] -= r * q[k][i];
      }
    const double norm = std::sqrt(std::inner_product(q[j].begin(), q[j].end(), q[j].begin(), 0.0));
    for (double& x : q[j]) x /= norm;
  }
  std::vector<double> v(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = gain * (wide ? q[r][c] : q[c][r]);
  NoGradGuard guard;
  return write_values(std::move(tensor), v);
}

Tensor sparse_(Tensor tensor, double sparsity, double std) {
  check_defined("sparse_", tensor);
  check_floating("sparse_", tensor);
  if (tensor.dim() != 2)
    fail("nn::init::sparse_: Only tensors with 2 dimensions are supported, got %s",
         shape_str(tensor.shape()));
  if (!(sparsity >= 0 && sparsity <= 1))
    fail("nn::init::sparse_: sparsity must be in [0, 1], got %g", sparsity);
  const int64_t rows = tensor.size(0), cols = tensor.size(1);
  const int64_t zeros = static_cast<int64_t>(std::ceil(sparsity * static_cast<double>(rows)));
  // A uniformly random set of `zeros` rows per column: the smallest keys of a random draw.
  const std::vector<double> keys = rand({cols, rows}, kFloat64).to_vector<double>();
  std::vector<double> mask(rows * cols, 1.0);
  std::vector<int64_t> order(rows);
  for (int64_t c = 0; c < cols; ++c) {
    std::iota(order.begin(), order.end(), 0);
    const double* k = keys.data() + c * rows;
    std::partial_sort(order.begin(), order.begin() + zeros, order.end(),
                      [k](int64_t x, int64_t y) { return k[x] < k[y]; });
    for (int64_t z = 0; z < zeros; ++z) mask[order[z] * cols + c] = 0;
  }
  NoGradGuard guard;
  tensor.normal_(0, std);
  tensor.mul_(sloth::tensor(mask, {rows, cols}, TensorOptions().dtype(tensor.dtype()).device(tensor.device())));
  return tensor;
}

}  // namespace sloth::nn::init
