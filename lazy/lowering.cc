#include "lazy/lowering.h"

#include <cstdio>
#include <string>

#include "lazy/cse.h"
#include "lazy/epilogue_sink.h"
#include "lazy/fusion.h"
#include "lazy/matmul_transpose.h"
#include "lazy/scheduler.h"

namespace sloth::lazy {

Plan lower(const Graph& g) { return lower(g, nullptr, nullptr); }

Plan lower(const Graph& g, void (*resize)(Plan&, void*), void* ctx) {
  Plan p;
  p.key = g.key;
  p.num_inputs = static_cast<int32_t>(g.inputs.size());
  p.num_scalars = static_cast<int32_t>(g.scalars.size());
  p.slots_ordered = true;  // numbered below: inputs, scalars, values
  // Slot numbering: inputs, then scalars, then values in execution order.
  const int32_t scalar_base = p.num_inputs, value_base = p.num_inputs + p.num_scalars;
  p.slots.resize(value_base + g.order.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Slot& s = p.slots[i];
    s.kind = SlotKind::kInput;
    s.index = static_cast<int32_t>(i);
    s.dtype = g.inputs[i]->dtype;
    s.shape = g.inputs[i]->data->layout.shape;
    s.input_strides = g.inputs[i]->data->layout.strides;
  }
  for (size_t i = 0; i < g.scalars.size(); ++i) {
    Slot& s = p.slots[scalar_base + i];
    s.kind = SlotKind::kScalar;
    s.index = static_cast<int32_t>(i);
    s.dtype = g.scalars[i]->dtype;
  }
  const int32_t base_of[4] = {0, 0, scalar_base, value_base};  // by Graph::operand_kind
  p.instrs.reserve(g.order.size());
  size_t next_operand = 0;
  // Runs of instructions with equal attributes (a layer's ops, the same reduction repeated)
  // share one out-of-line copy.
  InstrAttrs last_attrs;
  bool any_matmul = false;  // transpose_matmul_outputs has nothing to do without one
  for (const Node* n : g.order) {
    any_matmul |= n->op == OpId::kMatmul;
    if (!(n->attrs == last_attrs.get())) last_attrs = InstrAttrs(n->attrs);
    Instr in{n->op, n->dtype, n->shape, last_attrs, {}, value_base + n->slot};
    for (size_t k = 0; k < n->inputs.size(); ++k) {
      const uint32_t ref = g.operands[next_operand++];
      in.in.push_back(base_of[Graph::operand_kind(ref)] + Graph::operand_slot(ref));
    }
    Slot& s = p.slots[in.out];
    s.kind = SlotKind::kValue;
    s.dtype = n->dtype;
    s.shape = n->shape;
    p.instrs.push_back(std::move(in));
  }
  p.outputs.reserve(g.roots.size());
  for (int32_t v : g.root_values) p.outputs.push_back(value_base + v);
  if (resize != nullptr) resize(p, ctx);  // ---- dynamic shapes: stand-in sizes ----
  eliminate_common_subexpressions(p);
  if (any_matmul) transpose_matmul_outputs(p);
  return p;
}

void plan_kernels(Plan& p, bool fuse) {
  if (fuse) {
    std::vector<std::string> reasons;
    const bool log = log_enabled("fusion");
    fuse_kernels(p, log ? &reasons : nullptr);
    sink_matmul_epilogues(p);
    for (const std::string& r : reasons) std::fprintf(stderr, "[sloth fusion] %s\n", r.c_str());
  } else {
    unfused_kernels(p);
  }
  // Liveness: a value slot is released after the last kernel that reads it, unless it is a
  // graph output. Inputs and scalars are owned by the caller.
  std::vector<int32_t> last(p.slots.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int32_t i : p.kernels[k].instrs)
      for (int32_t s : p.instrs[i].in) last[s] = static_cast<int32_t>(k);
  for (int32_t o : p.outputs) last[o] = -1;
  p.free_after.assign(p.kernels.size(), {});
  // Value slots only: with ordered slots their range, without reading any slot's kind.
  const size_t first_value = p.slots_ordered ? static_cast<size_t>(p.num_inputs + p.num_scalars) : 0;
  for (size_t s = first_value; s < p.slots.size(); ++s)
    if (last[s] >= 0 && (p.slots_ordered || p.slots[s].kind == SlotKind::kValue))
      p.free_after[last[s]].push_back(s);
}

}  // namespace sloth::lazy
