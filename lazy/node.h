// The lazy IR. A Node is one op applied to operand nodes; it is immutable once made (pure IR:
// nothing aliases or mutates a node's result). Its structural hash is computed once, at
// creation, from the op, attrs, shape, dtype and operand hashes; data enters only through
// leaves whose hash is their shape and dtype, never their values.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/container/inlined_vector.h"
#include "core/attrs.h"
#include "core/dims.h"
#include "core/op_table.h"
#include "core/ref.h"
#include "lazy/device_data.h"

namespace sloth::lazy {

class Node;
using NodePtr = Ref<Node>;

class Node final : public RefCounted {
 public:
  // Field order is for locality: what recording, graph building and freeing touch for every
  // node (op, scratch, hash, scalar, operands, shape) is the first two cache lines (for shapes
  // of up to 3 dims; a 4th dim is in the third); data, then attrs (168 bytes, mostly empty)
  // last. A 1e5-node graph walks this for each node.
  OpId op = OpId::kData;
  DType dtype = DType::kFloat32;
  // attrs differs from Attrs(): recording an op without attributes (add, mul) then neither
  // copies nor clears them, and never touches their cache lines.
  bool has_attrs = false;
  // data.has_value(), kept in the first cache line: the graph walk and freeing ask it of every
  // node, and `data`'s own flag sits three lines in. Only node.cc writes `data`.
  bool has_data = false;
  // Scratch used while building a graph (see graph.cc); meaningless outside. graph_refs: how
  // many edges of the graph being built point at this node, so the scheduler can tell the
  // references it accounts for from holders outside the graph.
  int32_t slot = -1;
  int32_t graph_refs = 0;
  // How many of this node's references are view caches (TensorImpl's memo of a view's value).
  // A cache never reads a pending node whose base a sync materialized (it replays the view
  // on the base's data instead), so such a reference does not make the node a graph output.
  int32_t cache_refs = 0;
  uint64_t mark = 0;
  uint64_t hash = 0;
  double scalar = 0;                // kScalar: the value, which is data (not hashed)
  absl::InlinedVector<NodePtr, 3> inputs;
  // Inline (core/dims.h): a node's shape is no heap block of its own. Reads like a Shape and
  // converts to IntSpan; to_shape() makes a Shape.
  Dims shape;
  std::optional<DeviceData> data;   // kData leaves, and nodes materialized by a sync (has_data)
  Attrs attrs;

  bool materialized() const { return has_data; }
  // Keeps `d` as this node's value and drops the operands: whatever consumes this node from
  // now on reads the data, and the IR above it can be freed.
  void materialize(DeviceData d);

  // Makers. `make` takes already-checked shape/dtype (the op table's rule ran in the face).
  static NodePtr make(OpId op, IntSpan shape, DType dtype, const Attrs& attrs,
                      absl::Span<const NodePtr> inputs);
  static NodePtr make(OpId op, IntSpan shape, DType dtype, const Attrs& attrs,
                      absl::Span<Node* const> inputs);
  static NodePtr data_leaf(DeviceData d);
  static NodePtr scalar_leaf(double value, DType dtype);

 protected:
  // Iterative (a chain of a million nodes must not recurse) and recycling: dead nodes go to
  // a per-thread pool with their vectors' capacity, so recording allocates nothing in
  // steady state.
  void release() override;
  static Node* acquire();
};

// Nodes alive now (made and not yet released), on every thread.
int64_t live_nodes();

// Pending nodes alive now: made, and neither materialized by a sync nor freed (the
// bounded-graph policy reads it). Not "made since the last mark_step()": a loop that syncs
// with item() only materializes what it computes, and freed temporaries are not pending IR.
int64_t pending_nodes();

}  // namespace sloth::lazy
