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

// A CUDA or cuBLAS call whose result is not `ok`: `on_fail` gets the message ("CUDA
// error: <call> failed: ...").
#define SLOTH_CUDA_CALL_(call, ok, message, on_fail) \
  do {                                               \
    auto _r = (call);                                \
    if (_r != (ok)) on_fail(message(#call, _r));     \
  } while (0)
#define SLOTH_CUDA_THROW_(msg) throw ::sloth::Error(msg)
#define SLOTH_CUDA_RETURN_(msg) return ::absl::InternalError(msg)

// Throw sloth::Error on failure (the runtime helpers).
#define SLOTH_CU(call) \
  SLOTH_CUDA_CALL_(call, cudaSuccess, ::sloth::cuda::cuda_error, SLOTH_CUDA_THROW_)
#define SLOTH_CUBLAS(call) \
  SLOTH_CUDA_CALL_(call, CUBLAS_STATUS_SUCCESS, ::sloth::cuda::cublas_error, SLOTH_CUDA_THROW_)
// Return the failure as the absl::Status of the enclosing function (the kernels,
// cuda_kernels.h).
#define SLOTH_CU_OK(call) \
  SLOTH_CUDA_CALL_(call, cudaSuccess, ::sloth::cuda::cuda_error, SLOTH_CUDA_RETURN_)
#define SLOTH_CUBLAS_OK(call) \
  SLOTH_CUDA_CALL_(call, CUBLAS_STATUS_SUCCESS, ::sloth::cuda::cublas_error, SLOTH_CUDA_RETURN_)

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
