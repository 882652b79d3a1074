// The CUDA backend: one stream on device 0, a caching device allocator, pinned staging for
// host copies, NVRTC-compiled kernels (cached by source hash in memory and, with
// SLOTH_CUDA_CACHE_DIR, on disk), cuBLAS GEMM. A Plan compiles like on the CPU: each run of
// elementwise instructions becomes one generated grid-stride kernel (compiled when the plan
// is compiled, so a cached plan replays with one launch per step and no compilation); other
// instructions use generic generated kernels (copy, reduce, index, factories) compiled once
// per dtype combination. Views are zero-copy (apply_view).
//
// This file holds the Executable (binding inputs, running steps, releasing slots), the
// Backend and its registration; the parts live in:
//   cuda_runtime     errors, device probe, stream/cuBLAS context
//   cuda_allocator   caching device allocator
//   host_staging     pinned host <-> device copies
//   nvrtc_cache      NVRTC compile + load, once per kernel source
//   kernel_launch    parameter packing, launches, stride coalescing
//   run_env          per-run slot state and data helpers (fill, copy, contiguous)
//   cuda_plan        Plan -> steps
//   cuda_kernels_*   launch code per kernel family
#include "backends/cuda/cuda_backend.h"

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_allocator.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/nvrtc_cache.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/cuda/op_kernels.h"
#include "backends/cuda/run_env.h"
#include "core/error.h"
#include "lazy/backend.h"

namespace sloth::cuda {

using lazy::Instr;
using lazy::Plan;
using lazy::SlotKind;

namespace {

class CudaExecutable final : public lazy::Executable {
 public:
  explicit CudaExecutable(const Plan& plan) : plan_(plan) {
    build_steps(plan_, &steps_, &release_);
    // Compile every fused kernel now: a cached plan replays without touching NVRTC.
    for (auto& ks : steps_)
      for (Step& st : ks)
        if (st.ew && st.ew->k.error.empty()) st.ew->fn = kernel_cache().get(st.ew->k.src);
  }

  absl::Status run(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                   std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    // Kernels report their errors as a Status; CUDA runtime failures below them throw.
    try {
      return run_impl(inputs, scalars, outputs, stats);
    } catch (const Error& e) {
      return absl::InternalError(e.what());
    }
  }

 private:
  absl::Status run_impl(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                        std::vector<DeviceData>* outputs, lazy::RunStats* stats) {
    lazy::RunStats local;
    RunEnv env;
    env.plan = &plan_;
    env.scalars = scalars;
    env.stats = stats ? stats : &local;
    env.vals.resize(plan_.slots.size());
    for (size_t s = 0; s < plan_.slots.size(); ++s) {
      const lazy::Slot& slot = plan_.slots[s];
      if (slot.kind == SlotKind::kInput) {
        if (slot.index < 0 || slot.index >= static_cast<int32_t>(inputs.size()))
          return absl::InvalidArgumentError(absl::StrFormat(
              "cuda backend: the plan reads input %d but %d inputs were bound", slot.index, inputs.size()));
        if (!inputs[slot.index].storage->device().is_cuda())
          return absl::InvalidArgumentError(absl::StrFormat(
              "cuda backend: input %d lives on %s; move it with .to(Device::cuda())", slot.index,
              inputs[slot.index].storage->device().str()));
        env.vals[s] = inputs[slot.index];
      } else if (slot.kind == SlotKind::kScalar &&
                 (slot.index < 0 || slot.index >= static_cast<int32_t>(scalars.size()))) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "cuda backend: the plan reads scalar %d but %d scalars were bound", slot.index, scalars.size()));
      }
    }
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (const Step& st : steps_[k]) {
        for (int32_t r : st.reads)
          if (!env.has(r) && plan_.slots[r].kind != SlotKind::kScalar)
            return absl::InternalError(absl::StrFormat(
                "cuda backend: kernel %d reads slot %d before it is computed", k, r));
        SLOTH_RETURN_IF_ERROR(execute(env, st));
      }
      if (!steps_[k].empty()) ++env.stats->kernels_launched;
      for (int32_t s : release_[k]) env.vals[s] = DeviceData();
    }
    outputs->clear();
    for (int32_t s : plan_.outputs) {
      const DeviceData& d = env.get(s);
      if (!d.storage)
        return absl::InternalError(absl::StrFormat("cuda backend: output slot %d was never computed", s));
      outputs->push_back(d);
    }
    // Kernel faults surface here rather than at some later copy.
    SLOTH_CU_OK(cudaGetLastError());
    return absl::OkStatus();
  }

  absl::Status execute(RunEnv& env, const Step& st) {
    if (st.kind == StepKind::kElementwise) return run_elementwise(env, *st.ew);
    const Instr& in = plan_.instrs[st.instr];
    switch (st.kind) {
      case StepKind::kReduce: return run_reduce(env, in);
      case StepKind::kMatmul: return run_matmul(env, in);
      case StepKind::kFactory: return run_factory(env, in);
      case StepKind::kKernel: return run_op_kernel(env, in);
      default: return run_structural(env, in);
    }
  }

  Plan plan_;
  std::vector<std::vector<Step>> steps_;
  std::vector<std::vector<int32_t>> release_;
};

class CudaBackend final : public lazy::Backend {
 public:
  Device device() const override { return Device::cuda(0); }
  Allocator* allocator() override { return &caching_allocator(); }
  std::unique_ptr<lazy::Executable> compile(const Plan& plan) override {
    return std::make_unique<CudaExecutable>(plan);
  }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) host_staging().to_host(src, dst, bytes);
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) host_staging().to_device(src, dst, bytes);
  }
};

const bool kRegistered = [] {
  if (!device_probe().empty()) return false;  // no device or no driver: CUDA stays unavailable
  static CudaBackend backend;
  lazy::register_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace

std::string device_status() { return device_probe(); }

AllocatorStats allocator_stats() { return caching_allocator().stats(); }

void empty_cache() {
  if (device_available()) caching_allocator().empty();
}

absl::Status compile_plan_sources(const Plan& plan, const std::string& arch, int* kernels) {
  std::vector<std::vector<Step>> steps;
  std::vector<std::vector<int32_t>> release;
  build_steps(plan, &steps, &release);
  int count = 0;
  for (auto& ks : steps)
    for (Step& st : ks) {
      if (!st.ew) continue;
      if (!st.ew->k.error.empty()) return absl::InternalError(st.ew->k.error);
      auto code = nvrtc_compile(st.ew->k.src.source, st.ew->k.src.name, arch);
      if (!code.ok()) return code.status();
      ++count;
    }
  if (kernels) *kernels = count;
  return absl::OkStatus();
}

}  // namespace sloth::cuda
