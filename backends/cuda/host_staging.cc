#include "backends/cuda/host_staging.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_runtime.h"

namespace sloth::cuda {

void HostStaging::to_device(const void* src, void* dst, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceContext& c = DeviceContext::get();
  char* buf = buffer();
  for (size_t off = 0; off < bytes; off += kChunk) {
    size_t n = std::min(kChunk, bytes - off);
    std::memcpy(buf, static_cast<const char*>(src) + off, n);
    SLOTH_CU(cudaMemcpyAsync(static_cast<char*>(dst) + off, buf, n, cudaMemcpyHostToDevice,
                             c.stream));
    c.sync();
  }
}

void HostStaging::to_host(const void* src, void* dst, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceContext& c = DeviceContext::get();
  char* buf = buffer();
  for (size_t off = 0; off < bytes; off += kChunk) {
    size_t n = std::min(kChunk, bytes - off);
    SLOTH_CU(cudaMemcpyAsync(buf, static_cast<const char*>(src) + off, n, cudaMemcpyDeviceToHost,
                             c.stream));
    c.sync();
    std::memcpy(static_cast<char*>(dst) + off, buf, n);
  }
}

char* HostStaging::buffer() {
  if (!buf_) SLOTH_CU(cudaMallocHost(reinterpret_cast<void**>(&buf_), kChunk));
  return buf_;
}

HostStaging& host_staging() {
  static HostStaging* s = new HostStaging;
  return *s;
}

}  // namespace sloth::cuda
