// Common-subexpression elimination over a lowered plan: an instruction that repeats an
// earlier one (same op, dtype, shape, attrs and operand slots; operands of commutative ops in
// either order) is dropped and its readers read the earlier result. Autograd makes such
// repeats routinely (d(x*x) = g*x + g*x, the same mask or transpose built by two formulas).
#pragma once

#include "lazy/plan.h"

namespace sloth::lazy {

// Rewrites `plan` in place (before kernels are formed); returns how many instructions went.
int eliminate_common_subexpressions(Plan& plan);

}  // namespace sloth::lazy
