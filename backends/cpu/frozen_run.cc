// See frozen_run.h.
#include "backends/cpu/frozen_run.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "absl/strings/str_format.h"
#include "backends/cpu/compiled_call.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/strided.h"
#include "core/error.h"

namespace sloth::cpu {

using lazy::SlotKind;
using lazy::StepKind;

namespace {

// Intermediates beyond this many bytes in all keep an executable on the normal path: a frozen
// run pays off for small steps (binding costs as much as computing), and a big graph's
// intermediates are better shared with other executables through the caching allocator.
constexpr size_t kMaxArena = size_t{1} << 20;
constexpr size_t kAlign = 64;

const char* kind_name(StepKind k) {
  switch (k) {
    case StepKind::kScatter: return "scatter";
    case StepKind::kIndex: return "index";
    case StepKind::kFactory: return "factory";
    case StepKind::kKernel: return "kernel-op";
    default: return "other";
  }
}

// First-fit over freed blocks (a step's handful of intermediates), else the top grows.
class ArenaPlanner {
 public:
  size_t take(size_t bytes) {
    bytes = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].size >= bytes && (best == free_.size() || free_[i].size < free_[best].size))
        best = i;
    if (best == free_.size()) {
      const size_t off = top_;
      top_ += bytes;
      return off;
    }
    Block& b = free_[best];
    const size_t off = b.off;
    b.off += bytes;
    b.size -= bytes;
    if (b.size == 0) free_.erase(free_.begin() + static_cast<ptrdiff_t>(best));
    return off;
  }
  void give(size_t off, size_t bytes) {
    free_.push_back({off, (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign});
  }
  size_t top() const { return top_; }

 private:
  struct Block {
    size_t off, size;
  };
  std::vector<Block> free_;
  size_t top_ = 0;
};

}  // namespace

std::unique_ptr<FrozenRun> FrozenRun::build(Env& env, uint64_t layout_gen,
                                            absl::Span<const StepRef> steps,
                                            const RunReleases& releases,
                                            const std::vector<int32_t>& last_read,
                                            std::string* why) {
  const Plan& plan = *env.plan;
  const size_t ns = plan.slots.size();
  auto fail = [&](std::string reason) -> std::unique_ptr<FrozenRun> {
    *why = std::move(reason);
    return nullptr;
  };
  std::unique_ptr<FrozenRun> f(new FrozenRun());
  f->plan_ = &plan;
  // What holds each slot's data: an input, a kept constant, a value this run computes, or a
  // view (of its root's buffer).
  enum Cls : uint8_t { kNone, kIn, kConst, kComputed, kView, kStepOut };
  std::vector<uint8_t> cls(ns, kNone);
  std::vector<int32_t> root(ns);
  std::iota(root.begin(), root.end(), 0);
  for (size_t s = 0; s < ns; ++s)
    if (plan.slot_kind(static_cast<int32_t>(s)) == SlotKind::kInput) {
      cls[s] = kIn;
      f->input_slots_.push_back(static_cast<int32_t>(s));
    }
  // Per step: the thunk and the slots it computes, with their donation candidates.
  struct Made {
    Thunk thunk;
    int32_t kernel, end_pos;
    std::vector<int32_t> outs;
    std::vector<std::vector<int32_t>> donors;
  };
  std::vector<Made> made;
  made.reserve(steps.size());
  std::vector<int32_t> reads, outs;
  std::vector<std::vector<int32_t>> donors;
  auto readable = [&](int32_t s) { return cls[s] != kNone; };
  // Roots a kStep reads: their arena blocks are never reused (the step's result may view them).
  std::vector<char> pinned(ns, 0);
  // A step run as in the normal run: its reads bound through the slot table.
  auto as_step = [&](const StepRef& st, int32_t index, Made* m) -> bool {
    if (st.instr == nullptr || st.reads == nullptr || st.kind == StepKind::kKernel) return false;
    m->thunk = Thunk{Kind::kStep, st.instr->out};
    m->thunk.index = index;
    m->thunk.reads_begin = static_cast<int32_t>(f->step_reads_.size());
    for (int32_t r : *st.reads) {
      if (plan.slot_kind(r) == SlotKind::kScalar) {
        f->scrub_.push_back(r);  // a kernel asking for it in memory gets a 0-dim buffer
        continue;
      }
      if (!readable(r)) return false;
      f->step_reads_.push_back({.slot = r, .root = root[r], .normal_offset = env.vals[r].layout.offset});
      pinned[root[r]] = 1;
    }
    m->thunk.reads_end = static_cast<int32_t>(f->step_reads_.size());
    cls[st.instr->out] = kStepOut;
    f->scrub_.push_back(st.instr->out);
    return true;
  };
  auto computed = [&](int32_t s) -> bool {
    const DeviceData& d = env.vals[s];
    // A value at offset 0 of a contiguous buffer of its own (what alloc_to makes); one the
    // last run left at another offset (taken over from a view) is not frozen.
    if (d.layout.offset != 0 || !d.is_contiguous()) return false;
    cls[s] = kComputed;
    return true;
  };
  int32_t last_kernel = -1;
  for (size_t index = 0; index < steps.size(); ++index) {
    const StepRef& st = steps[index];
    if (st.kernel != last_kernel) ++f->kernels_;
    last_kernel = st.kernel;
    Made m{Thunk{Kind::kView}, st.kernel, st.end_pos, {}, {}};
    if (st.const_outs != nullptr) {
      for (size_t j = 0; j < st.const_outs->size(); ++j) {
        const int32_t s = (*st.const_outs)[j];
        if (!(*st.const_vals)[j].storage) return fail("a constant step holds no value");
        cls[s] = kConst;
        Made c{Thunk{Kind::kConst, s}, st.kernel, st.end_pos, {}, {}};
        c.thunk.src = &(*st.const_vals)[j];
        made.push_back(std::move(c));
      }
      continue;
    }
    switch (st.kind) {
      case StepKind::kView: {
        const int32_t in = st.instr->in[0], out = st.instr->out;
        if (!st.true_view || !readable(in)) {  // a copy
          if (!as_step(st, static_cast<int32_t>(index), &m)) return fail("a view step copies a bound scalar");
          break;
        }
        root[out] = root[in];
        cls[out] = kView;
        m.thunk = Thunk{Kind::kView, out, in};
        // From the step's own record: env.vals holds this run's inputs already.
        m.thunk.delta = st.view_delta;
        break;
      }
      case StepKind::kElementwise:
      case StepKind::kFusedReduce: {
        if (st.program == nullptr || !st.program->frozen_ready(layout_gen))
          return fail("an elementwise program was bound for other layouts");
        st.program->frozen_io(&reads, &outs, &donors);
        for (int32_t r : reads)
          if (!readable(r)) return fail("an elementwise program reads a bound scalar from memory");
        for (int32_t o : outs)
          if (!computed(o)) return fail("an elementwise result is not a buffer of its own");
        m.thunk = Thunk{Kind::kTile};
        m.thunk.program = st.program;
        if (CompiledCall c; st.program->compiled_call(&c)) {
          m.thunk.kind = Kind::kCall;
          m.thunk.index = static_cast<int32_t>(f->calls_.size());
          f->calls_.push_back(std::move(c));
        }
        m.outs = outs;
        m.donors = donors;
        break;
      }
      case StepKind::kMatmul: {
        BoundGemm g;
        if (!bind_gemm(env, *st.instr, &g) || !readable(st.instr->in[0]) ||
            !readable(st.instr->in[1]) || !computed(st.instr->out)) {
          if (!as_step(st, static_cast<int32_t>(index), &m)) return fail("a matmul reads a bound scalar");
          break;
        }
        m.thunk = Thunk{Kind::kGemm, st.instr->out, st.instr->in[0], st.instr->in[1]};
        m.thunk.index = static_cast<int32_t>(f->gemms_.size());
        f->gemms_.push_back(g);
        m.outs = {st.instr->out};
        m.donors.emplace_back();
        break;
      }
      case StepKind::kReduce: {
        BoundReduce r;
        if (!readable(st.instr->in[0]) || !bind_reduce(env, *st.instr, &r) ||
            !computed(st.instr->out)) {
          if (!as_step(st, static_cast<int32_t>(index), &m)) return fail("a reduction reads a bound scalar");
          break;
        }
        m.thunk = Thunk{Kind::kReduce, st.instr->out, st.instr->in[0]};
        m.thunk.index = static_cast<int32_t>(f->reduces_.size());
        f->reduces_.push_back(std::move(r));
        m.outs = {st.instr->out};
        m.donors.emplace_back();
        break;
      }
      default:
        if (!as_step(st, static_cast<int32_t>(index), &m))
          return fail(absl::StrFormat("a %s step", kind_name(st.kind)));
    }
    made.push_back(std::move(m));
  }

  // Values handed out (plan outputs, and what an output views) get a buffer per run.
  std::vector<char> fresh(ns, 0), is_out(ns, 0);
  for (int32_t o : plan.outputs) {
    is_out[o] = 1;
    const int32_t r = root[o];
    if (cls[r] == kNone) return fail("an output is not computed by the plan");
    if (cls[r] == kConst) return fail("an output views a kept constant");
    if (cls[r] == kComputed) fresh[r] = 1;
    if (o != r) f->output_views_.emplace_back(o, r);
  }
  for (Made& m : made)
    if (m.thunk.kind == Kind::kStep) {
      for (int32_t o : plan.outputs) m.thunk.escapes |= root[o] == m.thunk.out;
    }
  // An input's buffer may go to a fresh value only once every view of it is dead (the normal
  // run sees such a view's reference and does not donate): the last read of its views.
  std::vector<int32_t> view_read(ns, -1);
  for (size_t s = 0; s < ns; ++s)
    if (cls[s] == kView)
      view_read[root[s]] = std::max(view_read[root[s]],
                                    is_out[s] ? std::numeric_limits<int32_t>::max() : last_read[s]);

  // Arena offsets by lifetime: a computed value's block is free once it and every view of it
  // are released (the executable's release lists, kernel by kernel).
  ArenaPlanner arena;
  std::vector<int64_t> arena_off(ns, -1);
  std::vector<int32_t> live(ns, 0);
  auto bytes_of = [&](int32_t s) {
    return static_cast<size_t>(numel(plan.slots[s].shape)) * dtype_size(env.vals[s].dtype);
  };
  const auto& release = releases.release();
  size_t next_release = 0;
  auto release_through = [&](size_t k_end) {  // kernels [next_release, k_end)
    for (; next_release < k_end && next_release < release.size(); ++next_release)
      for (int32_t s : release[next_release]) {
        const int32_t r = root[s];
        if (cls[r] != kComputed || fresh[r] || arena_off[r] < 0 || pinned[r]) continue;
        if (--live[r] == 0) arena.give(static_cast<size_t>(arena_off[r]), bytes_of(r));
      }
  };
  for (Made& m : made) {
    release_through(static_cast<size_t>(m.kernel));
    if (m.thunk.kind == Kind::kView) {
      const int32_t r = root[m.thunk.out];
      if (cls[r] == kComputed) ++live[r];
    }
    for (size_t j = 0; j < m.outs.size(); ++j) {
      const int32_t s = m.outs[j];
      if (fresh[s]) {
        Thunk t{Kind::kFresh, s};
        std::vector<int32_t> ok;
        for (int32_t d : m.donors[j])
          if (cls[d] == kIn && !is_out[d] && view_read[d] <= m.end_pos) ok.push_back(d);
        if (!ok.empty()) {
          t.index = static_cast<int32_t>(f->donors_.size());
          f->donors_.push_back(std::move(ok));
        }
        f->thunks_.push_back(t);
        f->fresh_.push_back(s);
      } else {
        arena_off[s] = static_cast<int64_t>(arena.take(bytes_of(s)));
        live[s] = 1;
      }
    }
    f->thunks_.push_back(m.thunk);
  }
  if (arena.top() > kMaxArena)
    return fail(absl::StrFormat("its intermediates take %d bytes (at most %d are frozen)",
                                arena.top(), kMaxArena));
  f->arena_bytes_ = arena.top();
  f->ptr_.assign(ns, nullptr);
  f->in_arena_.assign(ns, 0);
  if (f->arena_bytes_ > 0) {
    // A Storage, so a step run through the slot table can see an arena value as a view of it.
    f->arena_ = make_ref<Storage>(cpu_allocator(), f->arena_bytes_);
    char* base = static_cast<char*>(f->arena_->data());
    for (size_t s = 0; s < ns; ++s)
      if (arena_off[s] >= 0) {
        f->ptr_[s] = base + arena_off[s];
        f->in_arena_[s] = 1;
      }
  }
  // What a kStep binds for each read: the root's buffer (arena, kept constant, or the slot
  // table's) unless the read is a slot holding its own buffer there already.
  for (StepRead& r : f->step_reads_) {
    const uint8_t c = cls[r.root];
    r.own = r.slot == r.root && (c == kIn || c == kStepOut || (c == kComputed && fresh[r.root]));
    if (c == kConst)
      for (const Thunk& t : f->thunks_)
        if (t.kind == Kind::kConst && t.out == r.root) r.const_src = t.src;
  }
  return f;
}

void FrozenRun::bind_read(Env& env, const StepRead& r) {
  DeviceData& d = env.vals[r.slot];
  const Storage* buf = in_arena_[r.root] ? arena_.get()
                       : r.const_src        ? r.const_src->storage.get()
                                            : env.vals[r.root].storage.get();
  d.storage = StoragePtr(const_cast<Storage*>(buf));
  d.layout.offset = (ptr_[r.slot] - static_cast<char*>(buf->data())) /
                    static_cast<int64_t>(dtype_size(d.dtype));
}

absl::Status FrozenRun::run_step(Env& env, const Thunk& t, StepExec exec) {
  for (int32_t j = t.reads_begin; j < t.reads_end; ++j)
    if (!step_reads_[j].own) bind_read(env, step_reads_[j]);
  absl::Status st = exec(t.index);
  for (int32_t j = t.reads_begin; j < t.reads_end; ++j) {
    const StepRead& r = step_reads_[j];
    if (r.own) continue;
    DeviceData& d = env.vals[r.slot];
    d.storage.reset();  // no reference left: a later donation check must not see it
    d.layout.offset = r.normal_offset;
  }
  SLOTH_RETURN_IF_ERROR(st);
  DeviceData& o = env.vals[t.out];
  // A result viewing the arena is rewritten by the next run: one handed out is copied.
  if (t.escapes && o.storage && o.storage.get() == arena_.get())
    o = make_contiguous(env, o, o.dtype);
  ptr_[t.out] = o.storage ? ptr(o) : nullptr;
  return absl::OkStatus();
}

absl::Status FrozenRun::run(Env& env, StepExec exec) {
  char** p = ptr_.data();
  for (int32_t s : input_slots_) {
    const DeviceData& d = env.vals[s];
    p[s] = d.storage ? ptr(d) : nullptr;
  }
  for (const Thunk& t : thunks_) {
    switch (t.kind) {
      case Kind::kView:
        p[t.out] = p[t.a] + t.delta;
        break;
      case Kind::kConst:
        p[t.out] = ptr(*t.src);
        break;
      case Kind::kFresh: {
        DeviceData& o = env.vals[t.out];
        bool taken = false;
        if (t.index >= 0)
          for (int32_t d : donors_[t.index]) {
            DeviceData& x = env.vals[d];
            if (x.storage && x.layout.offset == 0 && x.storage->use_count() == 1) {
              o.storage = std::move(x.storage);  // the input is dead: written in place
              taken = true;
              break;
            }
          }
        if (!taken) env.alloc_to(t.out, plan_->slots[t.out].shape, o.dtype);
        p[t.out] = ptr(o);
        break;
      }
      case Kind::kTile:
        t.program->run_frozen(env, p);
        break;
      case Kind::kCall: {
        CompiledCall& c = calls_[t.index];
        if (c.fn == nullptr) c.fn = t.program->compiled_fn();  // compiled since the last run?
        if (c.fn == nullptr || jit::mode() == jit::Mode::kOff) {
          t.program->run_frozen(env, p);
          break;
        }
        c.run(env, p);
        ++env.compiled_runs;
        ++env.direct_calls;
        break;
      }
      case Kind::kGemm:
        run_gemm(gemms_[t.index], p[t.a], p[t.b], p[t.out]);
        break;
      case Kind::kReduce: {
        const BoundReduce& r = reduces_[t.index];
        r.fn(r.geometry.get(), p[t.a], p[t.out]);
        break;
      }
      case Kind::kStep:
        SLOTH_RETURN_IF_ERROR(run_step(env, t, exec));
        break;
    }
  }
  for (const auto& [o, r] : output_views_) env.vals[o].storage = env.vals[r].storage;
  return absl::OkStatus();
}

void FrozenRun::finish(Env& env) {
  for (int32_t s : fresh_) {
    if (env.pool != nullptr) env.pool->give(env.vals[s].storage);
    else env.vals[s].storage.reset();
  }
  for (int32_t s : scrub_) {
    if (env.pool != nullptr) env.pool->give(env.vals[s].storage);
    else env.vals[s].storage.reset();
  }
  for (const auto& [o, r] : output_views_) env.vals[o].storage.reset();
  for (int32_t s : input_slots_) env.vals[s].storage.reset();
}

}  // namespace sloth::cpu
