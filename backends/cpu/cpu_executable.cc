#include "backends/cpu/cpu_executable.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_format.h"
#include "backends/cpu/fused_reduce_rule.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/profile_info.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "core/float_env.h"
#include "core/error.h"
#include "core/settings.h"

namespace sloth::cpu {

using lazy::SlotKind;
using lazy::StepKind;

CpuExecutable::CpuExecutable(std::shared_ptr<const Plan> plan)
    : plan_holder_(std::move(plan)), plan_(*plan_holder_) {
  compile();
}

CpuExecutable::CpuExecutable(const CpuExecutable& base, Plan&& plan)
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

absl::Status CpuExecutable::run_bound(absl::Span<const DeviceData> shared, absl::Span<DeviceData> owned,
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
      if (env.compiled_runs > 0) jit::note_compiled_run(env.compiled_runs, env.direct_calls);
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
  env.direct_calls = 0;
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
      ++env.stats->frozen_runs;
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


absl::Status CpuExecutable::hand_out(Env& env, std::vector<DeviceData>* outputs) {
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
      lazy::move_data((*outputs)[o], env.vals[s]);
    } else {
      lazy::assign_data((*outputs)[o], d);
    }
  }
  return absl::OkStatus();
}


// ---- distributed ----
absl::Status CpuExecutable::settle_pending(Env& env, const Step& st) {
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
absl::Status CpuExecutable::finish_pending(Env& env, size_t n) {
  absl::Status first = absl::OkStatus();
  for (size_t j = 0; j < n; ++j) {
    absl::Status st = env.pending[j].write->finish();
    if (first.ok()) first = st;
  }
  env.pending.erase(env.pending.begin(), env.pending.begin() + static_cast<ptrdiff_t>(n));
  return first;
}

absl::Status CpuExecutable::execute(Env& env, const Step& st) {
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

absl::Status CpuExecutable::view_step(Env& env, const Step& st, const Instr& in) {
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

void CpuExecutable::compile() {
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

std::shared_ptr<const lazy::profiling::KernelInfo> CpuExecutable::profile_info(const Step& st) {
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

std::shared_ptr<const lazy::profiling::KernelInfo> CpuExecutable::group_info(const RowGroup& g) {
  std::vector<std::shared_ptr<const lazy::profiling::KernelInfo>> parts;
  if (!g.prof)
    for (const auto& [k, i] : g.steps) parts.push_back(profile_info(steps_[k][i]));
  std::lock_guard<std::mutex> l(prof_mu_);
  if (!g.prof) g.prof = describe_group(parts);
  return g.prof;
}

}  // namespace sloth::cpu
