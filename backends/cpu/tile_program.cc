// The tile program built from the lazy form: the form's steps become typed loops (the
// scalar-operand form of a binary op where one operand is a bound scalar), its scalars become
// constant registers, and the operands an output may overwrite in place are found.
#include <algorithm>
#include <limits>

#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/tile_program.h"

#include "backends/cpu/ew_codegen.h"
#include "core/settings.h"

namespace sloth::cpu {

// Elements per tile (SLOTH_TILE, core/settings.h).
const int64_t kTile = settings().tile;
// Scratch registers are kRegStride apart, not kRegBytes: at a power-of-two stride every
// register's tile falls into the same L1 sets (and so do the operand tiles, which share their
// offsets), and chains with many live registers missed L1 on set conflicts. The extra
// quarter tile plus one line staggers consecutive registers over the sets.
const int64_t kRegBytes = kTile * 8;
const int64_t kRegStride = kRegBytes + kTile * 2 + 64;
// How far ahead (in tiles) run_chunk prefetches operands (SLOTH_PREFETCH_TILES; 0: never).
const int64_t kPrefetchTiles = std::max<int64_t>(0, settings().prefetch_tiles);
// Outputs at least this large (all outputs of a run together) are written with streaming
// stores: about the size of the last-level cache share of one core.
// SLOTH_STREAM_MB sets it (0 or less: never stream).
const int64_t kStreamBytes = settings().stream_mb <= 0 ? std::numeric_limits<int64_t>::max()
                                                      : settings().stream_mb << 20;

namespace {

// The cores built so far, by form key (TileProgram::Core). Entries expire with the last
// program of their form; the map is swept of them as it doubles.
struct CoreCache {
  std::mutex mu;
  absl::flat_hash_map<std::string, std::weak_ptr<void>> by_key;
  size_t swept_at = 64;
};
CoreCache& core_cache() {
  static auto* c = new CoreCache();  // never destroyed: programs may outlive main
  return *c;
}

}  // namespace

TileProgram::Prepared TileProgram::prepare_form(const Plan& plan,
                                                const std::vector<int32_t>& instrs,
                                                const std::vector<int32_t>& materialize,
                                                const ProgramOptions& opt) {
  Prepared p;
  // Consecutive kernels of one form (an automatic flush's chain windows) reuse the form and
  // its key: the memo renames the last form's slots (lazy/ew_form.h).
  thread_local lazy::EwFormMemo memo;
  bool reused = false;
  p.form = std::make_shared<lazy::EwForm>(memo.build(plan, instrs, materialize, opt.reduce, &reused));
  if (!p.form->error.empty()) return p;
  // The key is built in a buffer the thread reuses (it is read by the constructor this
  // feeds, before the thread prepares another form). A reused form's key is the one built
  // last: every form the memo did not reuse had its key built here, or (an error, a fused
  // reduction) left the memo with nothing to reuse.
  thread_local std::string key;
  if (!reused) jit::tile_kernel_key(*p.form, &key);
  p.key = key;
  CoreCache& c = core_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.by_key.find(absl::string_view(p.key.data(), p.key.size()));
  if (it != c.by_key.end()) p.core = std::static_pointer_cast<Core>(it->second.lock());
  return p;
}

TileProgram::TileProgram(const Plan& plan, const std::vector<int32_t>& instrs,
                         const std::vector<int32_t>& materialize, const ProgramOptions& opt)
    : TileProgram(prepare_form(plan, instrs, materialize, opt), opt) {}

TileProgram::TileProgram(Prepared prep, const ProgramOptions& opt)
    : core_(prep.core ? prep.core : std::make_shared<Core>()) {
  using FormKind = lazy::EwForm::StepKind;
  std::shared_ptr<lazy::EwForm> form = std::move(prep.form);
  shape_ = form->shape;
  n_ = numel(shape_);
  if (opt.reduce) red_ = *opt.reduce;
  if (!form->error.empty()) {
    error_ = "cpu backend: " + form->error;
    return;
  }
  // This program's own lists: the plan slots its loads, scalars and outputs name (in the
  // form's order, which the core's indices follow).
  exts_.reserve(form->operands.size());
  outs_.reserve(form->outputs.size());
  for (const lazy::EwForm::Step& fs : form->steps) {
    if (fs.kind == FormKind::kScalar) consts_.push_back({fs.slot, fs.out});
    if (fs.kind == FormKind::kLoad) exts_.push_back({fs.slot, form->values[fs.out], fs.out});
  }
  for (const lazy::EwForm::Output& o : form->outputs) outs_.push_back({o.slot, o.value});
  // The core, unless a program of this form built it.
  if (prep.core == nullptr) build_core(*form, prep.key);
  form_ = std::move(form);
  // In-place candidates: operands dead after this program whose buffer an output may take
  // over. Safe only if every step reading the operand runs no later than the step that
  // writes the output (a tile is read before it is overwritten) and the read is in lockstep
  // (checked at run time: same dtype, same linear layout, nothing else holds the storage).
  // An operand loaded more than once (as two dtypes: `-a + 300` and `a.to(kFloat)` over a
  // uint8 `a`) is read from memory by each of its loads: the last read is the last one over
  // all of them, or an output written in place by an earlier step clobbers what a later load
  // of the same buffer reads.
  // The values loaded from `d` are found first (one or two), so the scan over the steps
  // compares each operand with those only (was every operand with every load: ~10k
  // instructions per program of an automatic flush's chain).
  absl::InlinedVector<int, 2> d_vals;
  for (int32_t d : opt.donatable) {
    d_vals.clear();
    for (const Ext& e : exts_)
      if (e.slot == d) d_vals.push_back(e.val);
    if (d_vals.empty()) continue;  // not an operand of this program: no donor
    int last = -1;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& st = steps_[k];
      bool reads = st.kind == Kind::kLoad && exts_[st.ext].slot == d;
      for (int i : st.in)
        for (size_t j = 0; j < d_vals.size() && !reads; ++j) reads = i >= 0 && i == d_vals[j];
      if (reads) last = static_cast<int>(k);
    }
    for (size_t e = 0; e < exts_.size(); ++e)
      if (exts_[e].slot == d) donors_.push_back({static_cast<int>(e), last});
  }
  jit_ = core_->jit;
  for (size_t es : out_es_) out_bytes_ += n_ * static_cast<int64_t>(es);
}

// The core of `form`'s programs (the first program of the form runs this; its slot lists are
// filled), then published under `key` for the next ones.
void TileProgram::build_core(const lazy::EwForm& form, std::string_view key) {
  using FormKind = lazy::EwForm::StepKind;
  // Every list sized once from the form (a wide program builds thousands of these).
  vals_.reserve(form.values.size());
  steps_.reserve(form.steps.size());
  load_steps_.reserve(form.operands.size());
  out_def_.reserve(form.outputs.size());
  out_es_.reserve(form.outputs.size());
  def_step_.assign(form.values.size(), -1);
  const_val_.assign(form.values.size(), 0);
  for (DType t : form.values) vals_.push_back({t});
  for (size_t o = 0; o < outs_.size(); ++o) vals_[outs_[o].val].out = static_cast<int>(o);
  int loads = 0;
  for (const lazy::EwForm::Step& fs : form.steps) {
    switch (fs.kind) {
      case FormKind::kScalar:
        const_val_[fs.out] = 1;
        break;
      case FormKind::kLoad: {
        Step ls{Kind::kLoad, fs.out};
        ls.ext = loads++;  // exts_ lists the loads in this order
        steps_.push_back(ls);
        break;
      }
      case FormKind::kConvert: {
        Step cs{Kind::kConvert, fs.out};
        cs.in[0] = fs.in[0];
        cs.conv = ew::conv_for(form.values[fs.in[0]], form.values[fs.out]);
        steps_.push_back(cs);
        break;
      }
      case FormKind::kOp: {
        Step st{Kind::kOp, fs.out};
        std::copy(std::begin(fs.in), std::end(fs.in), st.in);
        const DType a0 = fs.in[0] >= 0 ? form.values[fs.in[0]] : fs.compute;
        ew::Mode mode = ew::Mode::kVec;
        // A binary op with one scalar operand reads the scalar once (no tile of copies).
        if (op_category(fs.op) == OpCategory::Binary && st.in[0] != st.in[1]) {
          if (is_const_val(st.in[1]) && !is_const_val(st.in[0])) mode = ew::Mode::kVS;
          else if (is_const_val(st.in[0]) && !is_const_val(st.in[1])) mode = ew::Mode::kSV;
        }
        st.fn = ew::op_fn(fs.op, fs.compute, mode, a0);
        if (!st.fn && error_.empty())
          error_ = absl::StrFormat("cpu backend: %s has no loop", op_name(fs.op));
        steps_.push_back(st);
        def_step_[st.out] = static_cast<int>(steps_.size()) - 1;
        break;
      }
    }
  }
  sink_ = form.reduced;
  allocate_registers();
  for (size_t k = 0; k < steps_.size(); ++k)
    if (steps_[k].kind == Kind::kLoad) load_steps_.push_back(static_cast<int>(k));
    else ++compute_steps_;
  // Compiled layout: constants, loaded operands and stored values each own a register
  // (the compiled loop keeps everything else in machine registers).
  interp_regs_.assign(vals_.size(), -1);
  jit_regs_.assign(vals_.size(), -1);
  for (size_t v = 0; v < vals_.size(); ++v) {
    interp_regs_[v] = vals_[v].reg;
    if (vals_[v].reg >= 0 && (is_const(static_cast<int>(v)) || vals_[v].out >= 0 ||
                              static_cast<int>(v) == sink_))
      jit_regs_[v] = num_jit_regs_++;
  }
  for (int k : load_steps_) jit_regs_[steps_[k].out] = num_jit_regs_++;
  // One compile per form (its sizes aside): instances of a plan for new sizes share it.
  if (error_.empty()) core_->jit = jit::shared_slot(key);
  for (const Out& o : outs_) {
    out_def_.push_back(def_step_[o.val]);
    out_es_.push_back(dtype_size(vals_[o.val].dtype));
  }
  // Published for the next programs of this form (complete: it is not written again).
  if (!key.empty()) {
    CoreCache& c = core_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    c.by_key[std::string(key)] = core_;
    if (c.by_key.size() >= 2 * c.swept_at) {
      for (auto it = c.by_key.begin(); it != c.by_key.end();) {
        if (it->second.expired()) c.by_key.erase(it++);
        else ++it;
      }
      c.swept_at = std::max<size_t>(64, c.by_key.size());
    }
  }
}

// ---- dynamic shapes: the program at new sizes ----
TileProgram::TileProgram(const TileProgram& o, const Shape& shape, const Instr* reduce)
    : core_(o.core_),  // shared: only the sizes below are this copy's own
      exts_(o.exts_), consts_(o.consts_), outs_(o.outs_), donors_(o.donors_), form_(o.form_),
      shape_(shape), red_(reduce ? *reduce : o.red_), n_(numel(shape)),
      jit_(o.jit_), runs_(o.runs_.load(std::memory_order_relaxed)) {
  for (size_t es : out_es_) out_bytes_ += n_ * static_cast<int64_t>(es);
}

std::unique_ptr<ElementwiseProgram> TileProgram::resized(const Shape& shape,
                                                         const Instr* reduce) const {
  return std::unique_ptr<ElementwiseProgram>(new TileProgram(*this, shape, reduce));
}
// ---- end of dynamic shapes ----

std::unique_ptr<ElementwiseProgram> compile_elementwise(const Plan& plan,
                                                        const std::vector<int32_t>& instrs,
                                                        const std::vector<int32_t>& materialize,
                                                        const ProgramOptions& options) {
  return std::make_unique<TileProgram>(plan, instrs, materialize, options);
}

}  // namespace sloth::cpu
