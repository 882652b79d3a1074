#include "lazy/node.h"

#include <atomic>
#include <vector>

#include "absl/hash/hash.h"
#include "core/prefetch.h"
#include "core/slab_pool.h"

namespace sloth::lazy {
namespace {

// Counts shared by all threads (nodes may be made or dropped on another thread, a data
// loader) but bumped without a locked read-modify-write: they run for every node on the trace
// path, and they only steer the auto-flush heuristic and a metric, so an update lost when two
// threads make or drop nodes at the same instant is harmless.
std::atomic<int64_t> pending_count{0};
std::atomic<int64_t> live_count{0};
inline void bump(std::atomic<int64_t>& c, int64_t d) {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

// Nodes come from per-thread slabs (core/slab_pool.h): neighbouring ops get neighbouring
// nodes whatever was freed before, and a recycled node keeps its vectors' capacity.
constexpr size_t kNodeStride = (sizeof(Node) + 63) & ~size_t{63};
const SlabPool::Type kNodeSlab{kNodeStride, [](void* p) { static_cast<Node*>(p)->~Node(); }};
thread_local SlabPool* node_slabs = nullptr;

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix-style combine: cheap, order-dependent, good avalanche.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t leaf_hash(OpId op, IntSpan shape, DType dtype) {
  uint64_t h = mix(static_cast<uint64_t>(op) * 0x100000001b3ull, static_cast<uint64_t>(dtype));
  for (int64_t d : shape) h = mix(h, static_cast<uint64_t>(d));
  return mix(h, shape.size());
}

}  // namespace

int64_t live_nodes() { return live_count.load(std::memory_order_relaxed); }
int64_t pending_nodes() { return pending_count.load(std::memory_order_relaxed); }

void Node::materialize(DeviceData d) {
  if (!has_data) bump(pending_count, -1);
  data = std::move(d);
  has_data = true;
  inputs.clear();
}

Node* Node::acquire() {
  bump(live_count, 1);
  bool fresh;
  void* p = SlabPool::take<kNodeStride>(kNodeSlab, node_slabs, &fresh);
  // The nodes of the next ops (an op and its scalar leaf take two) are the next slots: fetch
  // the two lines a maker writes (through a 3-dim shape, which is inline) four ahead, which
  // a slot past the chunk's end does not fault on (a prefetch never does).
  prefetch_for_write(static_cast<char*>(p) + 4 * kNodeStride, 128);
  return fresh ? new (p) Node() : static_cast<Node*>(p);
}

namespace {
// attrs are written only when the op has some (`has`: !attrs.is_default()), and cleared only
// when a recycled node had some.
inline void set_attrs(Node* n, const Attrs& attrs, bool has) {
  if (has) {
    n->attrs = attrs;
    n->has_attrs = true;
  } else if (n->has_attrs) {
    n->attrs = Attrs();
    n->has_attrs = false;
  }
}
inline void set_attrs(Node* n, const Attrs& attrs) { set_attrs(n, attrs, !attrs.is_default()); }
// The hash of no attributes (most elementwise ops), computed once.
const uint64_t kDefaultAttrsHash = Attrs().hash();
}  // namespace

NodePtr Node::make(OpId op, IntSpan shape, DType dtype, const Attrs& attrs,
                   absl::Span<const NodePtr> inputs) {
  absl::InlinedVector<Node*, 4> raw;
  for (const auto& in : inputs) raw.push_back(in.get());
  return make(op, shape, dtype, attrs, absl::Span<Node* const>(raw));
}

NodePtr Node::make(OpId op, IntSpan shape, DType dtype, const Attrs& attrs,
                   absl::Span<Node* const> inputs) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = op;
  n->dtype = dtype;
  const bool has_attrs = !attrs.is_default();
  uint64_t h = leaf_hash(op, shape, dtype);
  h = mix(h, has_attrs ? attrs.hash() : kDefaultAttrsHash);
  for (const Node* in : inputs) h = mix(h, in->hash);
  n->hash = h;
  n->shape = shape;
  set_attrs(n.get(), attrs, has_attrs);
  // A node from the pool has no operands (release() clears them), nor has a new one.
  for (Node* in : inputs) n->inputs.emplace_back(in);
  if (op != OpId::kScalar) bump(pending_count, 1);
  return n;
}

NodePtr Node::data_leaf(DeviceData d) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = OpId::kData;
  set_attrs(n.get(), Attrs());
  n->dtype = d.dtype;
  n->shape = d.layout.shape;
  n->hash = leaf_hash(OpId::kData, n->shape, n->dtype);
  n->data = std::move(d);
  n->has_data = true;
  return n;
}

NodePtr Node::scalar_leaf(double value, DType dtype) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = OpId::kScalar;
  set_attrs(n.get(), Attrs());
  n->dtype = dtype;
  n->scalar = value;
  // 0-dim, with no operands: a node from the pool has both empty (release() clears them), so
  // a scalar leaf writes only its first cache line.
  n->hash = leaf_hash(OpId::kScalar, IntSpan(), dtype);
  return n;
}

void Node::release() {
  // Deleting a node drops its operands, which may delete them in turn. Do it with a work
  // list instead of recursion.
  thread_local std::vector<Node*>* pending = nullptr;
  thread_local bool draining = false;
  if (pending == nullptr) {
    pending = new std::vector<Node*>();
    // Frees the list when the thread exits (data loader workers come and go). A release from
    // a thread-exit destructor that runs later makes a new list, which is then not freed.
    struct Owner {
      ~Owner() { delete pending; pending = nullptr; }
    };
    thread_local Owner owner;
    (void)owner;
  }
  pending->push_back(this);
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    Node* n = pending->back();
    pending->pop_back();
    // The operands are usually freed next (a chain is freed link by link): start fetching
    // their lines now, while this node is reset.
    for (const auto& in : n->inputs) __builtin_prefetch(in.get(), 1, 3);  // its reference count
    bump(live_count, -1);
    if (!n->has_data && n->op != OpId::kScalar) bump(pending_count, -1);
    if (n->has_data) {
      n->data.reset();
      n->has_data = false;
    }
    // attrs are left for the next maker (make() assigns them where the op has some, and
    // clears them where it has none and the recycled node had some: see has_attrs).
    n->shape.clear();
    n->mark = 0;
    n->slot = -1;
    n->graph_refs = 0;
    n->cache_refs = 0;
    n->scalar = 0;
    // Dropping the inputs may release more nodes (release() re-enters above and queues them).
    n->inputs.clear();
    SlabPool::give<kNodeStride>(kNodeSlab, node_slabs, n);
  }
  draining = false;
}

}  // namespace sloth::lazy
