#include "backends/cuda/nvrtc_compile.h"

#include <nvrtc.h>

#include <vector>

#include "absl/strings/str_format.h"

namespace sloth::cuda {

absl::StatusOr<CompiledCode> nvrtc_compile(const std::string& source, const std::string& name,
                                           const std::string& arch) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    return absl::InternalError(absl::StrFormat("nvrtcCreateProgram(%s) failed: %s", name,
                                               nvrtcGetErrorString(r)));
  const std::string arch_opt = "--gpu-architecture=" + arch;
  // --fmad=false: each op's result is rounded before the next op reads it, as on the CPU
  // (built with -ffp-contract=off); contracting a multiply of one op into the add of the next
  // would make GPU results differ from the CPU's in the last bits.
  std::vector<const char*> opts = {arch_opt.c_str(), "--std=c++17", "-default-device",
                                   "--fmad=false"};
  r = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  CompiledCode out;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    return absl::InternalError(absl::StrFormat(
        "nvrtcCompileProgram(%s, %s) failed: %s\n%s\n--- source ---\n%s", name, arch,
        nvrtcGetErrorString(r), out.log, source));
  }
  out.cubin = arch.rfind("sm_", 0) == 0;
  size_t size = 0;
  r = out.cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
  if (r == NVRTC_SUCCESS) {
    out.image.resize(size);
    r = out.cubin ? nvrtcGetCUBIN(prog, out.image.data()) : nvrtcGetPTX(prog, out.image.data());
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS)
    return absl::InternalError(absl::StrFormat("nvrtcGet%s(%s) failed: %s", out.cubin ? "CUBIN" : "PTX",
                                               name, nvrtcGetErrorString(r)));
  if (!out.cubin && !out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  return out;
}

}  // namespace sloth::cuda
