#include "lazy/node.h"

#include <atomic>
#include <vector>

#include "absl/hash/hash.h"

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

// Up to 1<<18 recycled objects per thread (a program that had that many live keeps them, as a
// caching allocator would): recording 1e5 live `s * 2.0` (two nodes each: the op and its
// scalar leaf) then costs no malloc/free.
constexpr size_t kPoolCap = 1 << 18;
struct NodePool {
  std::vector<Node*> free;
  ~NodePool() {
    for (Node* n : free) delete n;
  }
};
thread_local NodePool node_pool;

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix-style combine: cheap, order-dependent, good avalanche.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t leaf_hash(OpId op, const Shape& shape, DType dtype) {
  uint64_t h = mix(static_cast<uint64_t>(op) * 0x100000001b3ull, static_cast<uint64_t>(dtype));
  for (int64_t d : shape) h = mix(h, static_cast<uint64_t>(d));
  return mix(h, shape.size());
}

}  // namespace

int64_t live_nodes() { return live_count.load(std::memory_order_relaxed); }
int64_t pending_nodes() { return pending_count.load(std::memory_order_relaxed); }

void Node::materialize(DeviceData d) {
  if (!data) bump(pending_count, -1);
  data = std::move(d);
  inputs.clear();
}

Node* Node::acquire() {
  bump(live_count, 1);
  auto& f = node_pool.free;
  if (f.empty()) return new Node();
  Node* n = f.back();
  f.pop_back();
  return n;
}

NodePtr Node::make(OpId op, const Shape& shape, DType dtype, const Attrs& attrs,
                   absl::Span<const NodePtr> inputs) {
  absl::InlinedVector<Node*, 4> raw;
  for (const auto& in : inputs) raw.push_back(in.get());
  return make(op, shape, dtype, attrs, absl::Span<Node* const>(raw));
}

NodePtr Node::make(OpId op, const Shape& shape, DType dtype, const Attrs& attrs,
                   absl::Span<Node* const> inputs) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = op;
  n->dtype = dtype;
  uint64_t h = leaf_hash(op, shape, dtype);
  h = mix(h, attrs.hash());
  for (const Node* in : inputs) h = mix(h, in->hash);
  n->hash = h;
  n->shape = shape;
  n->attrs = attrs;
  n->inputs.clear();
  for (Node* in : inputs) n->inputs.emplace_back(in);
  if (op != OpId::kScalar) bump(pending_count, 1);
  return n;
}

NodePtr Node::data_leaf(DeviceData d) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = OpId::kData;
  n->attrs = Attrs();
  n->dtype = d.dtype;
  n->shape = d.layout.shape;
  n->hash = leaf_hash(OpId::kData, n->shape, n->dtype);
  n->data = std::move(d);
  return n;
}

NodePtr Node::scalar_leaf(double value, DType dtype) {
  NodePtr n = NodePtr::adopt_new(acquire());
  n->op = OpId::kScalar;
  n->attrs = Attrs();
  n->dtype = dtype;
  n->scalar = value;
  n->shape.clear();
  n->hash = leaf_hash(OpId::kScalar, n->shape, dtype);
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
    bump(live_count, -1);
    if (!n->data && n->op != OpId::kScalar) bump(pending_count, -1);
    // Dropping the inputs may release more nodes (release() re-enters above and queues them).
    n->inputs.clear();
    n->data.reset();
    if (node_pool.free.size() < kPoolCap) {
      // attrs are left for the next maker to overwrite (make() assigns them, the leaf makers
      // reset them): most nodes carry attrs, so resetting here would write them twice.
      n->shape.clear();
      n->mark = 0;
      n->slot = -1;
      n->graph_refs = 0;
      n->cache_refs = 0;
      n->scalar = 0;
      node_pool.free.push_back(n);
    } else {
      delete n;
    }
  }
  draining = false;
}

}  // namespace sloth::lazy
