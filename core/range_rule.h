// arange's rule: from (start, end, step) as the user wrote them to the result's dtype, length
// and the exact first value and step, following ATen's arange_out (RangeFactories.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/scalar.h"

namespace sloth {

struct RangeSpec {
  DType dtype;
  int64_t n = 0;  // number of elements
  // Integer results (int32/int64): ATen computes in int64 after truncating each argument, so
  // arange(0.5, 3.7, 1, kInt64) is {0, 1, 2}. Element i is start_i + i * step_i.
  int64_t start_i = 0, step_i = 0;
  // Floating results: element i is start_d + i * step_d computed in double, then rounded.
  double start_d = 0, step_d = 0;

  bool integral() const { return is_integral(dtype); }
  // Whether every element and the step go through a double unchanged (|v| <= 2^53), so the
  // lazy arange op (whose operands are doubles) computes them exactly.
  bool exact_in_double() const;
};

// dtype: the caller's, else int64 when start, end and step are all integers (or bools) and
// the default float when any is floating. Errors (messages start with "arange:"): a zero or
// non-finite step, a non-finite bound, a step whose sign points away from end, a bool dtype,
// a length that does not fit in int64.
absl::StatusOr<RangeSpec> range_rule(const Scalar& start, const Scalar& end, const Scalar& step,
                                     std::optional<DType> dtype);

}  // namespace sloth
