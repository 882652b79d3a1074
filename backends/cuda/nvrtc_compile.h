// NVRTC: CUDA C source -> PTX or CUBIN. Needs no GPU (only libnvrtc), so it is testable on
// any machine with the toolkit.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace sloth::cuda {

struct CompiledCode {
  std::string image;  // PTX text (NUL-terminated when loaded) or CUBIN bytes
  bool cubin = false;
  std::string log;
};

// Names the compile options in on-disk cache keys: images built with other options (an
// earlier version's) are never loaded.
inline constexpr char kNvrtcOptionsTag[] = "fmad0";

// `arch`: "compute_90" gives PTX, "sm_90" gives a CUBIN for that exact GPU.
absl::StatusOr<CompiledCode> nvrtc_compile(const std::string& source, const std::string& name,
                                           const std::string& arch);

}  // namespace sloth::cuda
