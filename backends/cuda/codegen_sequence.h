// CUDA C sources of the sequence Kernel ops (cumsum, argsort, topk): simple one-thread-per-
// row kernels over a contiguous input viewed as [outer, n, inner] (rows = outer * inner).
// Pure host code, like codegen.h, so the tests compile them with NVRTC without a GPU.
#pragma once

#include "backends/cuda/codegen.h"

namespace sloth::cuda {

// Running sum along each row; floats accumulate in double, integers in int64.
// Words: in, out, rows, n, inner.
KernelSource cumsum_source(DType in, DType out);
// The first k positions of each row's stable order (ascending, or descending; NaN sorts as
// the largest value) as int64 indices into out [outer, k, inner]; an insertion sort through
// scratch (int64 [rows, n]). Words: in, out, rows, n, inner, descending, k, scratch.
KernelSource sort_rows_source(DType in);

}  // namespace sloth::cuda
