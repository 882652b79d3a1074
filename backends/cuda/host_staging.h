// Host <-> device copies through one pinned staging buffer: pageable host memory cannot be
// copied asynchronously, and pinning every user buffer would cost more than the extra memcpy.
#pragma once

#include <cstddef>
#include <mutex>

namespace sloth::cuda {

class HostStaging {
 public:
  static constexpr size_t kChunk = 16u << 20;  // bytes per round trip through the buffer

  // Both return when the copy is complete (they synchronize the stream per chunk).
  void to_device(const void* src, void* dst, size_t bytes);
  void to_host(const void* src, void* dst, size_t bytes);

 private:
  char* buffer();  // allocated on first use
  std::mutex mu_;
  char* buf_ = nullptr;
};

// The process-wide instance (never destroyed).
HostStaging& host_staging();

}  // namespace sloth::cuda
