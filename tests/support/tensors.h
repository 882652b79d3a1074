// Test helpers: sloth tensors from reference tensors and back, and value comparison.
#pragma once

#include <string>

#include "testing/reference/reference.h"
#include "sloth/sloth.h"

namespace sloth::testing {

// A tensor holding `r`; with `transposed` (rank 2 only) it is a non-contiguous view.
Tensor to_tensor(const RefTensor& r, bool transposed = false);
RefTensor to_ref(const Tensor& t);
// Empty string when equal within tolerance (by dtype), else a description of the first
// difference.
std::string compare(const RefTensor& expected, const RefTensor& got, double float32_tol = 2e-5);

}  // namespace sloth::testing
