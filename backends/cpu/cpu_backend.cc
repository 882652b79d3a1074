// The CPU backend: makes CpuExecutables (cpu_executable.h) from plans and registers itself for
// DeviceType::kCPU at static-init time, so anything that links it (alwayslink) runs plans on
// the host.
#include <cstring>
#include <memory>

#include "backends/cpu/cpu_executable.h"

namespace sloth::cpu {
namespace {

class CpuBackend final : public lazy::Backend {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator* allocator() override { return cpu_allocator(); }
  std::unique_ptr<lazy::Executable> compile(const Plan& plan) override {
    return std::make_unique<CpuExecutable>(std::make_shared<const Plan>(plan));
  }
  std::unique_ptr<lazy::Executable> compile_shared(std::shared_ptr<const Plan> plan) override {
    return std::make_unique<CpuExecutable>(std::move(plan));
  }
  std::unique_ptr<lazy::Executable> instantiate(const lazy::Executable& base,
                                                Plan plan) override {
    if (const auto* b = dynamic_cast<const CpuExecutable*>(&base))
      return std::make_unique<CpuExecutable>(*b, std::move(plan));
    return compile(plan);
  }
  // An instance takes its steps, programs and releases from its base (the constructor above).
  bool instantiate_reads_kernels() const override { return false; }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
};

const bool kRegistered = [] {
  static CpuBackend backend;
  lazy::register_backend(DeviceType::kCPU, &backend);
  return true;
}();

}  // namespace
}  // namespace sloth::cpu
