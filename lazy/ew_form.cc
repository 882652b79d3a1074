#include "lazy/ew_form.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "core/ew_semantics_text.h"

namespace sloth::lazy {

// A condition operand (where's) is read as bool; the op computes in the type of the values.
DType compute_dtype(const Instr& in) {
  return operand_dtype(in, op_info(in.op).facts.operands == Operands::kBoolCondition ? 1 : 0);
}

EwForm build_ew_form(const Plan& plan, const std::vector<int32_t>& instrs,
                     const std::vector<int32_t>& materialize, const Instr* reduce) {
  using Kind = EwForm::StepKind;
  EwForm f;
  if (reduce != nullptr) f.shape = plan.slots[reduce->in[0]].shape;
  else if (!instrs.empty()) f.shape = plan.instrs[instrs.back()].shape;
  absl::flat_hash_map<int32_t, int> internal;                  // slot computed here -> value
  absl::flat_hash_map<std::pair<int32_t, DType>, int> loaded;  // (slot, dtype) -> value
  absl::flat_hash_map<std::pair<int, DType>, int> converted;   // (value, dtype) -> value
  absl::flat_hash_map<int32_t, int> operand_of;                // slot -> index in f.operands
  // Sorted, searched by bisection: cheaper to build than a hash set for a kernel's few outputs.
  std::vector<int32_t> wanted(materialize.begin(), materialize.end());
  std::sort(wanted.begin(), wanted.end());
  // Sized once from the instruction count (each instruction reads at most 3 operands; a
  // kernel has at most 128 instructions): the maps and lists do not regrow while filling.
  size_t reads = 0;
  for (int32_t ii : instrs) reads += plan.instrs[ii].in.size();
  internal.reserve(instrs.size());
  loaded.reserve(reads + 1);
  operand_of.reserve(reads + 1);
  f.operands.reserve(reads + 1);
  f.outputs.reserve(std::min(instrs.size(), materialize.size()));
  f.steps.reserve(instrs.size() * 2);
  f.values.reserve(instrs.size() * 2);
  auto new_val = [&](DType t) {
    f.values.push_back(t);
    return static_cast<int>(f.values.size()) - 1;
  };
  // The value of `slot` read as `t`: computed here (converted once per dtype), or loaded /
  // read as a scalar once per dtype.
  auto read = [&](int32_t slot, DType t) {
    if (auto it = internal.find(slot); it != internal.end()) {
      const int v = it->second;
      if (f.values[v] == t) return v;
      auto [c, fresh] = converted.try_emplace({v, t}, -1);
      if (fresh) {
        c->second = new_val(t);
        EwForm::Step s{Kind::kConvert, c->second};
        s.in[0] = v;
        f.steps.push_back(s);
      }
      return c->second;
    }
    auto [l, fresh] = loaded.try_emplace({slot, t}, -1);
    if (fresh) {
      l->second = new_val(t);
      EwForm::Step s{Kind::kScalar, l->second};
      s.slot = slot;
      if (plan.slot_kind(slot) != SlotKind::kScalar) {
        s.kind = Kind::kLoad;
        auto [o, first] = operand_of.try_emplace(slot, static_cast<int>(f.operands.size()));
        if (first) f.operands.push_back({slot, plan.slots[slot].dtype});
        s.operand = o->second;
      }
      f.steps.push_back(s);
    }
    return l->second;
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
    internal[in.out] = st.out;
    if (std::binary_search(wanted.begin(), wanted.end(), in.out)) f.outputs.push_back({in.out, st.out});
  }
  if (reduce != nullptr) {
    const int32_t slot = reduce->in[0];
    if (internal.count(slot))
      f.reduced = internal[slot];
    else if (instrs.empty() && plan.slots[slot].kind != SlotKind::kScalar)
      f.reduced = read(slot, plan.slots[slot].dtype);  // no prologue: the input tile by tile
    else
      f.error = "fused reduction input is not in its prologue";
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
