// The CPU backend: compiles a Plan into a list of steps per kernel (elementwise runs become
// tile-interpreter programs; everything else is one kernel call), runs them against bound
// data and releases each intermediate after its last use so its Storage goes back to the
// caching allocator. Registers itself for DeviceType::kCPU at static-init time.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/str_format.h"
#include "backends/cpu/frozen_run.h"
#include "backends/cpu/fused_reduce_rule.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/profile_info.h"
#include "backends/cpu/run_state.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "core/float_env.h"
#include "core/error.h"
#include "core/settings.h"
#include "lazy/steps.h"

namespace sloth::cpu {

using lazy::SlotKind;

namespace {

using lazy::StepKind;

bool log_fusion() { return settings().log_on("fusion"); }

struct StepIO {
  std::vector<int32_t> instrs;
  std::vector<int32_t> reads;
};
struct Step {
  StepKind kind;
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
  explicit CpuExecutable(std::shared_ptr<const Plan> plan)
      : plan_holder_(std::move(plan)), plan_(*plan_holder_) {
    compile();
  }
  // `plan` is base's plan instantiated for new sizes (same instructions, kernels, slots):
  // the steps and their programs are base's, resized; only the row groups (which depend on
  // sizes) are found again.
  CpuExecutable(const CpuExecutable& base, Plan&& plan)
      : plan_holder_(std::make_shared<const Plan>(std::move(plan))), plan_(*plan_holder_),
        run_state_(base.run_state_) {
    input_slots_ = base.input_slots_;
    max_input_ = base.max_input_;
    max_scalar_ = base.max_scalar_;
    releases_ = base.releases_;
    last_read_ = base.last_read_;
    steps_.resize(base.steps_.size());
    for (size_t k = 0; k < base.steps_.size(); ++k)
      for (const Step& b : base.steps_[k]) {
        Step st{b.kind};
        st.instr = b.instr;
        st.io = b.io;  // shared: what a step reads and runs does not depend on sizes
        if ((b.kind == StepKind::kElementwise || b.kind == StepKind::kFusedReduce) && b.program) {
          const Instr* red = b.kind == StepKind::kFusedReduce ? &plan_.instrs[b.instr] : nullptr;
          const IntSpan loop = red                  ? plan_.slots[red->in[0]].shape.span()
                               : b.io->instrs.empty() ? IntSpan(b.program->loop_shape())
                                                      : plan_.instrs[b.io->instrs.back()].shape.span();
          st.program = b.program->resized(Shape(loop.begin(), loop.end()), red);
        }
        steps_[k].push_back(std::move(st));
      }
    find_row_groups();
    find_constant_steps();
  }

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
  // (their buffers may then be donated to outputs: the use_count checks see them as dead).
  absl::Status run_bound(absl::Span<const DeviceData> shared, absl::Span<DeviceData> owned,
                         absl::Span<const double> scalars, std::vector<DeviceData>* outputs,
                         lazy::RunStats* stats) {
    // The slot table lives in the executable and is reused run after run (its DeviceData
    // keep their layout vectors' capacity). A concurrent or re-entrant run of the same
    // executable gets a fresh table.
    const bool mine = !busy_.exchange(true, std::memory_order_acquire);
    ComputeBurst burst;  // idle workers poll for this plan's next kernel, then sleep
    sloth::internal::sync_float_env();  // a set_flush_denormal since this thread last ran
    Env local_env;
    Env& env = mine ? env_ : local_env;
    if (!mine) env.vals.resize(plan_.slots.size());
    struct Done {
      Env& env;
      std::atomic<bool>* busy;
      const RunReleases& releases;
      // Set once the run completed: every kernel's releases ran, so only the slots no kernel
      // end releases (inputs, outputs, values nothing reads) can still hold a buffer.
      bool completed = false;
      ~Done() {
        // A failed run still waits for its collectives (their buffers stay alive until then).
        if (!env.pending.empty()) (void)finish_pending(env, env.pending.size());
        // Drop every reference (inputs too: a later donation check must not see them).
        // Values computed here that nothing else holds go to the pool (not inputs: those
        // are the caller's, donated or not).
        if (env.compiled_runs > 0) jit::note_compiled_run(env.compiled_runs);
        releases.release_at_end(env, completed);
        if (busy) busy->store(false, std::memory_order_release);
      }
    } done{env, mine ? &busy_ : nullptr, releases_};
    if (mine && run_state_->last != this) {  // the plan's last run was at other sizes
      pool_ = BufferPool();
      run_state_->last = this;
    }
    const size_t num_inputs = shared.size() + owned.size();
    lazy::RunStats local;
    env.plan = &plan_;
    env.pool = mine ? &pool_ : nullptr;
    env.exclusive = mine;
    env.compiled_runs = 0;
    env.scalars = scalars;
    env.stats = stats ? stats : &local;
    if (max_input_ >= static_cast<int32_t>(num_inputs))
      return absl::InvalidArgumentError(absl::StrFormat(
          "cpu backend: the plan reads input %d but %d inputs were bound", max_input_,
          num_inputs));
    if (max_scalar_ >= static_cast<int32_t>(scalars.size()))
      return absl::InvalidArgumentError(absl::StrFormat(
          "cpu backend: the plan reads scalar %d but %d scalars were bound", max_scalar_,
          scalars.size()));
    // The input slots keep the layouts of this table's last run: when it was this
    // executable's and every input has the same dtype, shape and strides again, all slots
    // have their last layouts (Env::layout_gen) and nothing but the data pointers and offsets
    // is bound here.
    bool same_layouts = mine && env.last_run_by == this && layouts_ok_;
    for (int32_t s : input_slots_) {
      const int32_t i = plan_.slots[s].index;
      DeviceData& d = env.vals[s];
      const DeviceData& src = owned.empty() ? shared[i] : owned[i];
      if (d.dtype != src.dtype || !lazy::same_dims(d.layout.shape, src.layout.shape) ||
          !lazy::same_dims(d.layout.strides, src.layout.strides)) {
        same_layouts = false;
        d.layout.shape = src.layout.shape;
        d.layout.strides = src.layout.strides;
        d.dtype = src.dtype;
      }
      d.layout.offset = src.layout.offset;
      if (owned.empty()) d.storage = src.storage;
      else d.storage = std::move(owned[i].storage);
    }
    if (mine) {
      env.last_run_by = this;
      if (!same_layouts) layout_gen_ = next_layout_gen();
      env.layout_gen = layout_gen_;
      layouts_ok_ = false;  // until this run completes
    } else {
      env.layout_gen = 0;
    }
    // Every step's reads are available once a run has completed (the order of steps and
    // what they read are fixed): later runs skip the check.
    const bool reads_checked = mine && reads_ok_;
    auto check_reads = [&](const Step& st, size_t k) -> absl::Status {
      if (!env.pending.empty()) SLOTH_RETURN_IF_ERROR(settle_pending(env, st));
      if (reads_checked) return absl::OkStatus();
      for (int32_t r : st.io->reads)
        if (!env.has(r) && plan_.slots[r].kind != SlotKind::kScalar)
          return absl::InternalError(absl::StrFormat(
              "cpu backend: kernel %d reads slot %d before it is computed", k, r));
      return absl::OkStatus();
    };
    // Steps computed from scalars only keep their results while the scalars repeat.
    bool consts_hit = false;
    if (mine && !const_steps_.empty()) {
      consts_hit = consts_ready_;
      for (size_t j = 0; j < const_scalars_.size() && consts_hit; ++j)
        consts_hit = std::memcmp(&scalars[const_scalars_[j]], &const_scalar_vals_[j],
                                 sizeof(double)) == 0;
      consts_ready_ = false;
    }
    if (mine && same_layouts && (const_steps_.empty() || consts_hit) && env.pending.empty() &&
        settings().frozen_runs && !lazy::profiling::on()) {
      if (FrozenRun* f = frozen(env)) {
        if (!const_steps_.empty()) consts_ready_ = true;  // their kept values still hold
        absl::Status st = f->run(env, [&](int32_t i) {
          const Op& op = ops_[frozen_ops_[i]];
          return execute(env, steps_[op.k][op.i]);
        });
        env.stats->kernels_launched += f->kernels();
        if (st.ok()) st = hand_out(env, outputs);
        f->finish(env);
        SLOTH_RETURN_IF_ERROR(st);
        reads_ok_ = layouts_ok_ = true;
        done.completed = true;
        return absl::OkStatus();
      }
    }
    for (const Op& op : ops_) {
      switch (op.kind) {
        case Op::kStep: {
          const Step& st = steps_[op.k][op.i];
          if (st.const_index >= 0 && mine) {
            ConstStep& c = const_steps_[st.const_index];
            if (consts_hit) {
              for (size_t j = 0; j < c.outs.size(); ++j)
                if (c.vals[j].storage) env.set_view(c.outs[j], c.vals[j]);
              break;
            }
            SLOTH_RETURN_IF_ERROR(check_reads(st, op.k));
            SLOTH_RETURN_IF_ERROR(execute(env, st));
            for (size_t j = 0; j < c.outs.size(); ++j) c.vals[j] = env.vals[c.outs[j]];
            break;
          }
          // A replay's common case (no collective in flight, reads checked by an earlier
          // run) skips the call and its Status.
          if (!reads_checked || !env.pending.empty())
            SLOTH_RETURN_IF_ERROR(check_reads(st, op.k));
          if (lazy::profiling::on()) {
            auto info = profile_info(st);
            lazy::profiling::set_current_kernel(info);
            lazy::profiling::Scope scope(lazy::profiling::Kind::kKernel, "", info);
            SLOTH_RETURN_IF_ERROR(execute(env, st));
          } else {
            SLOTH_RETURN_IF_ERROR(execute(env, st));
          }
          break;
        }
        case Op::kGroup: {
          const RowGroup& g = groups_[op.group];
          if (!mine) {  // a concurrent run: the programs' shared bind state is in use
            for (const auto& [k, i] : g.steps) {
              SLOTH_RETURN_IF_ERROR(check_reads(steps_[k][i], k));
              SLOTH_RETURN_IF_ERROR(execute(env, steps_[k][i]));
            }
            break;
          }
          std::optional<lazy::profiling::Scope> scope;
          if (lazy::profiling::on()) {
            auto info = group_info(g);
            lazy::profiling::set_current_kernel(info);
            scope.emplace(lazy::profiling::Kind::kKernel, "", info);
          }
          env.stats->row_blocked_steps += static_cast<int64_t>(g.steps.size());
          for (const auto& [k, i] : g.steps) {
            SLOTH_RETURN_IF_ERROR(check_reads(steps_[k][i], k));
            SLOTH_RETURN_IF_ERROR(steps_[k][i].program->begin_rows(env));
          }
          parallel_for(g.rows, g.block_rows, [&](int64_t lo, int64_t hi) {
            for (int64_t r0 = lo; r0 < hi; r0 += g.block_rows) {
              const int64_t r1 = std::min(hi, r0 + g.block_rows);
              for (const auto& [k, i] : g.steps) steps_[k][i].program->run_rows(r0, r1);
            }
          });
          break;
        }
        case Op::kEndKernel:
          if (!steps_[op.k].empty()) ++env.stats->kernels_launched;
          releases_.release_kernel(env, op.k);
          break;
      }
    }
    SLOTH_RETURN_IF_ERROR(finish_pending(env, env.pending.size()));
    if (mine && !const_steps_.empty()) {
      for (size_t j = 0; j < const_scalars_.size(); ++j)
        const_scalar_vals_[j] = scalars[const_scalars_[j]];
      consts_ready_ = true;
    }
    SLOTH_RETURN_IF_ERROR(hand_out(env, outputs));
    if (mine) reads_ok_ = layouts_ok_ = true;
    done.completed = true;
    return absl::OkStatus();
  }

 private:
  // The plan outputs' values into `outputs`.
  absl::Status hand_out(Env& env, std::vector<DeviceData>* outputs) {
    // Assigned into the caller's elements: a caller that reuses `outputs` run after run
    // (sloth::jit's replays) keeps their layout vectors' capacity, so nothing is allocated.
    outputs->resize(plan_.outputs.size());
    for (size_t o = 0; o < plan_.outputs.size(); ++o) {
      const int32_t s = plan_.outputs[o];
      const DeviceData& d = env.get(s);
      if (!d.storage)
        return absl::InternalError(absl::StrFormat("cpu backend: output slot %d was never computed", s));
      if (releases_.output_moves(o)) {
        // The run is over and no later output reads this slot: its reference moves to the
        // caller (no reference count taken here and dropped again at the end of the run).
        DeviceData& dst = (*outputs)[o];
        DeviceData& src = env.vals[s];
        dst.storage = std::move(src.storage);
        lazy::assign_dims(dst.layout.shape, src.layout.shape);
        lazy::assign_dims(dst.layout.strides, src.layout.strides);
        dst.layout.offset = src.layout.offset;
        dst.dtype = src.dtype;
      } else {
        lazy::assign_data((*outputs)[o], d);
      }
    }
    return absl::OkStatus();
  }

  // The frozen form of this executable for the current layout generation (built on the first
  // run that repeats a completed run's layouts), or null when it has none.
  FrozenRun* frozen(Env& env) {
    if (frozen_ && frozen_gen_ == layout_gen_) return frozen_.get();
    frozen_.reset();
    if (frozen_fail_gen_ == layout_gen_ || !groups_.empty()) return nullptr;
    std::vector<int32_t> pos(plan_.instrs.size(), 0);
    {
      int32_t p = 0;
      for (const lazy::Kernel& k : plan_.kernels)
        for (int32_t i : k.instrs) pos[i] = p++;
    }
    std::vector<FrozenRun::StepRef> refs;
    frozen_ops_.clear();
    for (size_t j = 0; j < ops_.size(); ++j) {
      const Op& op = ops_[j];
      if (op.kind != Op::kStep) continue;
      const Step& st = steps_[op.k][op.i];
      frozen_ops_.push_back(static_cast<int32_t>(j));
      FrozenRun::StepRef r;
      r.reads = &st.io->reads;
      r.kind = st.kind;
      r.kernel = static_cast<int32_t>(op.k);
      r.instr = st.instr >= 0 ? &plan_.instrs[st.instr] : nullptr;
      r.program = st.program.get();
      r.end_pos = st.instr >= 0 ? pos[st.instr] : 0;
      for (int32_t i : st.io->instrs) r.end_pos = std::max(r.end_pos, pos[i]);
      r.true_view = st.kind == StepKind::kView && st.view_cached;
      if (r.true_view)
        r.view_delta = (st.view_out.offset - st.view_in.offset) *
                       static_cast<int64_t>(dtype_size(st.view_in_dtype));
      if (st.const_index >= 0) {
        r.const_outs = &const_steps_[st.const_index].outs;
        r.const_vals = &const_steps_[st.const_index].vals;
      }
      refs.push_back(r);
    }
    std::string why;
    frozen_ = FrozenRun::build(env, layout_gen_, refs, releases_, last_read_, &why);
    if (settings().log_on("frozen"))
      std::fprintf(stderr, "[sloth frozen] plan of %zu kernels: %s\n", plan_.kernels.size(),
                   frozen_ ? absl::StrFormat("frozen, %d bytes of intermediates",
                                             frozen_->arena_bytes()).c_str()
                           : ("not frozen: " + why).c_str());
    if (frozen_) frozen_gen_ = layout_gen_;
    else frozen_fail_gen_ = layout_gen_;
    return frozen_.get();
  }

  // ---- distributed ----
  // Before step `st`: polls the pending writes, finishes those whose slots `st` reads (a
  // cached view step of one joins it instead, so the view's readers wait, not the view).
  static absl::Status settle_pending(Env& env, const Step& st) {
    for (Pending& p : env.pending) p.write->poll();
    size_t last = 0;  // finish in start order, up to the last one `st` needs
    for (size_t j = 0; j < env.pending.size(); ++j) {
      Pending& p = env.pending[j];
      bool needed = false;
      for (int32_t r : st.io->reads)
        if (std::find(p.slots.begin(), p.slots.end(), r) != p.slots.end()) needed = true;
      if (!needed) continue;
      if (st.kind == StepKind::kView && st.view_cached && st.io->reads.size() == 1) {
        const Instr& in = env.plan->instrs[st.instr];
        const DeviceData& x = env.vals[in.in[0]];
        if (x.dtype == st.view_in_dtype && x.layout.offset == st.view_in.offset &&
            x.layout.shape == st.view_in.shape && x.layout.strides == st.view_in.strides) {
          p.slots.push_back(in.out);
          continue;
        }
      }
      last = j + 1;
    }
    return finish_pending(env, last);
  }
  // Finishes the first `n` pending writes, in start order (every rank waits in the same order).
  static absl::Status finish_pending(Env& env, size_t n) {
    absl::Status first = absl::OkStatus();
    for (size_t j = 0; j < n; ++j) {
      absl::Status st = env.pending[j].write->finish();
      if (first.ok()) first = st;
    }
    env.pending.erase(env.pending.begin(), env.pending.begin() + static_cast<ptrdiff_t>(n));
    return first;
  }

  absl::Status execute(Env& env, const Step& st) {
    if (st.program) return st.program->run(env);
    const Instr& in = plan_.instrs[st.instr];
    switch (st.kind) {
      case StepKind::kReduce: return run_reduce(env, in);
      case StepKind::kMatmul: return run_matmul(env, in);
      case StepKind::kView: return view_step(env, st, in);
      case StepKind::kFactory: return run_factory(env, in);
      case StepKind::kKernel: return run_op_kernel(env, in);
      default: return run_structural(env, in);
    }
  }

  // A view of the same input layout gives the same output layout every run: the first run
  // computes it (run_structural), later ones copy it (no view lowering, no allocation).
  absl::Status view_step(Env& env, const Step& st, const Instr& in) {
    const DeviceData& x = env.get(in.in[0]);
    if (st.view_cached && x.layout.offset == st.view_in.offset) {
      DeviceData& o = env.vals[in.out];
      // Same layout generation: every layout of this run is the one of the run that set
      // view_gen (the input's dtype, shape and strides too; its offset is checked above).
      if (env.layout_gen != 0 && st.view_gen == env.layout_gen) {
        o.storage = x.storage;
        return absl::OkStatus();
      }
      if (x.dtype == st.view_in_dtype && lazy::same_dims(x.layout.shape, st.view_in.shape) &&
          lazy::same_dims(x.layout.strides, st.view_in.strides)) {
        o.storage = x.storage;
        lazy::assign_dims(o.layout.shape, st.view_out.shape);
        lazy::assign_dims(o.layout.strides, st.view_out.strides);
        o.layout.offset = st.view_out.offset;
        o.dtype = x.dtype;
        st.view_gen = env.layout_gen;
        return absl::OkStatus();
      }
    }
    st.view_gen = 0;
    SLOTH_RETURN_IF_ERROR(run_structural(env, in));
    const DeviceData& o = env.vals[in.out];
    if (o.storage == x.storage && o.dtype == x.dtype) {  // a true view, not a copy
      st.view_cached = true;
      st.view_in = x.layout;
      st.view_in_dtype = x.dtype;
      st.view_out = o.layout;
      st.view_gen = env.layout_gen;
    } else {
      st.view_cached = false;
    }
    return absl::OkStatus();
  }

  void compile() {
    // Inputs and scalars: with ordered slots (lower()) the first ones, values are not read.
    const size_t bound_slots = plan_.slots_ordered
                                   ? static_cast<size_t>(plan_.num_inputs + plan_.num_scalars)
                                   : plan_.slots.size();
    for (size_t s = 0; s < bound_slots; ++s) {
      const lazy::Slot& slot = plan_.slots[s];
      if (slot.kind == SlotKind::kInput) {
        input_slots_.push_back(static_cast<int32_t>(s));
        max_input_ = std::max(max_input_, slot.index);
        if (slot.index < 0) max_input_ = std::numeric_limits<int32_t>::max();
      } else if (slot.kind == SlotKind::kScalar) {
        max_scalar_ = std::max(max_scalar_, slot.index);
        if (slot.index < 0) max_scalar_ = std::numeric_limits<int32_t>::max();
      }
    }
    env_.vals.resize(plan_.slots.size());
    const size_t nk = plan_.kernels.size();
    std::vector<char> plan_out(plan_.slots.size(), 0);
    for (int32_t o : plan_.outputs) plan_out[o] = 1;
    // Execution position of every instruction (kernels run in order, and the steps of a
    // kernel follow its instruction order) and the last position reading each slot: a step
    // may hand a dead operand's buffer to its output (see ProgramOptions::donatable).
    std::vector<int32_t> pos(plan_.instrs.size(), 0);
    {
      int32_t p = 0;
      for (size_t k = 0; k < nk; ++k)
        for (int32_t i : plan_.kernels[k].instrs) pos[i] = p++;
    }
    // split_steps finds the last reading position of each slot in its walk over the kernels.
    lazy::StepPlan sp = lazy::split_steps(plan_, &fusable_reduce);
    last_read_ = sp.last_read;
    const std::vector<int32_t>& last_pos = last_read_;

    steps_.resize(nk);
    releases_.build(plan_, std::move(sp.release));
    for (size_t k = 0; k < nk; ++k)
      for (lazy::PlanStep& ps : sp.kernels[k]) {
        Step st{ps.kind};
        st.instr = ps.instr;
        if (ps.kind == StepKind::kElementwise || ps.kind == StepKind::kFusedReduce) {
          ProgramOptions opt;
          // Prologue + reduction in one pass: the reduced input is never written to memory.
          if (ps.kind == StepKind::kFusedReduce) opt.reduce = &plan_.instrs[ps.instr];
          else opt.donatable = donation_candidates(plan_, plan_out, last_pos, ps.reads, pos[ps.instrs.back()]);
          st.program = compile_elementwise(plan_, ps.instrs, ps.materialize, opt);
        }
        st.io = std::make_shared<const StepIO>(StepIO{std::move(ps.instrs), std::move(ps.reads)});
        steps_[k].push_back(std::move(st));
      }
    find_row_groups();
    find_constant_steps();
  }

  // Row groups: consecutive steps that all loop over the same rows (dim 0) and read what an
  // earlier one of them wrote only row by row run block by block: for each block of rows
  // every step runs before the next block starts, so a step's output is still in cache when
  // the next step reads it (softmax: max, exp-sum and divide read x from memory once).
  // Standalone reductions over trailing dims join as programs without a prologue.
  // SLOTH_ROW_GROUPS=0 turns this off.
  void find_row_groups() {
    std::vector<std::pair<size_t, size_t>> flat;
    for (size_t k = 0; k < steps_.size(); ++k)
      for (size_t i = 0; i < steps_[k].size(); ++i) flat.emplace_back(k, i);
    std::vector<int> group_of(flat.size(), -1);
    // A group loops over rows * inner <= its largest step's elements, so a plan whose steps
    // all loop over fewer than kRowGroupMinElems has none: it is not searched (the search
    // builds a program for every standalone reduction, ~4% of planning a model-sized graph
    // of small tensors).
    int64_t largest = 0;
    for (const auto& [k, i] : flat) {
      const Step& st = steps_[k][i];
      if (st.program) largest = std::max(largest, numel(st.program->loop_shape()));
      else if (st.kind == StepKind::kReduce)
        largest = std::max(largest, numel(plan_.slots[plan_.instrs[st.instr].in[0]].shape));
    }
    const bool enabled = settings().row_groups && largest >= kRowGroupMinElems;
    if (enabled) {
      // Standalone reductions as programs; they replace the reduce kernel only if grouped.
      std::map<const Step*, std::unique_ptr<ElementwiseProgram>> as_program;
      auto program_of = [&](const Step& st) -> const ElementwiseProgram* {
        if (st.program) return st.program.get();
        auto it = as_program.find(&st);
        return it == as_program.end() ? nullptr : it->second.get();
      };
      // The rows a step loops over, or -1 when it cannot run row by row.
      auto rows_of = [&](Step& st) -> int64_t {
        if (st.kind == StepKind::kReduce && !as_program.count(&st)) {
          const Instr& in = plan_.instrs[st.instr];
          const lazy::Slot& x = plan_.slots[in.in[0]];
          if ((in.op != OpId::kSum && in.op != OpId::kProd && in.op != OpId::kAmax &&
               in.op != OpId::kAmin) ||
              x.kind == SlotKind::kScalar || x.shape.size() < 2)
            return -1;
          // The reduced dims must be the trailing ones (one contiguous stretch per output):
          // checked before a program is built for it.
          const int64_t nd = static_cast<int64_t>(x.shape.size());
          std::vector<int64_t> dims(in.attrs->dims.begin(), in.attrs->dims.end());
          std::sort(dims.begin(), dims.end());
          for (size_t j = 0; j < dims.size(); ++j)
            if (dims[j] != nd - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(j)) return -1;
          ProgramOptions opt;
          opt.reduce = &in;
          as_program[&st] = compile_elementwise(plan_, {}, {}, opt);
        }
        const ElementwiseProgram* prog = program_of(st);
        if (!prog || !prog->row_blockable()) return -1;
        return prog->loop_shape()[0];
      };
      // Slot -> the `start` of the candidate group whose steps wrote it (a stamp, so the
      // membership test is O(1) and nothing is cleared between candidates).
      // Allocated at the first candidate (a plan with none does not size a table over its
      // slots); 32-bit stamps: a plan has fewer than 2^31 steps.
      std::vector<int32_t> produced_by;
      auto written = [&](const Step& st, size_t stamp) {
        if (produced_by.empty()) produced_by.assign(plan_.slots.size(), -1);
        for (int32_t i : st.io->instrs) produced_by[plan_.instrs[i].out] = static_cast<int32_t>(stamp);
        if (st.instr >= 0) produced_by[plan_.instrs[st.instr].out] = static_cast<int32_t>(stamp);
      };
      size_t start = 0;
      while (start < flat.size()) {
        Step& first = steps_[flat[start].first][flat[start].second];
        const int64_t rows = rows_of(first);
        if (rows < 2) {
          ++start;
          continue;
        }
        written(first, start);
        size_t end = start + 1;
        bool linked = false;
        for (; end < flat.size(); ++end) {
          Step& st = steps_[flat[end].first][flat[end].second];
          if (rows_of(st) != rows) break;
          const Shape& loop = program_of(st)->loop_shape();
          bool ok = true;
          for (int32_t r : st.io->reads) {
            if (produced_by[r] != static_cast<int32_t>(start)) continue;
            const Dims& rs = plan_.slots[r].shape;
            ok = ok && rs.size() == loop.size() && rs[0] == rows;
            linked = true;
          }
          if (!ok) break;
          written(st, start);
        }
        int64_t inner = 1;  // elements per row of the largest loop space
        for (size_t j = start; j < end; ++j)
          inner = std::max(inner, numel(program_of(steps_[flat[j].first][flat[j].second])->loop_shape()) / rows);
        if (end - start >= 2 && linked && rows * inner >= kRowGroupMinElems) {
          RowGroup g;
          g.rows = rows;
          for (size_t j = start; j < end; ++j) {
            g.steps.push_back(flat[j]);
            group_of[j] = static_cast<int>(groups_.size());
            Step& st = steps_[flat[j].first][flat[j].second];
            if (!st.program) st.program = std::move(as_program[&st]);
          }
          g.block_rows = std::max<int64_t>(1, kRowBlockElems / inner);
          if (log_fusion())
            std::fprintf(stderr,
                         "[sloth fusion] row group: %zu steps of kernels %zu..%zu over %lld rows, "
                         "%lld rows per block\n",
                         g.steps.size(), g.steps.front().first, g.steps.back().first,
                         static_cast<long long>(rows), static_cast<long long>(g.block_rows));
          groups_.push_back(std::move(g));
        }
        start = end;
      }
    }
    // The run order: steps, groups (at their first step), and kernel ends (releases).
    int last_group = -1;
    size_t j = 0;
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (size_t i = 0; i < steps_[k].size(); ++i, ++j) {
        if (group_of[j] < 0) {
          ops_.push_back({Op::kStep, k, i});
        } else if (group_of[j] != last_group) {
          last_group = group_of[j];
          ops_.push_back({Op::kGroup, k, i, group_of[j]});
        }
      }
      ops_.push_back({Op::kEndKernel, k, 0});
    }
  }

  // Steps that read only scalars (directly or through other such steps) and write small
  // values that are not plan outputs: a loss's backward seed (full, div, reshape, expand).
  // Their results are kept by the executable and reused while the scalars they read repeat
  // (every replay of a jitted step). Collective and other kernel-op steps are left out.
  void find_constant_steps() {
    std::vector<char> is_const(plan_.slots.size(), 0), plan_out(plan_.slots.size(), 0);
    for (int32_t o : plan_.outputs) plan_out[o] = 1;
    // Scratch lists reused from step to step: a wide program has one step per 32 outputs,
    // none of them constant, and should not allocate for each.
    std::vector<int32_t> ins, outs, scal;
    for (const Op& op : ops_) {
      if (op.kind != Op::kStep) continue;
      Step& st = steps_[op.k][op.i];
      if (st.kind == StepKind::kKernel) continue;
      if (st.io->instrs.empty() && st.instr < 0) continue;
      // Rejected first from the step's reads (what it reads and does not make, from
      // split_steps): a graph input, or a value no constant step made, is read by one of its
      // instructions and is none of their results, so the walk below would reject it too.
      // Most steps end here without visiting their instructions (a plan of 1e5 is ~10 MB).
      bool rejected = false;
      for (int32_t s : st.io->reads) {
        const SlotKind kind = plan_.slot_kind(s);
        rejected |= kind == SlotKind::kInput || (kind == SlotKind::kValue && !is_const[s]);
      }
      if (rejected) continue;
      ins.assign(st.io->instrs.begin(), st.io->instrs.end());
      if (st.instr >= 0) ins.push_back(st.instr);
      // A step reading a graph input is never constant: rejected before the lists below.
      bool reads_input = false;
      for (int32_t i : ins)
        for (int32_t s : plan_.instrs[i].in) reads_input |= plan_.slot_kind(s) == SlotKind::kInput;
      if (reads_input) continue;
      outs.clear();
      scal.clear();
      for (int32_t i : ins) outs.push_back(plan_.instrs[i].out);
      bool ok = true;
      for (int32_t i : ins)
        for (int32_t s : plan_.instrs[i].in) {
          const lazy::Slot& sl = plan_.slots[s];
          if (sl.kind == SlotKind::kScalar) {
            ok = ok && sl.index >= 0;
            scal.push_back(sl.index);
          } else if (sl.kind == SlotKind::kInput ||
                     (!is_const[s] && std::find(outs.begin(), outs.end(), s) == outs.end())) {
            ok = false;
          }
        }
      for (int32_t o : outs) {
        const lazy::Slot& sl = plan_.slots[o];
        ok = ok && !plan_out[o] &&
             static_cast<size_t>(numel(sl.shape)) * dtype_size(sl.dtype) <= BufferPool::kMaxBuffer;
      }
      if (!ok) continue;
      for (int32_t o : outs) is_const[o] = 1;
      st.const_index = static_cast<int32_t>(const_steps_.size());
      const_steps_.push_back(ConstStep{outs, std::vector<DeviceData>(outs.size())});
      for (int32_t x : scal)
        if (std::find(const_scalars_.begin(), const_scalars_.end(), x) == const_scalars_.end())
          const_scalars_.push_back(x);
    }
    const_scalar_vals_.assign(const_scalars_.size(), 0.0);
  }

  // The profiler's view of a step, computed once per executable.
  std::shared_ptr<const lazy::profiling::KernelInfo> profile_info(const Step& st) {
    std::lock_guard<std::mutex> l(prof_mu_);  // concurrent runs of one executable
    if (!st.prof) {
      if (materialized_.empty()) {
        for (const auto& ks : steps_)
          for (const Step& o : ks) materialized_.insert(o.io->reads.begin(), o.io->reads.end());
        materialized_.insert(plan_.outputs.begin(), plan_.outputs.end());
      }
      st.prof = describe_step(plan_, st.kind, st.program && st.kind == StepKind::kElementwise ? -1 : st.instr,
                              st.io->instrs, st.io->reads, materialized_);
    }
    return st.prof;
  }

  // Row groups (find_row_groups): loop spaces at least this large, blocks of about this
  // many elements per step (a few such arrays stay in a core's L2).
  static constexpr int64_t kRowGroupMinElems = 1 << 16;
  static constexpr int64_t kRowBlockElems = 1 << 14;
  struct RowGroup {
    std::vector<std::pair<size_t, size_t>> steps;  // (kernel, step) in run order
    int64_t rows = 0, block_rows = 1;
    mutable std::shared_ptr<const lazy::profiling::KernelInfo> prof;
  };
  std::shared_ptr<const lazy::profiling::KernelInfo> group_info(const RowGroup& g) {
    std::vector<std::shared_ptr<const lazy::profiling::KernelInfo>> parts;
    if (!g.prof)
      for (const auto& [k, i] : g.steps) parts.push_back(profile_info(steps_[k][i]));
    std::lock_guard<std::mutex> l(prof_mu_);
    if (!g.prof) g.prof = describe_group(parts);
    return g.prof;
  }
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
