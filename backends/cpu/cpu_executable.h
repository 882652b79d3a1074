// The CPU backend's executable: a Plan compiled into a list of steps per kernel (elementwise
// runs become tile-interpreter programs; everything else is one kernel call), run against bound
// data with each intermediate released after its last use. Its parts:
//   cpu_executable.cc        compiling the steps, the run (normal walk), hand-out, views
//   cpu_executable_setup.cc  what is found once per plan or layout: row groups, steps
//                            computed from scalars only, the frozen form (frozen_run.h)
//   cpu_backend.cc           the Backend that makes executables, registered for kCPU
#ifndef SLOTH_BACKENDS_CPU_CPU_EXECUTABLE_H_
#define SLOTH_BACKENDS_CPU_CPU_EXECUTABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "backends/cpu/frozen_run.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/run_state.h"
#include "lazy/backend.h"
#include "lazy/profiler.h"
#include "lazy/steps.h"

namespace sloth::cpu {

struct StepIO {
  std::vector<int32_t> instrs;
  std::vector<int32_t> reads;
};
struct Step {
  lazy::StepKind kind;
  int32_t instr = -1;                        // single-instruction steps
  std::unique_ptr<ElementwiseProgram> program;  // kElementwise, kFusedReduce (and grouped kReduce)
  // kElementwise: the run (instrs); kFusedReduce: the prologue; slots read from outside the
  // step (reads). Shared with the instances of the plan for other sizes.
  std::shared_ptr<const StepIO> io;
  // kView: the layouts of the last run (valid while the input layout repeats).
  mutable bool view_cached = false;
  // Env::layout_gen of the exclusive run that last wrote view_out into the output slot: a
  // later run of the same generation finds that layout there (the slot has no other writer)
  // and only binds the storage.
  mutable uint64_t view_gen = 0;
  mutable DType view_in_dtype = DType::kFloat32;
  mutable Layout view_in, view_out;
  // The profiler's description (backends/cpu/profile_info.h), made on the first profiled run.
  mutable std::shared_ptr<const lazy::profiling::KernelInfo> prof;
  // Index in CpuExecutable::const_steps_ when the step reads nothing but scalars, else -1.
  int32_t const_index = -1;
};


class CpuExecutable final : public lazy::Executable {
 public:
  explicit CpuExecutable(std::shared_ptr<const Plan> plan);
  // `plan` is base's plan instantiated for new sizes (same instructions, kernels, slots):
  // the steps and their programs are base's, resized; only the row groups (which depend on
  // sizes) are found again.
  CpuExecutable(const CpuExecutable& base, Plan&& plan);

  absl::Status run(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                   std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    return run_bound(inputs, {}, scalars, outputs, stats);
  }
  absl::Status run_donating(absl::Span<DeviceData> inputs, absl::Span<const double> scalars,
                            std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    return run_bound({}, inputs, scalars, outputs, stats);
  }

  void make_hot() override {
    for (const auto& ks : steps_)
      for (const Step& st : ks)
        if (st.program) st.program->make_hot();
  }
  void recycle(StoragePtr storage) override {
    if (busy_.exchange(true, std::memory_order_acquire)) return;  // a run holds the pool
    pool_.give(storage);
    busy_.store(false, std::memory_order_release);
  }
  void recycle_all(absl::Span<StoragePtr> storages) override {
    if (busy_.exchange(true, std::memory_order_acquire)) {
      for (StoragePtr& s : storages) s.reset();
      return;
    }
    for (StoragePtr& s : storages) pool_.give(s);
    busy_.store(false, std::memory_order_release);
  }

  // Exactly one of `shared` / `owned` holds the inputs; owned ones are moved into the run

  // Exactly one of `shared` / `owned` holds the inputs; owned ones are moved into the run
  // (their buffers may then be donated to outputs: the use_count checks see them as dead).
  absl::Status run_bound(absl::Span<const DeviceData> shared, absl::Span<DeviceData> owned,
                         absl::Span<const double> scalars, std::vector<DeviceData>* outputs,
                         lazy::RunStats* stats);

 private:
  // The plan outputs' values into `outputs`.
  absl::Status hand_out(Env& env, std::vector<DeviceData>* outputs);
  // The frozen form of this executable for the current layout generation (built on the first
  // run that repeats a completed run's layouts), or null when it has none.
  FrozenRun* frozen(Env& env) {
    if (frozen_ && frozen_gen_ == layout_gen_) return frozen_.get();
    return build_frozen(env);
  }
  FrozenRun* build_frozen(Env& env);

  // ---- distributed ----
  // Before step `st`: polls the pending writes, finishes those whose slots `st` reads (a
  // cached view step of one joins it instead, so the view's readers wait, not the view).
  static absl::Status settle_pending(Env& env, const Step& st);
  // Finishes the first `n` pending writes, in start order (every rank waits in the same order).
  static absl::Status finish_pending(Env& env, size_t n);

  absl::Status execute(Env& env, const Step& st);
  // A view of the same input layout gives the same output layout every run: the first run
  // computes it (run_structural), later ones copy it (no view lowering, no allocation).
  absl::Status view_step(Env& env, const Step& st, const Instr& in);
  void compile();
  // Row groups: consecutive steps that all loop over the same rows (dim 0) and read what an
  // earlier one of them wrote only row by row run block by block: for each block of rows
  // every step runs before the next block starts, so a step's output is still in cache when
  // the next step reads it (softmax: max, exp-sum and divide read x from memory once).
  // Standalone reductions over trailing dims join as programs without a prologue.
  // SLOTH_ROW_GROUPS=0 turns this off.
  void find_row_groups();
  // Steps that read only scalars (directly or through other such steps) and write small
  // values that are not plan outputs: a loss's backward seed (full, div, reshape, expand).
  // Their results are kept by the executable and reused while the scalars they read repeat
  // (every replay of a jitted step). Collective and other kernel-op steps are left out.
  void find_constant_steps();

  // The profiler's view of a step, computed once per executable.
  std::shared_ptr<const lazy::profiling::KernelInfo> profile_info(const Step& st);

  // Row groups (find_row_groups): loop spaces at least this large, blocks of about this
  // many elements per step (a few such arrays stay in a core's L2).
  static constexpr int64_t kRowGroupMinElems = 1 << 16;
  static constexpr int64_t kRowBlockElems = 1 << 14;
  struct RowGroup {
    std::vector<std::pair<size_t, size_t>> steps;  // (kernel, step) in run order
    int64_t rows = 0, block_rows = 1;
    mutable std::shared_ptr<const lazy::profiling::KernelInfo> prof;
  };
  std::shared_ptr<const lazy::profiling::KernelInfo> group_info(const RowGroup& g);
  struct Op {
    enum Kind : uint8_t { kStep, kGroup, kEndKernel } kind;
    size_t k = 0, i = 0;
    int group = -1;
  };

  // Shared with the scheduler's cache entry (or owned when compiled from a copy): the
  // scheduler may drop its plan while keeping the executable.
  std::shared_ptr<const Plan> plan_holder_;
  const Plan& plan_;
  std::vector<std::vector<Step>> steps_;
  RunReleases releases_;
  std::vector<RowGroup> groups_;
  absl::flat_hash_set<int32_t> materialized_;  // slots some step reads (profile_info)
  std::mutex prof_mu_;
  std::vector<Op> ops_;  // what run_bound does, in order
  std::vector<int32_t> input_slots_;
  int32_t max_input_ = -1, max_scalar_ = -1;
  struct ConstStep {
    std::vector<int32_t> outs;     // slots the step writes
    std::vector<DeviceData> vals;  // their values from the last run that computed them
  };
  std::vector<ConstStep> const_steps_;  // (find_constant_steps; used by the run holding busy_)
  std::vector<int32_t> const_scalars_;  // scalar indices they read, and their last values
  std::vector<double> const_scalar_vals_;
  bool consts_ready_ = false;
  // Run state of the run holding busy_: the layout generation of the last run (Env), whether
  // it completed (its slot layouts are then known), whether some run completed (reads_ok_).
  static uint64_t next_layout_gen() {
    static std::atomic<uint64_t> gen{0};
    return gen.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  uint64_t layout_gen_ = 0;
  bool layouts_ok_ = false, reads_ok_ = false;
  // The frozen form (frozen_run.h) for layout generation frozen_gen_; the generation whose
  // build failed (not tried again while the layouts stay).
  std::unique_ptr<FrozenRun> frozen_;
  uint64_t frozen_gen_ = 0, frozen_fail_gen_ = 0;
  std::vector<int32_t> last_read_;  // per slot, from lazy::split_steps
  std::vector<int32_t> frozen_ops_;  // per step given to FrozenRun::build: its index in ops_
  // The per-run slot table, reused run after run, and whether a run holds it. Shared with the
  // instances of this plan for other sizes (same slots): a program whose sizes change every
  // step keeps reusing one warm table and its layout vectors' capacity.
  struct RunState {
    Env env;
    std::atomic<bool> busy{false};
    // Small buffers of the last run, used by the run that holds busy. One pool for all the
    // plan's sizes (dynamic shapes): a pool per instance held up to BufferPool::kBudget per
    // size (a megabyte times every sequence length) and handed a step buffers it last
    // touched a whole cycle of sizes ago, cold in cache. `last` is the executable whose run
    // filled it: a run at other sizes first returns them to the caching allocator (whose
    // bins serve any size, most recently freed first, so still warm) instead of keeping
    // buffers of sizes it would never take.
    BufferPool pool;
    const void* last = nullptr;
  };
  std::shared_ptr<RunState> run_state_ = std::make_shared<RunState>();
  Env& env_ = run_state_->env;
  std::atomic<bool>& busy_ = run_state_->busy;
  BufferPool& pool_ = run_state_->pool;
};

}  // namespace sloth::cpu

#endif  // SLOTH_BACKENDS_CPU_CPU_EXECUTABLE_H_
