#pragma once

#include <string>

namespace sloth {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  friend bool operator==(const Device&, const Device&) = default;
  std::string str() const {
    return type == DeviceType::kCPU ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace sloth
