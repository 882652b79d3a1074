// Sample inputs for every op of core/ops.def (except the leaves Data and Scalar), keyed by
// OpId so a test can walk the op table. Values are deterministic (a fixed LCG per op) and kept
// away from the points where an op is non-smooth or undefined, so the same samples serve
// reference checks, backend-vs-reference checks and float64 finite-difference gradient checks.
#pragma once

#include <string>
#include <vector>

#include "testing/reference/reference.h"
#include "core/attrs.h"
#include "core/op_attrs.h"
#include "core/op_table.h"

namespace sloth {

struct OpSample {
  std::string name;
  std::vector<RefTensor> inputs;
  // transposed[i]: feed input i as a non-contiguous view (materialize its transpose
  // contiguous, then transpose it back). Only ever set for inputs of rank 2.
  std::vector<bool> transposed;
  Attrs attrs;
};

// At least 2 samples for every op but Data and Scalar (none for those). Together they cover,
// where the op allows: broadcasting, a non-contiguous input, an empty tensor, a 0-dim tensor,
// float32 and float64, and int64 / bool inputs. Every tensor has at most 64 elements.
std::vector<OpSample> op_samples(OpId op);

}  // namespace sloth
