#include "lazy/lowering.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "lazy/cse.h"
#include "lazy/epilogue_sink.h"
#include "lazy/fusion.h"
#include "lazy/matmul_transpose.h"
#include "lazy/scheduler.h"

namespace sloth::lazy {

Plan lower(const Graph& g) { return lower(g, nullptr, nullptr); }

Plan lower(const Graph& g, void (*resize)(Plan&, void*), void* ctx) {
  if (g.values.size() != g.order.size()) {  // a caller that did not gather them
    Graph full = g;
    gather_values(full);
    return lower(full, resize, ctx);
  }
  Plan p;
  p.key = g.key;
  p.num_inputs = static_cast<int32_t>(g.inputs.size());
  p.num_scalars = static_cast<int32_t>(g.scalars.size());
  p.slots_ordered = true;  // numbered below: inputs, scalars, values
  // Slot numbering: inputs, then scalars, then values in execution order.
  const int32_t scalar_base = p.num_inputs, value_base = p.num_inputs + p.num_scalars;
  // Made in slot order (push_back, not resize-then-fill): a 1e5-node graph's 2e5 slots
  // (64 bytes each) are written once.
  p.slots.reserve(value_base + g.order.size());
  p.input_strides.reserve(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Slot& s = p.slots.emplace_back();
    s.kind = SlotKind::kInput;
    s.index = static_cast<int32_t>(i);
    s.dtype = g.inputs[i]->dtype;
    s.shape = g.inputs[i]->data->layout.shape;
    p.input_strides.push_back(g.inputs[i]->data->layout.strides);
  }
  // A scalar leaf is read here for its dtype only, the one visit lowering makes to it: a wide
  // graph has one per node (`x * i`), scattered over memory, so they are fetched ahead.
  constexpr size_t kScalarAhead = 16;
  for (size_t i = 0; i < g.scalars.size(); ++i) {
    if (i + kScalarAhead < g.scalars.size()) __builtin_prefetch(&g.scalars[i + kScalarAhead]->dtype);
    Slot& s = p.slots.emplace_back();
    s.kind = SlotKind::kScalar;
    s.index = static_cast<int32_t>(i);
    s.dtype = g.scalars[i]->dtype;
  }
  const int32_t base_of[4] = {0, 0, scalar_base, value_base};  // by Graph::operand_kind
  p.instrs.reserve(g.order.size());
  size_t next_operand = 0;
  // Runs of instructions with equal attributes (a layer's ops, the same reduction repeated)
  // share one out-of-line copy. A node without attributes (has_attrs false) is not asked:
  // its attrs are three cold cache lines at its end.
  InstrAttrs last_attrs;
  bool last_empty = true;  // last_attrs holds the empty attributes
  bool any_matmul = false;  // transpose_matmul_outputs has nothing to do without one
  // CSE runs here, each instruction checked as it is made (its data still in cache), not in
  // a second walk over all of them; except where `resize` reads the plan first, which needs
  // the instructions numbered as the graph (then CSE is its own pass after it).
  std::optional<CseTable> cse;
  if (resize == nullptr) cse.emplace(value_base + g.order.size(), g.order.size());
  // Shape numbering (Instr::shape_id): build_graph's numbers (Graph::shapes). What each
  // instruction needs comes from Graph::values, not from the nodes: a node is read again only
  // for its attributes, where it has any.
  p.shape_ids = true;
  for (size_t i = 0; i < g.order.size(); ++i) {
    const Graph::Value& v = g.values[i];
    any_matmul |= v.op == OpId::kMatmul;
    if (!v.has_attrs) {
      if (!last_empty) last_attrs = InstrAttrs();
      last_empty = true;
    } else if (const Node* n = g.order[i]; last_empty || !(n->attrs == last_attrs.get())) {
      last_attrs = InstrAttrs(n->attrs);
      last_empty = false;
    }
    // build_graph numbers values in g.order's order, so this is the next slot.
    const int32_t out = value_base + static_cast<int32_t>(i);
    Slot& s = p.slots.emplace_back();
    s.kind = SlotKind::kValue;
    s.dtype = v.dtype;
    s.shape = g.shapes[v.shape];
    Instr in{v.op, v.dtype, s.shape, last_attrs, {}, out};
    in.shape_id = v.shape;
    for (int32_t k = 0; k < v.num_inputs; ++k) {
      const uint32_t ref = g.operands[next_operand++];
      in.in.push_back(base_of[Graph::operand_kind(ref)] + Graph::operand_slot(ref));
    }
    if (!cse || !cse->repeats(p.instrs.data(), in)) p.instrs.push_back(std::move(in));
  }
  p.outputs.reserve(g.roots.size());
  for (int32_t v : g.root_values) p.outputs.push_back(cse ? cse->alias(value_base + v) : value_base + v);
  if (resize != nullptr) {  // ---- dynamic shapes: stand-in sizes ----
    resize(p, ctx);  // clears p.shape_ids if it rewrites sizes
    eliminate_common_subexpressions(p);
  }
  if (any_matmul) transpose_matmul_outputs(p);
  return p;
}

namespace {

// Liveness: a value slot is released after the last kernel that reads it, unless it is a
// graph output. Inputs and scalars are owned by the caller. (The fused path gets the same
// from compute_kernel_outputs's walk.)
void liveness(Plan& p) {
  std::vector<int32_t> last(p.slots.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int32_t i : p.kernels[k].instrs)
      for (int32_t s : p.instrs[i].in) last[s] = static_cast<int32_t>(k);
  for (int32_t o : p.outputs) last[o] = -1;
  p.free_after.assign(p.kernels.size(), {});
  for (size_t s = 0; s < p.slots.size(); ++s)
    if (last[s] >= 0 && p.slot_kind(static_cast<int32_t>(s)) == SlotKind::kValue)
      p.free_after[last[s]].push_back(s);
}

}  // namespace

void plan_kernels(Plan& p, bool fuse) {
  if (fuse) {
    std::vector<std::string> reasons;
    const bool log = log_enabled("fusion");
    fuse_kernels(p, log ? &reasons : nullptr, /*outputs=*/false);
    sink_matmul_epilogues(p);
    for (const std::string& r : reasons) std::fprintf(stderr, "[sloth fusion] %s\n", r.c_str());
    // Kernel outputs and liveness (free_after) in one walk over the kernels.
    compute_kernel_outputs(p, /*liveness=*/true);
  } else {
    unfused_kernels(p);  // every result is its kernel's output
    liveness(p);
  }
}

}  // namespace sloth::lazy
