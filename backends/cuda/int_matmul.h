// Kernels compiled ahead of time by nvcc (sm_90 SASS + compute_90 PTX): the integer matmul
// fallback (float types go through cuBLAS). Everything else is generated and built with NVRTC.
#pragma once

#include <cuda_runtime_api.h>

namespace sloth::cuda {

inline constexpr int kMatmulMaxBatchDims = 10;

struct IntMatmulGeo {
  int nd = 0;  // batch dims (row-major over the output's batch)
  long long shape[kMatmulMaxBatchDims] = {};
  long long sa[kMatmulMaxBatchDims] = {}, sb[kMatmulMaxBatchDims] = {};
  long long nb = 1, m = 0, n = 0, k = 0, sam = 0, sak = 0, sbk = 0, sbn = 0;
};

// c[b, i, j] = sum_p a[b, i, p] * b[b, p, j] for int32 (int64 = false) or int64 elements;
// c is contiguous.
cudaError_t launch_int_matmul(bool int64, const void* a, const void* b, void* c,
                              const IntMatmulGeo& g, int max_blocks, cudaStream_t stream);

}  // namespace sloth::cuda
