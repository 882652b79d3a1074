// The CPU backend: compiles a Plan into a list of steps per kernel (elementwise runs become
// tile-interpreter programs; everything else is one kernel call), runs them against bound
// data and releases each intermediate after its last use so its Storage goes back to the
// caching allocator. Registers itself for DeviceType::kCPU at static-init time.
#include <algorithm>
#include <atomic>
#include <limits>
#include <cstring>
#include <set>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "lazy/steps.h"
#include "core/error.h"

namespace sloth::cpu {

using lazy::SlotKind;

DeviceData Env::alloc(const Shape& shape, DType dtype) {
  DeviceData d = lazy::allocate_data(cpu_allocator(), shape, dtype);
  stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
  return d;
}

DeviceData& Env::alloc_to(int slot, const Shape& shape, DType dtype) {
  DeviceData& d = vals[slot];
  int64_t ne = 1;
  for (int64_t v : shape) ne *= v;
  const size_t bytes = std::max<size_t>(static_cast<size_t>(ne) * dtype_size(dtype), 1);
  d.storage = make_ref<Storage>(cpu_allocator(), bytes);
  stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
  d.layout.shape.assign(shape.begin(), shape.end());
  d.layout.strides.resize(shape.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    d.layout.strides[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  d.layout.offset = 0;
  d.dtype = dtype;
  return d;
}

double cast_scalar(double v, DType dtype) {
  return visit_dtype(dtype, [&](auto z) {
    return static_cast<double>(static_cast<decltype(z)>(v));
  });
}

double read_double(const DeviceData& d) {
  return visit_dtype(d.dtype, [&](auto z) { return static_cast<double>(*d.data<decltype(z)>()); });
}

double Env::scalar(int slot) {
  const lazy::Slot& s = plan->slots[slot];
  if (s.kind == SlotKind::kScalar) return cast_scalar(scalars[s.index], s.dtype);
  return read_double(vals[slot]);
}

const DeviceData& Env::get(int slot) {
  if (!has(slot) && plan->slots[slot].kind == SlotKind::kScalar) {
    const lazy::Slot& s = plan->slots[slot];
    DeviceData d = alloc({}, s.dtype);
    double v = scalars[s.index];
    visit_dtype(s.dtype, [&](auto z) { *d.data<decltype(z)>() = static_cast<decltype(z)>(v); });
    vals[slot] = std::move(d);
  }
  return vals[slot];
}

namespace {

using lazy::StepKind;

struct Step {
  StepKind kind;
  int32_t instr = -1;                        // single-instruction steps
  std::unique_ptr<ElementwiseProgram> program;  // kElementwise and kFusedReduce
  std::vector<int32_t> reads;                // slots read from outside the step
  // kView: the layouts of the last run (valid while the input layout repeats).
  mutable bool view_cached = false;
  mutable DType view_in_dtype = DType::kFloat32;
  mutable Layout view_in, view_out;
};

// Index in kern.instrs of a reduction whose elementwise prologue (every instruction before
// it, all over the reduction's input shape, computing its operand) can run inside the
// reduction loop; 0 when the kernel takes the unfused path. The reduced dims must be the
// trailing ones so that each output reduces one contiguous stretch of the row-major order.
int fusable_reduce(const Plan& plan, const lazy::Kernel& kern) {
  if (kern.kind != lazy::KernelKind::kReduce) return 0;
  int anchor = -1;
  for (size_t j = 0; j < kern.instrs.size(); ++j)
    if (op_info(plan.instrs[kern.instrs[j]].op).category == OpCategory::Reduce) {
      anchor = static_cast<int>(j);
      break;
    }
  if (anchor <= 0) return 0;
  const Instr& r = plan.instrs[kern.instrs[anchor]];
  if (r.op != OpId::kSum && r.op != OpId::kProd && r.op != OpId::kAmax && r.op != OpId::kAmin)
    return 0;
  const Shape& xs = plan.slots[r.in[0]].shape;
  bool produced = false;
  for (int j = 0; j < anchor; ++j) {
    const Instr& p = plan.instrs[kern.instrs[j]];
    if (!is_elementwise(p.op) || p.shape != xs) return 0;
    produced |= p.out == r.in[0];
  }
  if (!produced) return 0;
  const int64_t nd = static_cast<int64_t>(xs.size());
  std::vector<int64_t> dims(r.attrs.dims.begin(), r.attrs.dims.end());
  if (dims.empty()) return anchor;  // everything
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  for (size_t j = 0; j < dims.size(); ++j)
    if (dims[j] != nd - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(j)) return 0;
  return anchor;
}

class CpuExecutable final : public lazy::Executable {
 public:
  explicit CpuExecutable(const Plan& plan) : plan_(plan) { compile(); }

  absl::Status run(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                   std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    return run_bound(inputs, {}, scalars, outputs, stats);
  }
  absl::Status run_donating(absl::Span<DeviceData> inputs, absl::Span<const double> scalars,
                            std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    return run_bound({}, inputs, scalars, outputs, stats);
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
    Env local_env;
    Env& env = mine ? env_ : local_env;
    if (!mine) env.vals.resize(plan_.slots.size());
    struct Done {
      Env& env;
      std::atomic<bool>* busy;
      ~Done() {
        // Drop every reference (inputs too: a later donation check must not see them).
        for (DeviceData& d : env.vals) d.storage.reset();
        if (busy) busy->store(false, std::memory_order_release);
      }
    } done{env, mine ? &busy_ : nullptr};
    const size_t num_inputs = shared.size() + owned.size();
    lazy::RunStats local;
    env.plan = &plan_;
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
    for (int32_t s : input_slots_) {
      const int32_t i = plan_.slots[s].index;
      DeviceData& d = env.vals[s];
      if (owned.empty()) {
        env.set_view(s, shared[i]);
      } else {
        d.storage = std::move(owned[i].storage);
        d.layout.shape = owned[i].layout.shape;
        d.layout.strides = owned[i].layout.strides;
        d.layout.offset = owned[i].layout.offset;
        d.dtype = owned[i].dtype;
      }
    }
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (const Step& st : steps_[k]) {
        for (int32_t r : st.reads)
          if (!env.has(r) && plan_.slots[r].kind != SlotKind::kScalar)
            return absl::InternalError(absl::StrFormat(
                "cpu backend: kernel %d reads slot %d before it is computed", k, r));
        SLOTH_RETURN_IF_ERROR(execute(env, st));
      }
      if (!steps_[k].empty()) ++env.stats->kernels_launched;
      for (int32_t s : release_[k]) env.vals[s].storage.reset();
    }
    outputs->clear();
    outputs->reserve(plan_.outputs.size());
    for (int32_t s : plan_.outputs) {
      const DeviceData& d = env.get(s);
      if (!d.storage)
        return absl::InternalError(absl::StrFormat("cpu backend: output slot %d was never computed", s));
      outputs->push_back(d);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status execute(Env& env, const Step& st) {
    if (st.program) return st.program->run(env);
    const Instr& in = plan_.instrs[st.instr];
    switch (st.kind) {
      case StepKind::kReduce: return run_reduce(env, in);
      case StepKind::kMatmul: return run_matmul(env, in);
      case StepKind::kView: return view_step(env, st, in);
      case StepKind::kScatter: return run_scatter(env, in);
      case StepKind::kFactory: return run_factory(env, in);
      default: return run_index(env, in);
    }
  }

  // A view of the same input layout gives the same output layout every run: the first run
  // computes it (run_view), later ones copy it (no view lowering, no allocation).
  absl::Status view_step(Env& env, const Step& st, const Instr& in) {
    const DeviceData& x = env.get(in.in[0]);
    if (st.view_cached && x.dtype == st.view_in_dtype && x.layout.offset == st.view_in.offset &&
        x.layout.shape == st.view_in.shape && x.layout.strides == st.view_in.strides) {
      DeviceData& o = env.vals[in.out];
      o.storage = x.storage;
      o.layout.shape = st.view_out.shape;
      o.layout.strides = st.view_out.strides;
      o.layout.offset = st.view_out.offset;
      o.dtype = x.dtype;
      return absl::OkStatus();
    }
    SLOTH_RETURN_IF_ERROR(run_view(env, in));
    const DeviceData& o = env.vals[in.out];
    if (o.storage == x.storage && o.dtype == x.dtype) {  // a true view, not a copy
      st.view_cached = true;
      st.view_in = x.layout;
      st.view_in_dtype = x.dtype;
      st.view_out = o.layout;
    } else {
      st.view_cached = false;
    }
    return absl::OkStatus();
  }

  void compile() {
    for (size_t s = 0; s < plan_.slots.size(); ++s) {
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
    std::set<int32_t> plan_out(plan_.outputs.begin(), plan_.outputs.end());
    // Execution position of every instruction (kernels run in order, and the steps of a
    // kernel follow its instruction order) and the last position reading each slot: a step
    // may hand a dead operand's buffer to its output (see ProgramOptions::donatable).
    std::vector<int32_t> pos(plan_.instrs.size(), 0);
    {
      int32_t p = 0;
      for (size_t k = 0; k < nk; ++k)
        for (int32_t i : plan_.kernels[k].instrs) pos[i] = p++;
    }
    std::vector<int32_t> last_pos(plan_.slots.size(), -1);
    for (size_t i = 0; i < plan_.instrs.size(); ++i)
      for (int32_t s : plan_.instrs[i].in) last_pos[s] = std::max(last_pos[s], pos[i]);
    auto donatable = [&](const std::vector<int32_t>& reads, int32_t end_pos) {
      std::vector<int32_t> d;
      for (int32_t s : reads)
        if ((plan_.slots[s].kind == SlotKind::kValue || plan_.slots[s].kind == SlotKind::kInput) &&
            !plan_out.count(s) && last_pos[s] <= end_pos)
          d.push_back(s);
      return d;
    };

    lazy::StepPlan sp = lazy::split_steps(plan_, &fusable_reduce);
    steps_.resize(nk);
    release_ = std::move(sp.release);
    for (size_t k = 0; k < nk; ++k)
      for (lazy::PlanStep& ps : sp.kernels[k]) {
        Step st{ps.kind};
        st.instr = ps.instr;
        if (ps.kind == StepKind::kElementwise || ps.kind == StepKind::kFusedReduce) {
          ProgramOptions opt;
          // Prologue + reduction in one pass: the reduced input is never written to memory.
          if (ps.kind == StepKind::kFusedReduce) opt.reduce = &plan_.instrs[ps.instr];
          else opt.donatable = donatable(ps.reads, pos[ps.instrs.back()]);
          st.program = compile_elementwise(plan_, ps.instrs, ps.materialize, opt);
        }
        st.reads = std::move(ps.reads);
        steps_[k].push_back(std::move(st));
      }
  }

  Plan plan_;  // owned: the scheduler may drop its plan while keeping the executable
  std::vector<std::vector<Step>> steps_;
  std::vector<std::vector<int32_t>> release_;
  std::vector<int32_t> input_slots_;
  int32_t max_input_ = -1, max_scalar_ = -1;
  Env env_;  // per-run slot table, reused
  std::atomic<bool> busy_{false};
};

class CpuBackend final : public lazy::Backend {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator* allocator() override { return cpu_allocator(); }
  std::unique_ptr<lazy::Executable> compile(const Plan& plan) override {
    return std::make_unique<CpuExecutable>(plan);
  }
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
