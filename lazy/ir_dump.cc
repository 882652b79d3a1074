#include "lazy/ir_dump.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lazy/graph.h"

namespace sloth::lazy {
namespace {

std::string attrs_str(const Node& n) {
  std::string s = n.attrs.debug_string();
  return s.empty() ? "" : "[" + s + "]";
}

std::string operand(const Node* n) {
  if (n->materialized()) return absl::StrFormat("in%d", n->slot);
  if (n->op == OpId::kScalar) return absl::StrFormat("scalar%d", n->slot);
  return absl::StrFormat("%%%d", n->slot);
}

}  // namespace

std::string dump_text(absl::Span<const NodePtr> roots) {
  Graph g = build_graph(roots);
  std::string s = absl::StrFormat("graph key=%016x nodes=%d inputs=%d scalars=%d\n", g.key,
                                  g.order.size(), g.inputs.size(), g.scalars.size());
  for (Node* n : g.inputs)
    absl::StrAppendFormat(&s, "  in%d: data %s%s\n", n->slot, dtype_name(n->dtype), shape_str(n->shape));
  for (Node* n : g.scalars)
    absl::StrAppendFormat(&s, "  scalar%d: %s = %g\n", n->slot, dtype_name(n->dtype), n->scalar);
  for (Node* n : g.order) {
    std::vector<std::string> ops;
    for (const auto& in : n->inputs) ops.push_back(operand(in.get()));
    absl::StrAppendFormat(&s, "  %%%d = %s%s(%s) : %s%s\n", n->slot, op_name(n->op), attrs_str(*n),
                          absl::StrJoin(ops, ", "), dtype_name(n->dtype), shape_str(n->shape));
  }
  for (const auto& r : roots) {
    if (r->materialized()) {
      absl::StrAppendFormat(&s, "  root: data %s%s (materialized)\n", dtype_name(r->dtype), shape_str(r->shape));
    } else {
      absl::StrAppendFormat(&s, "  root: %s hash=%016x\n", operand(r.get()), r->hash);
    }
  }
  return s;
}

std::string dump_dot(absl::Span<const NodePtr> roots) {
  Graph g = build_graph(roots);
  std::string s = "digraph sloth {\n  rankdir=TB;\n";
  auto id = [](const Node* n) { return absl::StrFormat("n%p", static_cast<const void*>(n)); };
  for (Node* n : g.inputs)
    absl::StrAppendFormat(&s, "  %s [shape=box,label=\"data %s%s\"];\n", id(n), dtype_name(n->dtype), shape_str(n->shape));
  for (Node* n : g.scalars)
    absl::StrAppendFormat(&s, "  %s [shape=plaintext,label=\"scalar %s\"];\n", id(n), dtype_name(n->dtype));
  for (Node* n : g.order) {
    absl::StrAppendFormat(&s, "  %s [label=\"%s%s\\n%s%s\"];\n", id(n), op_name(n->op), attrs_str(*n),
                          dtype_name(n->dtype), shape_str(n->shape));
    for (const auto& in : n->inputs) absl::StrAppendFormat(&s, "  %s -> %s;\n", id(in.get()), id(n));
  }
  for (Node* r : g.roots) absl::StrAppendFormat(&s, "  %s [peripheries=2];\n", id(r));
  s += "}\n";
  return s;
}

}  // namespace sloth::lazy
