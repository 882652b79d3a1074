// What every part of the CUDA backend shares: CUDA/cuBLAS calls that throw sloth::Error on
// failure (or, in the kernels, return it as a Status), the device probe (decides whether the
// backend registers at all) and the one context (device 0, one stream, one cuBLAS handle)
// all work is queued on.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"

#include "core/error.h"

namespace sloth::cuda {

// "CUDA error: <call> failed: <message> (<name>)".
std::string cuda_error(const char* call, cudaError_t e);
// "cuBLAS error: <call> failed: <message>".
std::string cublas_error(const char* call, cublasStatus_t s);

#define SLOTH_CU(call)                                                               \
  do {                                                                               \
    cudaError_t _e = (call);                                                         \
    if (_e != cudaSuccess) throw ::sloth::Error(::sloth::cuda::cuda_error(#call, _e)); \
  } while (0)

#define SLOTH_CUBLAS(call)                                                                     \
  do {                                                                                         \
    cublasStatus_t _s = (call);                                                                \
    if (_s != CUBLAS_STATUS_SUCCESS) throw ::sloth::Error(::sloth::cuda::cublas_error(#call, _s)); \
  } while (0)

// The same inside a function that returns absl::Status (the kernels, cuda_kernels.h): the
// failure comes back as the kernel's Status.
#define SLOTH_CU_OK(call)                                                                   \
  do {                                                                                      \
    cudaError_t _e = (call);                                                                \
    if (_e != cudaSuccess) return ::absl::InternalError(::sloth::cuda::cuda_error(#call, _e)); \
  } while (0)

#define SLOTH_CUBLAS_OK(call)                                                      \
  do {                                                                             \
    cublasStatus_t _s = (call);                                                    \
    if (_s != CUBLAS_STATUS_SUCCESS)                                               \
      return ::absl::InternalError(::sloth::cuda::cublas_error(#call, _s));        \
  } while (0)

// Empty when device 0 is usable, else why not. Probed once; never throws, so it is safe
// at static-init time on machines without a driver.
const std::string& device_probe();

// Device 0's stream, cuBLAS handle and properties, created on first use. A single stream
// orders all work, which is what lets the allocator reuse freed blocks at once.
struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  int sm_count = 1;
  std::string arch;  // "sm_90"; SLOTH_CUDA_ARCH overrides (NVRTC target)

  static DeviceContext& get();
  void sync();
};

}  // namespace sloth::cuda
