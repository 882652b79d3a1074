#include "tests/support/tensors.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace sloth::testing {

Tensor to_tensor(const RefTensor& r, bool transposed) {
  if (transposed && r.shape.size() == 2) {
    std::vector<double> tv(r.v.size());
    const int64_t m = r.shape[0], n = r.shape[1];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) tv[j * m + i] = r.v[i * n + j];
    Tensor t = from_vector<double>(tv, {n, m}, TensorOptions().dtype(r.dtype));
    return t.t();
  }
  return from_vector<double>(r.v, r.shape, TensorOptions().dtype(r.dtype));
}

RefTensor to_ref(const Tensor& t) { return RefTensor{t.shape(), t.dtype(), t.to_vector<double>()}; }

std::string compare(const RefTensor& e, const RefTensor& g, double tol32) {
  if (e.shape != g.shape)
    return absl::StrFormat("shape %s, expected %s", shape_str(g.shape), shape_str(e.shape));
  if (e.dtype != g.dtype)
    return absl::StrFormat("dtype %s, expected %s", dtype_name(g.dtype), dtype_name(e.dtype));
  const double tol = e.dtype == DType::kFloat64 ? 1e-9 : e.dtype == DType::kFloat32 ? tol32 : 0;
  for (size_t i = 0; i < e.v.size(); ++i) {
    double a = e.v[i], b = g.v[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::fabs(a - b) > tol * (1 + std::fabs(a)))
      return absl::StrFormat("element %d is %.9g, expected %.9g", i, b, a);
  }
  return "";
}

}  // namespace sloth::testing
