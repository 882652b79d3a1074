// CUDA C of the Unfold (im2col) and Fold (col2im) kernels (convolution and pooling). Pure
// host code like codegen.h, so NVRTC compile checks run without a GPU.
//
// Both take the words: out, in, n, c, h, w, ho, wo, kh, kw, dh, dw, ph, pw, sh, sw,
// batch_inner, extra_row, pad_value (double bits); `n` of the work is the output's numel.
// Unfold: one thread per column element (a gather; padding reads pad_value, the extra row
// 1 or 0). Fold: one thread per output pixel, summing the columns that read it (a gather
// too: no atomics, deterministic).
#pragma once

#include "backends/cuda/codegen.h"

namespace sloth::cuda {

inline constexpr int kWindowWords = 19;
KernelSource unfold_source(DType t);
KernelSource fold_source(DType t);

}  // namespace sloth::cuda
