#include "backends/cuda/cuda_runtime.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "core/settings.h"

namespace sloth::cuda {

std::string cuda_error(const char* call, cudaError_t e) {
  return absl::StrFormat("CUDA error: %s failed: %s (%s)", call, cudaGetErrorString(e),
                         cudaGetErrorName(e));
}

std::string cublas_error(const char* call, cublasStatus_t s) {
  return absl::StrFormat("cuBLAS error: %s failed: %s", call, cublasGetStatusString(s));
}

const std::string& device_probe() {
  static const std::string reason = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error so later calls report their own
      return cuda_error("cudaGetDeviceCount", e);
    }
    if (n <= 0) return std::string("no CUDA device found (cudaGetDeviceCount returned 0)");
    return std::string();
  }();
  return reason;
}

DeviceContext& DeviceContext::get() {
  static DeviceContext* c = [] {
    auto* ctx = new DeviceContext;  // never destroyed: static destruction order vs. the driver
    SLOTH_CU(cudaSetDevice(0));
    SLOTH_CU(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    SLOTH_CU(cudaGetDeviceProperties(&prop, 0));
    ctx->sm_count = std::max(prop.multiProcessorCount, 1);
    ctx->arch = absl::StrFormat("sm_%d%d", prop.major, prop.minor);
    if (!settings().cuda_arch.empty()) ctx->arch = settings().cuda_arch;
    SLOTH_CUBLAS(cublasCreate(&ctx->blas));
    SLOTH_CUBLAS(cublasSetStream(ctx->blas, ctx->stream));
    return ctx;
  }();
  return *c;
}

void DeviceContext::sync() { SLOTH_CU(cudaStreamSynchronize(stream)); }

}  // namespace sloth::cuda
