#include "lazy/ew_form.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/ew_semantics_text.h"

namespace sloth::lazy {

// A condition operand (where's) is read as bool; the op computes in the type of the values.
DType compute_dtype(const Instr& in) {
  return operand_dtype(in, op_info(in.op).facts.operands == Operands::kBoolCondition ? 1 : 0);
}

namespace {

// What build_ew_form knows of each plan slot while it builds one form, in a small per-thread
// open-addressing table keyed by slot: entries are valid where `tag` is the current build's,
// so nothing is cleared or allocated per form. A wide plan builds thousands of forms (one per
// kernel of 32 siblings), and four hash maps per form were ~17% of planning a 1e5-node graph
// (their allocations and hashing). A table indexed by slot instead would span every slot of
// the plan (megabytes on a 1e5-node plan: cache misses); this one holds one form's few
// hundred slots and stays in cache.
struct SlotEntry {
  uint32_t tag = 0;
  int32_t slot = -1;
  int internal = -1;  // the value computed here for the slot
  int loaded = -1;    // the slot's first read from outside, as loaded_dtype (others: extra)
  int operand = -1;   // index in f.operands
  DType loaded_dtype = DType::kFloat32;
  bool wanted = false;  // in `materialize`
};
struct FormScratch {
  std::vector<SlotEntry> table;  // a power of two, at least twice the slots of a form
  uint32_t tag = 0;
  // Rare cases, searched linearly: a slot read from outside in a second dtype, a value
  // converted to a second dtype.
  std::vector<std::tuple<int32_t, DType, int>> extra_loads;
  std::vector<int> converted;  // per value: its first conversion (-1: none)
  std::vector<std::tuple<int, DType, int>> extra_converts;
  // Starts a build that names at most `max_slots` distinct slots: every entry reads as free.
  void begin(size_t max_slots) {
    size_t want = 64;
    while (want < 2 * max_slots) want *= 2;
    if (table.size() < want) {
      table.assign(want, SlotEntry{});
      tag = 0;
    }
    if (++tag == 0) {  // wrapped: old tags could read as current
      for (SlotEntry& e : table) e.tag = 0;
      tag = 1;
    }
    extra_loads.clear();
    converted.clear();
    extra_converts.clear();
  }
  // The slot's entry, made fresh on its first use in this build.
  SlotEntry& at(int32_t slot) {
    const size_t mask = table.size() - 1;
    for (size_t i = (static_cast<uint32_t>(slot) * 0x9e3779b1u) & mask;; i = (i + 1) & mask) {
      SlotEntry& e = table[i];
      if (e.tag != tag) {
        e = SlotEntry{tag, slot};
        return e;
      }
      if (e.slot == slot) return e;
    }
  }
};

}  // namespace

EwForm build_ew_form(const Plan& plan, const std::vector<int32_t>& instrs,
                     const std::vector<int32_t>& materialize, const Instr* reduce) {
  using Kind = EwForm::StepKind;
  EwForm f;
  if (reduce != nullptr) f.shape = plan.slots[reduce->in[0]].shape.to_shape();
  else if (!instrs.empty()) f.shape = plan.instrs[instrs.back()].shape.to_shape();
  // Sized once from the instruction count (each instruction reads at most 3 operands; a
  // kernel has at most 128 instructions): the lists do not regrow while filling.
  size_t reads = 0;
  for (int32_t ii : instrs) reads += plan.instrs[ii].in.size();
  thread_local FormScratch x;
  // The slots named: operands, outputs, materialized ones and the reduction's input.
  x.begin(reads + instrs.size() + materialize.size() + 1);
  for (int32_t s : materialize) x.at(s).wanted = true;
  f.operands.reserve(reads + 1);
  f.outputs.reserve(std::min(instrs.size(), materialize.size()));
  f.steps.reserve(instrs.size() * 2);
  f.values.reserve(instrs.size() * 2);
  auto new_val = [&](DType t) {
    f.values.push_back(t);
    x.converted.push_back(-1);
    return static_cast<int>(f.values.size()) - 1;
  };
  // A new step of `kind` defining a new value of type t (the caller fills in its operands).
  auto define = [&](Kind kind, DType t) {
    EwForm::Step s{kind, new_val(t)};
    return s;
  };
  // The value of `slot` read as `t`: computed here (converted once per dtype), or loaded /
  // read as a scalar once per dtype.
  auto read = [&](int32_t slot, DType t) {
    SlotEntry& e = x.at(slot);
    if (e.internal >= 0) {
      const int v = e.internal;
      if (f.values[v] == t) return v;
      if (int c = x.converted[v]; c >= 0 && f.values[c] == t) return c;
      for (const auto& [from, to, c] : x.extra_converts)
        if (from == v && to == t) return c;
      EwForm::Step s = define(Kind::kConvert, t);
      s.in[0] = v;
      f.steps.push_back(s);
      if (x.converted[v] < 0) x.converted[v] = s.out;
      else x.extra_converts.emplace_back(v, t, s.out);
      return s.out;
    }
    if (e.loaded >= 0 && e.loaded_dtype == t) return e.loaded;
    if (e.loaded >= 0)
      for (const auto& [sl, dt, v] : x.extra_loads)
        if (sl == slot && dt == t) return v;
    EwForm::Step s = define(Kind::kScalar, t);
    s.slot = slot;
    if (plan.slot_kind(slot) != SlotKind::kScalar) {
      s.kind = Kind::kLoad;
      if (e.operand < 0) {
        e.operand = static_cast<int>(f.operands.size());
        f.operands.push_back({slot, plan.slots[slot].dtype});
      }
      s.operand = e.operand;
    }
    f.steps.push_back(s);
    if (e.loaded < 0) {
      e.loaded = s.out;
      e.loaded_dtype = t;
    } else {
      x.extra_loads.emplace_back(slot, t, s.out);
    }
    return s.out;
  };
  for (int32_t ii : instrs) {
    const Instr& in = plan.instrs[ii];
    if (!is_elementwise(in.op) || in.in.size() > 3) {
      f.error = absl::StrFormat("%s is not an elementwise op", op_name(in.op));
      return f;
    }
    EwForm::Step st{Kind::kOp, -1};
    st.op = in.op;
    st.compute = compute_dtype(in);
    for (size_t i = 0; i < in.in.size(); ++i)
      st.in[i] = read(in.in[i], operand_dtype(in, static_cast<int>(i)));
    st.out = new_val(in.dtype);
    f.steps.push_back(st);
    SlotEntry& o = x.at(in.out);
    o.internal = st.out;
    if (o.wanted) f.outputs.push_back({in.out, st.out});
  }
  if (reduce != nullptr) {
    const int32_t slot = reduce->in[0];
    if (const int v = x.at(slot).internal; v >= 0)
      f.reduced = v;
    else if (instrs.empty() && plan.slots[slot].kind != SlotKind::kScalar)
      f.reduced = read(slot, plan.slots[slot].dtype);  // no prologue: the input tile by tile
    else
      f.error = "fused reduction input is not in its prologue";
  }
  return f;
}

// The kernel up to slot names: per instruction its op, dtype, arity and (comparisons) the
// dtype it compares in, then the local numbers of its operands and output; an operand's first
// mention also records whether it is a scalar and its dtype (what build_ew_form reads of a
// slot: an input and a computed value are both loaded); then the
// local numbers of the materialized slots. Local numbers count slots in order of first
// mention, so two kernels with equal signatures differ only by a renaming of slots.
struct EwFormMemo::State {
  FormScratch table;  // slot -> local number (SlotEntry::internal)
  // The signatures are written through raw pointers into buffers sized for the largest
  // kernel seen (push_back per word was most of the signature's cost).
  std::vector<uint32_t> sig_buf, last_sig;
  size_t sig_len = 0;
  std::vector<int32_t> slots;      // local number -> slot of the kernel being signed
  EwForm last;                     // the last form built, its slots as local numbers
  bool valid = false;              // `last` and last_sig are the last kernel's
  uint64_t print = 0;              // the last kernel's fingerprint (build)
  bool have_print = false;

  // False when the kernel is not elementwise (build_ew_form reports it).
  bool sign(const Plan& plan, const std::vector<int32_t>& instrs,
            const std::vector<int32_t>& materialize) {
    // At most 3 operands per instruction (checked below before any is written).
    const size_t max_slots = 4 * instrs.size() + materialize.size();
    table.begin(max_slots);
    const size_t max_words = 2 + 5 * instrs.size() + max_slots + materialize.size();
    if (sig_buf.size() < max_words) sig_buf.resize(max_words);
    if (slots.size() < max_slots) slots.resize(max_slots);
    uint32_t* w = sig_buf.data();
    int32_t* named = slots.data();
    int next = 0;
    *w++ = static_cast<uint32_t>(instrs.size());
    *w++ = static_cast<uint32_t>(materialize.size());
    // A slot's local number; an operand's first mention also records what build_ew_form
    // reads of it (whether it is a scalar, its dtype). An output's or a materialized slot's first mention
    // needs neither: a slot defined here is read as the value computed.
    auto local = [&](int32_t slot, bool operand) {
      SlotEntry& e = table.at(slot);
      if (e.internal < 0) {
        e.internal = next++;
        *named++ = slot;
        if (operand)
          *w++ = 0x80000000u | (plan.slot_kind(slot) == SlotKind::kScalar ? 0x100u : 0u) |
                 static_cast<uint32_t>(plan.slots[slot].dtype);
        else
          *w++ = 0x40000000u;
      }
      return static_cast<uint32_t>(e.internal);
    };
    for (int32_t ii : instrs) {
      const Instr& in = plan.instrs[ii];
      if (!is_elementwise(in.op) || in.in.size() > 3) return false;
      const uint32_t cmp = op_facts(in.op).compare ? 1 + static_cast<uint32_t>(in.attrs->dtype) : 0;
      *w++ = static_cast<uint32_t>(in.op) | static_cast<uint32_t>(in.dtype) << 16 |
             static_cast<uint32_t>(in.in.size()) << 24 | cmp << 26;
      for (int32_t s : in.in) {
        const uint32_t l = local(s, true);
        *w++ = l;
      }
      const uint32_t l = local(in.out, false);
      *w++ = l;
    }
    for (int32_t s : materialize) {
      const uint32_t l = local(s, false);
      *w++ = l;
    }
    sig_len = static_cast<size_t>(w - sig_buf.data());
    return true;
  }
  bool same_as_last() const {
    return sig_len == last_sig.size() &&
           std::equal(last_sig.begin(), last_sig.end(), sig_buf.begin());
  }
};

EwFormMemo::EwFormMemo() : st_(std::make_unique<State>()) {}
EwFormMemo::~EwFormMemo() = default;

EwForm EwFormMemo::build(const Plan& plan, const std::vector<int32_t>& instrs,
                         const std::vector<int32_t>& materialize, const Instr* reduce,
                         bool* reused) {
  State& m = *st_;
  *reused = false;
  if (reduce != nullptr || instrs.empty()) {
    m.valid = m.have_print = false;
    return build_ew_form(plan, instrs, materialize, reduce);
  }
  // A kernel is signed only when its fingerprint (sizes, first and last op) equals the last
  // kernel's: a plan of varied kernels (a model's) pays ~10 instructions per kernel, not a
  // signature per instruction. A run of equal kernels is signed from its second kernel on
  // and reuses from its third.
  const Instr& front = plan.instrs[instrs.front()];
  const Instr& back = plan.instrs[instrs.back()];
  const uint64_t print = instrs.size() ^ materialize.size() << 20 ^
                         static_cast<uint64_t>(front.op) << 32 ^ static_cast<uint64_t>(back.op) << 48 ^
                         static_cast<uint64_t>(back.dtype) << 40;
  const bool maybe = m.have_print && print == m.print;
  m.print = print;
  m.have_print = true;
  if (!maybe || !m.sign(plan, instrs, materialize)) {
    m.valid = false;
    return build_ew_form(plan, instrs, materialize, nullptr);
  }
  if (m.valid && m.same_as_last()) {
    EwForm f = m.last;
    f.shape = plan.instrs[instrs.back()].shape.to_shape();
    for (EwForm::Step& s : f.steps)
      if (s.slot >= 0) s.slot = m.slots[s.slot];
    for (EwForm::Operand& o : f.operands) o.slot = m.slots[o.slot];
    for (EwForm::Output& o : f.outputs) o.slot = m.slots[o.slot];
    *reused = true;
    return f;
  }
  EwForm f = build_ew_form(plan, instrs, materialize, nullptr);
  m.valid = f.error.empty();
  if (m.valid) {
    // Every slot the form names was numbered by sign() (the table is still this kernel's).
    m.last = f;
    m.last.shape = Shape();  // each reuse takes its kernel's shape
    for (EwForm::Step& s : m.last.steps)
      if (s.slot >= 0) s.slot = m.table.at(s.slot).internal;
    for (EwForm::Operand& o : m.last.operands) o.slot = m.table.at(o.slot).internal;
    for (EwForm::Output& o : m.last.outputs) o.slot = m.table.at(o.slot).internal;
    m.last_sig.assign(m.sig_buf.begin(), m.sig_buf.begin() + m.sig_len);
  }
  return f;
}

std::string ew_call(const EwForm::Step& step, std::span<const std::string> args,
                    const char* (*type_name)(DType)) {
  const char* op = ew_op_name(static_cast<int>(step.op));
  const char* t = type_name(step.compute);
  switch (op_category(step.op)) {
    case OpCategory::Unary:
      return absl::StrFormat("unary<%s, %s>(%s)", op, t, args[0]);
    case OpCategory::Binary:
      return absl::StrFormat("%s<%s, %s>(%s, %s)", op_facts(step.op).compare ? "compare" : "binary",
                             op, t, args[0], args[1]);
    case OpCategory::Ternary:
      return absl::StrFormat("ternary<%s, %s>(%s, %s, %s)", op, t, args[0], args[1], args[2]);
    default:
      return "";
  }
}

}  // namespace sloth::lazy
