// Graph building: the pending IR that a set of roots needs, in execution order, with its
// structural key. Built in one iterative pass (chains can be long), so a warm flush costs
// one walk over the nodes plus a cache lookup.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/shape.h"
#include "lazy/node.h"

namespace sloth::lazy {

struct Graph {
  Graph() = default;
  Graph(const Graph&) = default;
  Graph(Graph&&) = default;
  Graph& operator=(const Graph&) = default;
  Graph& operator=(Graph&&) = default;
  // Hands the vectors' memory to this thread's next build_graph: a sync allocates no graph
  // buffers in steady state (after a large graph was freed, glibc's malloc took most of a
  // small graph's build in searching its bins).
  ~Graph();

  std::vector<Node*> order;    // pending nodes, operands before users
  std::vector<Node*> inputs;   // materialized nodes read by the graph (bound as data)
  std::vector<Node*> scalars;  // Scalar leaves (bound as data)
  std::vector<Node*> roots;    // outputs, deduplicated, pending only: the roots asked for, then
                               // every other node held from outside the graph (DESIGN I9)
  uint64_t key = 0;            // ops, attrs, shapes, dtypes, input layouts, wiring, outputs
  // The operands of order[0], order[1], ... in turn, each as (kind << 30 | slot) with kind
  // 1 = input, 2 = scalar, 3 = value (see operand_kind): lowering reads them here instead of
  // visiting every operand node again (on a graph of 1e5 nodes those are cache misses).
  std::vector<uint32_t> operands;
  std::vector<int32_t> root_values;  // the value number (slot) of each root, in order
  static constexpr uint32_t operand_kind(uint32_t ref) { return ref >> 30; }
  static constexpr int32_t operand_slot(uint32_t ref) { return static_cast<int32_t>(ref & 0x3fffffffu); }
  // Sizes are symbols (lazy/size_key.h): struct_key sees each size >= 2 only as "a size";
  // key adds which of them are equal (size_ids: the symbol of each size >= 2 in walk order;
  // sizes: each symbol's value). Graphs of one key differ only in `sizes`.
  uint64_t struct_key = 0;
  std::vector<int64_t> sizes;
  std::vector<uint32_t> size_ids;
  bool collectives = false;  // some node is a collective (build_graph orders them first)
  // What lowering needs of each node, filled by gather_values on a plan-cache miss (a hit needs
  // none of it, so the walk every sync makes does not pay for it): one prefetched pass over
  // the nodes, after which lower() and the passes after it read no node but for attributes
  // (scattered over memory: on a graph of 1e5 nodes every visit is a cache miss). values[i]
  // describes order[i]; shape numbers index `shapes`, the graph's distinct shapes, each
  // stored once (equal numbers: equal shapes).
  struct Value {
    OpId op;
    DType dtype;
    bool has_attrs;
    int32_t num_inputs;
    int32_t shape;
  };
  std::vector<Value> values;
  std::vector<Shape> shapes;
  // True when no size can coincide with another that the ops do not force equal (set by
  // gather_values): every node is elementwise over operands of its own shape (or scalars), the
  // inputs are contiguous, all joined into one component by the ops, of one shape whose sizes
  // >= 2 are distinct. The size-provenance pass (lazy/size_provenance.h) has nothing to split
  // then, and the scheduler skips it (and CSE runs inside the lowering walk).
  bool sizes_trivial = false;
};

Graph build_graph(absl::Span<const NodePtr> roots);

// Fills g.values, g.shapes and g.sizes_trivial (once; lower() calls it on a copy of a graph
// that lacks them).
void gather_values(Graph& g);

}  // namespace sloth::lazy
