#include "lazy/graph.h"

#include <algorithm>
#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "core/prefetch.h"
#include "lazy/size_key.h"
#include "lazy/span_hash.h"

namespace sloth::lazy {
namespace {

std::atomic<uint64_t> epoch{1};

// How many nodes ahead the walk prefetches where it knows them (a stack or an order).
constexpr size_t kAhead = 6;
// The walk stack's capacity a thread keeps between graphs (1 MB: chains up to 65536 deep,
// three times the automatic flush's default limit).
constexpr size_t kKeptStack = size_t{1} << 16;
// The most nodes a graph reserves room for beyond one per root (build_graph_from).
constexpr size_t kReservedNodes = 4096;

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// The graph's distinct shapes (Graph::shapes), looked up by span: a node's shape is
// compared with the previous node's first (runs of one shape are the rule), then here.
class ShapeTable {
 public:
  explicit ShapeTable(std::vector<Shape>* shapes) : shapes_(shapes) {}
  int32_t id(IntSpan s) {
    if (last_ >= 0 && same((*shapes_)[last_], s)) return last_;
    if (auto it = index_.find(s); it != index_.end()) return last_ = it->second;
    last_ = static_cast<int32_t>(shapes_->size());
    shapes_->emplace_back(s.begin(), s.end());
    index_.emplace(Shape(s.begin(), s.end()), last_);
    return last_;
  }

 private:
  // An inline loop: a shape has a few dims, and Span's == calls memcmp for them.
  static bool same(const Shape& a, IntSpan b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  std::vector<Shape>* shapes_;
  absl::flat_hash_map<Shape, int32_t, SpanHash, SpanEq> index_;
  int32_t last_ = -1;
};

// Graph::sizes_trivial, followed while the graph is built: the inputs' components (a union-
// find over input numbers, joined by each elementwise node) and each value's component.
class TrivialSizes {
 public:
  bool ok = true;
  void input(const Layout& l, int32_t shape) {
    parent_.push_back(static_cast<int32_t>(parent_.size()));
    input_shape_.push_back(shape);
    int64_t contiguous = 1;
    for (size_t d = l.strides.size(); d-- > 0;) {
      if (l.shape[d] == 0) ok = false;
      if (l.shape[d] != 1 && l.strides[d] != contiguous) ok = false;
      contiguous *= std::max<int64_t>(l.shape[d], 1);
    }
  }
  // A node of shape `shape` (number): starts its operand walk.
  void begin(OpId op, int32_t shape) {
    const OpCategory cat = op_category(op);
    if (!(cat == OpCategory::Unary || cat == OpCategory::Binary || cat == OpCategory::Ternary) ||
        size_attrs_of(op) != SizeAttrs::kNone)
      ok = false;
    shape_ = shape;
    comp_ = -1;
  }
  // Operand of kind 1 (input) or 3 (value) with number `slot`.
  void operand(uint64_t kind, int32_t slot, const std::vector<Graph::Value>& values) {
    if (kind == 2) return;
    const int32_t shape = kind == 1 ? input_shape_[slot] : values[slot].shape;
    if (shape != shape_) {
      ok = false;
      return;
    }
    const int32_t c = find(kind == 1 ? slot : value_comp_[slot]);
    if (comp_ < 0) comp_ = c;
    else if (c != comp_) parent_[std::max(c, comp_)] = std::min(c, comp_), comp_ = std::min(c, comp_);
  }
  void end() {
    if (comp_ < 0) ok = false;  // no operand with sizes: sizes of its own (a factory)
    value_comp_.push_back(comp_);
  }
  // After the walk: one component, whose shape has distinct sizes >= 2.
  bool result(const std::vector<Shape>& shapes) {
    if (!ok || parent_.empty()) return false;
    for (size_t i = 0; i < parent_.size(); ++i)
      if (find(static_cast<int32_t>(i)) != 0) return false;
    const Shape& s = shapes[input_shape_[0]];
    for (size_t a = 0; a < s.size(); ++a)
      for (size_t b = a + 1; b < s.size(); ++b)
        if (s[a] >= 2 && s[a] == s[b]) return false;
    return true;
  }

 private:
  int32_t find(int32_t a) {
    while (parent_[a] != a) a = parent_[a] = parent_[parent_[a]];
    return a;
  }
  std::vector<int32_t> parent_, input_shape_, value_comp_;
  int32_t shape_ = -1, comp_ = -1;
};

}  // namespace

namespace {

// The buffers of this thread's last graphs (Graph::~Graph), for the next build_graph. A
// buffer larger than kSpareBytes is freed instead (a one-off huge graph keeps no memory).
constexpr size_t kSpareBytes = size_t{4} << 20;
struct SpareBuffers {
  std::vector<Node*> order, inputs, scalars, roots;
  std::vector<uint32_t> operands, size_ids;
  std::vector<int32_t> root_values;
  std::vector<Graph::Value> values;
};
// Null before first use and after the thread's exit began (a graph destroyed then keeps
// nothing).
thread_local SpareBuffers* spare = nullptr;
thread_local bool spare_gone = false;
SpareBuffers* spare_buffers() {
  if (spare == nullptr && !spare_gone) {
    spare = new SpareBuffers();
    struct Owner {
      ~Owner() {
        delete spare;
        spare = nullptr;
        spare_gone = true;
      }
    };
    thread_local Owner owner;
    (void)owner;
  }
  return spare;
}
// Moves v's memory into `keep` when it is larger and not too large.
template <typename T>
void keep_larger(std::vector<T>& v, std::vector<T>& keep) {
  if (v.capacity() <= keep.capacity() || v.capacity() * sizeof(T) > kSpareBytes) return;
  v.clear();
  keep.swap(v);
}
// Gives v the kept memory (empty) when it has less.
template <typename T>
void take_kept(std::vector<T>& v, std::vector<T>& keep) {
  if (keep.capacity() <= v.capacity()) return;
  v.swap(keep);
  v.clear();
}

bool is_collective(OpId op);

// `first`: nodes whose operand cones are emitted before everything else (they are not roots).
Graph build_graph_from(absl::Span<const NodePtr> roots, absl::Span<Node* const> first) {
  Graph g;
  const uint64_t mark = epoch.fetch_add(1, std::memory_order_relaxed) << 2;
  // mark: visited; mark|1: done; mark|3: done and an output. Slots: inputs/scalars/values
  // numbered in discovery order. graph_refs counts the graph's edges into each node.
  int32_t next_value = 0;
  uint64_t key = 0xcbf29ce484222325ull;
  SizeSymbols sizes;  // sizes are symbols in the key (lazy/size_key.h)
  // The walk's stack is kept per thread: a deep chain grows it to the chain's length, and a
  // loop whose automatic flushes each take such a chain would otherwise grow it again (copies
  // and a malloc per doubling) every time. (Nothing the walk calls builds another graph.)
  thread_local std::vector<std::pair<Node*, size_t>> walk_stack;
  auto& stack = walk_stack;
  stack.clear();
  const uint64_t no_attrs_hash = Attrs().hash();
  if (SpareBuffers* k = spare_buffers()) {
    take_kept(g.order, k->order);
    take_kept(g.inputs, k->inputs);
    take_kept(g.scalars, k->scalars);
    take_kept(g.roots, k->roots);
    take_kept(g.operands, k->operands);
    take_kept(g.root_values, k->root_values);
    take_kept(g.values, k->values);
    if (k->size_ids.capacity() > 0) sizes.adopt_ids(std::move(k->size_ids));
    k->size_ids = {};
  }
  std::vector<Node*> starts(first.begin(), first.end());
  for (const auto& r : roots) starts.push_back(r.get());
  // At least a node per root (a wide graph: exactly that), at most every pending node (a
  // sync of everything: about that), but not more than kReservedNodes beyond the roots: a
  // small sync (one item()) among 1e5 pending tensors must not reserve megabytes for nodes
  // it never walks. A larger graph grows by doubling (a few copies of pointers, little next
  // to walking its nodes).
  const size_t expected =
      std::max(starts.size(), std::min(static_cast<size_t>(std::max<int64_t>(pending_nodes(), 0)),
                                       starts.size() + kReservedNodes));
  g.order.reserve(expected);
  g.operands.reserve(2 * expected);
  sizes.reserve(expected);  // a size per node is common (vectors, a chain)
  for (size_t j = 0; j < starts.size(); ++j) {
    Node* root = starts[j];
    // A wide graph is a walk over many roots, each a small cone: the roots ahead are
    // fetched (their first lines, then their operands and shape once those lines are in).
    if (j + 2 * kAhead < starts.size()) {
      const Node* far = starts[j + 2 * kAhead];
      __builtin_prefetch(far, 1, 3);
      __builtin_prefetch(reinterpret_cast<const char*>(far) + 64, 1, 3);
    }
    if (j + kAhead < starts.size()) {
      const Node* near = starts[j + kAhead];
      for (const auto& in : near->inputs) __builtin_prefetch(in.get(), 1, 3);
      __builtin_prefetch(near->shape.data());
    }
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
      // op, dtype and rank in one word (each field has room: op < 2^16, dtype < 2^8).
      uint64_t h = mix(0, static_cast<uint64_t>(n->op) | static_cast<uint64_t>(n->dtype) << 16 |
                              (0x4000 + n->shape.size()) << 32);
      for (int64_t d : n->shape) h = mix(h, sizes.word(d));
      g.collectives |= is_collective(n->op);
      // A node without attributes is keyed with the default ones instead of its own (three
      // cold cache lines per node of a long chain), whose key is computed once per graph
      // where the op has no size attributes (attrs_key is then their hash).
      static const Attrs kNoAttrs;
      h = mix(h, n->has_attrs                             ? attrs_key(n->op, n->attrs, sizes)
                 : size_attrs_of(n->op) == SizeAttrs::kNone ? no_attrs_hash
                                                            : attrs_key(n->op, kNoAttrs, sizes));
      for (const auto& in : n->inputs) {
        uint64_t kind = in->materialized() ? 1 : in->op == OpId::kScalar ? 2 : 3;
        h = mix(h, kind << 32 | static_cast<uint32_t>(in->slot));
        g.operands.push_back(static_cast<uint32_t>(kind << 30) | static_cast<uint32_t>(in->slot));
      }
      key = mix(key, h);
      stack.pop_back();
    }
  }
  for (size_t j = 0; j < roots.size(); ++j) {
    Node* root = roots[j].get();
    // Read again after the walk: on a wide graph evicted since (fetched ahead).
    if (j + 4 * kAhead < roots.size()) __builtin_prefetch(roots[j + 4 * kAhead].get(), 1, 3);
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
    // Little work per node: fetched further ahead than the walk's kAhead.
    if (i + 4 * kAhead < g.order.size()) __builtin_prefetch(g.order[i + 4 * kAhead], 1, 3);
    if (n->mark == (mark | 3)) continue;
    if (n->use_count() > static_cast<int64_t>(n->graph_refs) + n->cache_refs) {
      n->mark = mark | 3;
      g.roots.push_back(n);
      g.root_values.push_back(n->slot);
      key = mix(key, 0x3000 + static_cast<uint64_t>(n->slot));
    }
  }
  // A one-off deeper walk (a sync of a million-node chain) does not keep its stack's memory.
  if (stack.capacity() > kKeptStack) std::vector<std::pair<Node*, size_t>>().swap(stack);
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

Graph::~Graph() {
  SpareBuffers* k = spare;
  if (k == nullptr) return;
  keep_larger(order, k->order);
  keep_larger(inputs, k->inputs);
  keep_larger(scalars, k->scalars);
  keep_larger(roots, k->roots);
  keep_larger(operands, k->operands);
  keep_larger(size_ids, k->size_ids);
  keep_larger(root_values, k->root_values);
  keep_larger(values, k->values);
}

// A graph with collectives is ordered again with each collective's operand cone first (in the
// order the collectives were found), then the rest: a collective starts as early as its
// operands allow (DDP: a bucket's all-reduce right after its gradients, before the earlier
// layers' backward), and the backend finishes it at its first reader, so the data moves while
// the rest computes. Every rank builds the same order, so the collectives start in the same
// order everywhere. Values do not depend on the order (random ops draw from (seed, offset)).
Graph build_graph(absl::Span<const NodePtr> roots) {
  Graph g = build_graph_from(roots, {});
  if (!g.collectives) return g;  // seen in the walk: the nodes are not read again
  std::vector<Node*> collectives;
  for (Node* n : g.order)
    if (is_collective(n->op)) collectives.push_back(n);
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

void gather_values(Graph& g) {
  if (g.values.size() == g.order.size() && !g.order.empty()) return;
  g.values.clear();
  g.shapes.clear();
  g.values.reserve(g.order.size());
  ShapeTable shapes(&g.shapes);
  TrivialSizes trivial;
  for (Node* in : g.inputs) trivial.input(in->data->layout, shapes.id(IntSpan(in->data->layout.shape)));
  // The nodes in order (fetched ahead: on a graph of 1e5 they are scattered over memory),
  // their operands from Graph::operands.
  constexpr size_t kFar = 16, kNear = 8;
  size_t next_operand = 0;
  for (size_t i = 0; i < g.order.size(); ++i) {
    if (i + kFar < g.order.size()) __builtin_prefetch(g.order[i + kFar]);
    if (i + kNear < g.order.size()) __builtin_prefetch(g.order[i + kNear]->shape.data());
    const Node* n = g.order[i];
    const int32_t shape_id = shapes.id(IntSpan(n->shape));
    const int32_t num_inputs = static_cast<int32_t>(n->inputs.size());
    if (trivial.ok) {
      trivial.begin(n->op, shape_id);
      for (int32_t k = 0; k < num_inputs; ++k) {
        const uint32_t ref = g.operands[next_operand + k];
        trivial.operand(Graph::operand_kind(ref), Graph::operand_slot(ref), g.values);
      }
      trivial.end();
    }
    next_operand += num_inputs;
    g.values.push_back({n->op, n->dtype, n->has_attrs, num_inputs, shape_id});
  }
  g.sizes_trivial = trivial.result(g.shapes);
}

}  // namespace sloth::lazy
