#include "lazy/backend.h"

#include <array>

namespace sloth::lazy {
namespace {
std::array<Backend*, 2>& registry() {
  static std::array<Backend*, 2> r{nullptr, nullptr};
  return r;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) {
  registry()[static_cast<int>(type)] = backend;
}
Backend* backend_for(Device device) { return registry()[static_cast<int>(device.type)]; }
bool has_backend(DeviceType type) { return registry()[static_cast<int>(type)] != nullptr; }

}  // namespace sloth::lazy
