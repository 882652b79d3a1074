// CUDA C of max_pool2d's argmax kernel (MaxPool2dIndices). Pure host code like codegen.h, so
// NVRTC compile checks run without a GPU.
//
// Words: out (int64), in, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw. One thread per
// output window, PyTorch's bounds and comparison (first maximum in window order; NaN takes
// over), over a contiguous input of `planes` [h, w] planes.
#pragma once

#include "backends/cuda/codegen.h"

namespace sloth::cuda {

inline constexpr int kMaxPoolIndicesWords = 15;
KernelSource max_pool_indices_source(DType t);

// The plane-wise gather (one thread per output) and scatter (one thread per plane: zeroes it,
// then adds in index order, so repeats sum deterministically, without atomics) of
// MaxPool2dGather/Scatter. Words: out, values (x or g), idx, planes, hw, l (indices per plane).
// An index outside its plane is skipped.
inline constexpr int kMaxPoolPlaneWords = 6;
KernelSource max_pool_plane_source(DType t, bool scatter);

}  // namespace sloth::cuda
