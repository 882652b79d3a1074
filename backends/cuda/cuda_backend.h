// The CUDA backend (built with --config=cuda). It registers itself for DeviceType::kCUDA at
// static-init time when a device is present; without one (or without a driver) the binary
// still starts and sloth::cuda_is_available() is false.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/storage.h"
#include "lazy/plan.h"

namespace sloth::cuda {

// Empty when device 0 is usable; otherwise the reason (the CUDA call and its error string).
std::string device_status();
inline bool device_available() { return device_status().empty(); }

// The caching device allocator's counters (cudaMalloc calls, cached bytes, ...).
AllocatorStats allocator_stats();
// Returns every cached block to the driver.
void empty_cache();

// Generates the CUDA C of every fused elementwise kernel the executable for `plan` would
// build and compiles it with NVRTC for `arch` ("compute_90": PTX). Needs no GPU; *kernels
// counts the sources compiled.
absl::Status compile_plan_sources(const lazy::Plan& plan, const std::string& arch, int* kernels);

}  // namespace sloth::cuda
