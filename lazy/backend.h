// The one interface between the scheduler and a device. A backend compiles a Plan into an
// Executable once (the scheduler caches it by the plan's key) and runs it with bound data.
// Backends register themselves; the scheduler never names a concrete backend.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/device.h"
#include "core/storage.h"
#include "lazy/device_data.h"
#include "lazy/plan.h"

namespace sloth::lazy {

struct RunStats {
  int64_t kernels_launched = 0;
  int64_t bytes_allocated = 0;
  int64_t row_blocked_steps = 0;  // steps run block by block over rows with their neighbours
  int64_t frozen_runs = 0;  // runs of a backend's frozen form (CPU: backends/cpu/frozen_run.h)
};

class Executable {
 public:
  virtual ~Executable() = default;
  // inputs: one per kInput slot; scalars: one per kScalar slot; outputs: one per
  // Plan::outputs entry. Errors (an index out of range found in the data) name the op.
  virtual absl::Status run(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                           std::vector<DeviceData>* outputs, RunStats* stats) = 0;
  // Like run(), but the executable may take the inputs over (move from them). An input whose
  // storage is then referenced by nothing else is dead after the graph, so a kernel may write
  // its result into that buffer (donation: `w.sub_(g * lr)` updates w's own buffer). The
  // scheduler hands over only inputs nothing else references, and only for plans that cannot
  // fail half-way (no data-dependent index checks).
  virtual absl::Status run_donating(absl::Span<DeviceData> inputs, absl::Span<const double> scalars,
                                    std::vector<DeviceData>* outputs, RunStats* stats) {
    return run(inputs, scalars, outputs, stats);
  }
  // A buffer the caller took from an earlier run's outputs and no longer needs (sloth::jit:
  // the previous value of a .grad it rebinds): an executable may keep it for a later run
  // (nothing else references it). The default drops it.
  virtual void recycle(StoragePtr storage) { (void)storage; }
  // The same for several buffers at once (each is reset): one hand-over per replay.
  virtual void recycle_all(absl::Span<StoragePtr> storages) {
    for (StoragePtr& s : storages) recycle(std::move(s));
  }
  // The caller will run this executable many times (sloth::jit verified a step that replays
  // it): a backend may compile kernels now that it would otherwise interpret.
  virtual void make_hot() {}
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Allocator* allocator() = 0;
  virtual std::unique_ptr<Executable> compile(const Plan& plan) = 0;
  // The same for a plan the caller keeps too: a backend that holds its plan may share it
  // instead of copying (a plan of 1e5 instructions is tens of MB). The default copies.
  virtual std::unique_ptr<Executable> compile_shared(std::shared_ptr<const Plan> plan) {
    return compile(*plan);
  }
  // `plan` is `base`'s plan instantiated for new sizes (lazy/plan_instance.h: the same
  // instructions, kernels and slots, other shapes): a backend may reuse what of `base` does
  // not depend on sizes. By default it compiles afresh.
  virtual std::unique_ptr<Executable> instantiate(const Executable& base, Plan plan) {
    (void)base;
    return compile(plan);
  }
  // Whether instantiate() reads the plan's kernels and free_after. A backend that takes them
  // from `base` gets a plan without them: an instance is smaller, and a new size allocates
  // (and page-faults) that much less.
  virtual bool instantiate_reads_kernels() const { return true; }
  // Host <-> device copies of contiguous bytes.
  virtual void copy_to_host(const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_from_host(const void* src, void* dst, size_t bytes) = 0;
};

// Registration: backends call register_backend at static-init time (see backends/*).
void register_backend(DeviceType type, Backend* backend);
Backend* backend_for(Device device);  // nullptr if none is registered/available
bool has_backend(DeviceType type);

}  // namespace sloth::lazy
