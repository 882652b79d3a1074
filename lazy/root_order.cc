#include "lazy/root_order.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "lazy/size_key.h"

namespace sloth::lazy {
namespace {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Nodes visited per root: deep enough to tell an optimizer's parameter, moment and gradient
// updates apart (they differ within 2-3 ops of the root), cheap for a flush of 10^4 roots.
constexpr int kBudget = 24;

// ---- distributed ----
bool is_collective(OpId op) {
  return op == OpId::kAllReduce || op == OpId::kBroadcast || op == OpId::kAllGather ||
         op == OpId::kReduceScatter;
}

}  // namespace

uint64_t root_signature(const Node* root) {
  // Breadth-first over the operand cone: the visiting order is a function of the structure
  // alone, so two roots of one structure hash alike whatever their sizes or ages.
  absl::InlinedVector<const Node*, kBudget> queue;
  queue.push_back(root);
  uint64_t h = 0x6a09e667f3bcc909ull;
  for (size_t i = 0; i < queue.size(); ++i) {
    const Node* n = queue[i];
    h = mix(h, static_cast<uint64_t>(n->dtype) << 8 | n->shape.size());
    if (n->materialized()) {  // an input of the graph: data, whatever op made it
      h = mix(h, 0x1000);
      continue;
    }
    h = mix(h, static_cast<uint64_t>(n->op) << 8 | n->inputs.size());
    if (n->op == OpId::kScalar) continue;  // its value is data
    if (is_collective(n->op)) {
      // Not its attributes: they hold the rank, and every rank must order its roots alike
      // (collectives start in the order the walk finds them; see build_graph).
    } else if (size_attrs_of(n->op) == SizeAttrs::kNone) {
      h = mix(h, n->attrs.hash());
    } else {
      Attrs a = n->attrs;
      for_each_size_attr(n->op, a, [](int64_t& v) { v = v <= 1 ? v : 2; });
      h = mix(h, a.hash());
    }
    for (const auto& in : n->inputs)
      if (queue.size() < kBudget) queue.push_back(in.get());
  }
  return h;
}

void order_roots(std::vector<NodePtr>& roots) {
  if (roots.size() < 2) return;
  std::vector<std::pair<uint64_t, size_t>> keyed(roots.size());
  bool sorted = true;
  for (size_t i = 0; i < roots.size(); ++i) {
    keyed[i] = {root_signature(roots[i].get()), i};
    if (i > 0 && keyed[i].first < keyed[i - 1].first) sorted = false;
  }
  if (sorted) return;
  // (signature, incoming position) pairs are distinct: a plain sort is the stable one.
  std::sort(keyed.begin(), keyed.end());
  std::vector<NodePtr> out;
  out.reserve(roots.size());
  for (const auto& [sig, i] : keyed) out.push_back(std::move(roots[i]));
  roots = std::move(out);
}

}  // namespace sloth::lazy
