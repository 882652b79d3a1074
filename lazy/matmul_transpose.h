// A plan rewrite: a 2-D GEMM whose only reader transposes it, (a @ b)^T, becomes b^T @ a^T,
// which writes the transposed result directly (the transposed operands are free: views the
// BLAS call reads with its trans flags). Autograd makes this pattern for every weight stored
// [out, in] (nn::Linear): dW = (x^T @ g)^T. Without the rewrite dW is a strided view, and
// everything that reads it (the optimizer's update, gradient accumulation) loads it column
// by column.
#pragma once

#include "lazy/plan.h"

namespace sloth::lazy {

// Rewrites `plan` in place (before kernels are formed); returns how many GEMMs it turned.
int transpose_matmul_outputs(Plan& plan);

}  // namespace sloth::lazy
