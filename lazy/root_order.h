// The order of a sync's roots, by structure (issue 15 part 2: one plan per step).
//
// build_graph numbers values in the order it walks the roots, and the plan-cache key hashes
// that numbering, so the same step flushed with its roots in another order is another plan.
// The roots a mark_step() finds come in the order their tensors were created: AdamW's moment
// tensors are the newest on the first step and among the oldest from the second on, so the
// first and later steps of one training loop had two plans. Roots are therefore ordered by a
// structural signature that sees neither sizes (so every size of a step orders alike), nor
// data (scalar values, input contents), nor creation order; roots of equal signature keep
// their incoming order. Results stay exact: a sync materializes each root node itself, so
// the order only decides how values are numbered, never which value lands where. Every rank
// of a distributed job orders its roots alike (the signature leaves out the rank a
// collective's attributes hold), so collectives still start in the same order everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "lazy/node.h"

namespace sloth::lazy {

// A hash of the IR near `root` (a bounded walk of its operand cone: ops, dtypes, ranks,
// attributes other than sizes, the wiring of what it visits; materialized nodes and scalar
// leaves as leaves). Bounded so that ordering costs O(roots), not O(graph).
uint64_t root_signature(const Node* root);

// Orders `roots` by root_signature, stably. Leaves the vector alone when already in order
// (the common case of a single root, or a flush whose roots have one signature).
void order_roots(std::vector<NodePtr>& roots);

}  // namespace sloth::lazy
