#include "lazy/graph.h"

#include <algorithm>
#include <atomic>

#include "core/prefetch.h"
#include "lazy/size_key.h"

namespace sloth::lazy {
namespace {

std::atomic<uint64_t> epoch{1};

// How many nodes ahead the walk prefetches where it knows them (a stack or an order).
constexpr size_t kAhead = 6;

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

namespace {

// `first`: nodes whose operand cones are emitted before everything else (they are not roots).
Graph build_graph_from(absl::Span<const NodePtr> roots, absl::Span<Node* const> first) {
  Graph g;
  const uint64_t mark = epoch.fetch_add(1, std::memory_order_relaxed) << 2;
  // mark: visited; mark|1: done; mark|3: done and an output. Slots: inputs/scalars/values
  // numbered in discovery order. graph_refs counts the graph's edges into each node.
  int32_t next_value = 0;
  uint64_t key = 0xcbf29ce484222325ull;
  SizeSymbols sizes;  // sizes are symbols in the key (lazy/size_key.h)
  std::vector<std::pair<Node*, size_t>> stack;
  std::vector<Node*> starts(first.begin(), first.end());
  for (const auto& r : roots) starts.push_back(r.get());
  for (Node* root : starts) {
    if (root->materialized() || root->op == OpId::kScalar || root->mark == (mark | 1)) continue;
    stack.push_back({root, 0});
    root->mark = mark;
    root->graph_refs = 0;
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        Node* in = n->inputs[i++].get();
        if (in->mark == mark || in->mark == (mark | 1)) {
          ++in->graph_refs;
          continue;
        }
        in->graph_refs = 1;
        if (in->materialized()) {
          in->mark = mark | 1;
          in->slot = static_cast<int32_t>(g.inputs.size());
          g.inputs.push_back(in);
          key = mix(key, 0x1000 + static_cast<uint64_t>(in->dtype));
          // The stride of a size-1 dim addresses nothing: [1, 4] with strides [4, 1] and with
          // [1, 1] (a parameter written back through a transpose) is one layout to a plan.
          // Sizes and strides hash as symbols (lazy/size_key.h).
          const Layout& l = in->data->layout;
          key = mix(key, 0x4000 + l.shape.size());
          for (int64_t d : l.shape) key = mix(key, sizes.word(d));
          int64_t contiguous = 1;
          for (size_t d = l.strides.size(); d-- > 0;) {
            key = mix(key, l.shape[d] == 1            ? SizeSymbols::kUnitDim
                           : l.strides[d] == contiguous ? SizeSymbols::kContiguous
                                                        : sizes.word(l.strides[d]));
            contiguous *= std::max<int64_t>(l.shape[d], 1);
          }
        } else if (in->op == OpId::kScalar) {
          in->mark = mark | 1;
          in->slot = static_cast<int32_t>(g.scalars.size());
          g.scalars.push_back(in);
          key = mix(key, 0x2000 + static_cast<uint64_t>(in->dtype));
        } else {
          in->mark = mark;
          stack.push_back({in, 0});
        }
        continue;
      }
      // All operands are done: emit n. Its key entry names its operands by slot and kind.
      // A long chain is walked down then emitted back up: the nodes emitted next are the
      // stack's lower entries, whose lines a deep walk has evicted; fetch them ahead.
      // The shape buffer (read for the key) of a nearer one, whose lines came earlier.
      if (stack.size() > 2 * kAhead) {
        const Node* next = stack[stack.size() - 1 - 2 * kAhead].first;
        prefetch_for_write(next, reinterpret_cast<const char*>(&next->scalar) - reinterpret_cast<const char*>(next));
        __builtin_prefetch(stack[stack.size() - 1 - kAhead].first->shape.data());
      }
      n->mark = mark | 1;
      n->slot = next_value++;
      g.order.push_back(n);
      uint64_t h = mix(n->hash & 0, static_cast<uint64_t>(n->op));
      h = mix(h, static_cast<uint64_t>(n->dtype));
      h = mix(h, 0x4000 + n->shape.size());
      for (int64_t d : n->shape) h = mix(h, sizes.word(d));
      // A node without attributes is keyed with the default ones, which are hot, instead of
      // its own (three cold cache lines per node of a long chain).
      static const Attrs kNoAttrs;
      h = mix(h, attrs_key(n->op, n->has_attrs ? n->attrs : kNoAttrs, sizes));
      for (const auto& in : n->inputs) {
        uint64_t kind = in->materialized() ? 1 : in->op == OpId::kScalar ? 2 : 3;
        h = mix(h, kind << 32 | static_cast<uint32_t>(in->slot));
        g.operands.push_back(static_cast<uint32_t>(kind << 30) | static_cast<uint32_t>(in->slot));
      }
      key = mix(key, h);
      stack.pop_back();
    }
  }
  for (const auto& r : roots) {
    Node* root = r.get();
    if (root->materialized() || root->op == OpId::kScalar || root->mark == (mark | 3)) continue;
    root->mark = mark | 3;
    g.roots.push_back(root);
    g.root_values.push_back(root->slot);
    key = mix(key, 0x3000 + static_cast<uint64_t>(root->slot));
  }
  // Nothing runs twice (DESIGN I9): a node of this graph that something outside the graph
  // still holds (a live tensor, a pending node of a later step, a value autograd saved) is an
  // output too, so it holds its value after the sync instead of being recomputed by the next
  // graph. It also makes the graph's other nodes dead once it has run, which is what lets the
  // scheduler donate an input whose only readers are this graph's nodes: no pending node
  // survives the sync reading it. View caches do not count (see Node::cache_refs).
  for (size_t i = 0; i < g.order.size(); ++i) {
    Node* n = g.order[i];
    if (i + kAhead < g.order.size()) __builtin_prefetch(g.order[i + kAhead], 1, 3);
    if (n->mark == (mark | 3)) continue;
    if (n->use_count() > static_cast<int64_t>(n->graph_refs) + n->cache_refs) {
      n->mark = mark | 3;
      g.roots.push_back(n);
      g.root_values.push_back(n->slot);
      key = mix(key, 0x3000 + static_cast<uint64_t>(n->slot));
    }
  }
  g.struct_key = key;
  g.key = mix(key, sizes.stream_hash());
  g.sizes = sizes.take_values();
  g.size_ids = sizes.take_ids();
  return g;
}

// ---- distributed ----
bool is_collective(OpId op) {
  return op == OpId::kAllReduce || op == OpId::kBroadcast || op == OpId::kAllGather ||
         op == OpId::kReduceScatter;
}

}  // namespace

// A graph with collectives is ordered again with each collective's operand cone first (in the
// order the collectives were found), then the rest: a collective starts as early as its
// operands allow (DDP: a bucket's all-reduce right after its gradients, before the earlier
// layers' backward), and the backend finishes it at its first reader, so the data moves while
// the rest computes. Every rank builds the same order, so the collectives start in the same
// order everywhere. Values do not depend on the order (random ops draw from (seed, offset)).
Graph build_graph(absl::Span<const NodePtr> roots) {
  Graph g = build_graph_from(roots, {});
  std::vector<Node*> collectives;
  for (Node* n : g.order)
    if (is_collective(n->op)) collectives.push_back(n);
  if (collectives.empty()) return g;
  // Smallest cone first: the graph does not keep the recording order, and DDP's buckets
  // (last layers first) have growing cones, so this starts them in backward's order.
  std::vector<size_t> cone(collectives.size(), 0);
  std::vector<int32_t> seen(g.order.size(), -1);
  std::vector<Node*> todo;
  for (size_t c = 0; c < collectives.size(); ++c) {
    todo.assign(1, collectives[c]);
    while (!todo.empty()) {
      Node* n = todo.back();
      todo.pop_back();
      if (n->materialized() || n->op == OpId::kScalar || seen[n->slot] == static_cast<int32_t>(c))
        continue;
      seen[n->slot] = static_cast<int32_t>(c);
      ++cone[c];
      for (const auto& in : n->inputs) todo.push_back(in.get());
    }
  }
  std::vector<size_t> by_cone(collectives.size());
  for (size_t c = 0; c < by_cone.size(); ++c) by_cone[c] = c;
  std::stable_sort(by_cone.begin(), by_cone.end(),
                   [&](size_t a, size_t b) { return cone[a] < cone[b]; });
  std::vector<Node*> first;
  for (size_t c : by_cone) first.push_back(collectives[c]);
  return build_graph_from(roots, first);
}

}  // namespace sloth::lazy
