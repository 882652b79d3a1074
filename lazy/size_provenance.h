// Which sizes of a graph are equal because the ops say so (size provenance), and the general
// plan for a graph whose sizes coincide (issue 15 part 2).
//
// A plan-cache key numbers sizes >= 2 by value (lazy/size_key.h), so a plan made where two
// sizes coincide (batch 8 == sequence length 8) assumes them equal and cannot serve a graph
// where they differ. At a plan-cache miss (never on a hit), this pass finds which size
// occurrences the ops FORCE equal: a union-find over every (input, dim), (input, stride),
// (node, dim) and size attribute, joined by each op's shape semantics (broadcasting,
// matmul's inner and batch dims, reductions, permutes, reshape's dim groups, whose product
// sides define a derived class, expand, slice, factories; any other op joins its operands'
// dims with its result's right-aligned where the values are equal). When a value's
// occurrences fall in two or more classes (a coincidence), every class but the first of that
// value gets a stand-in size (the next unused value above it; a product class the product of
// its factors' stand-ins), and the graph is planned at the stand-ins: a plan in which the
// coincident sizes are distinct, which serves this graph (mapped back to its sizes,
// lazy/plan_instance.h) and every later graph of the structure.
//
// Soundness rests on two join rules only: a rule that joins too much only gives a less
// general plan, and one that joins too little is caught before anything is planned, since
// every node touching a stand-in is checked by its op's own shape rule (core/op_rules.cc) at
// the stand-in sizes. The two exceptions are the rules that join each result dim to the
// operand dim it is taken from, elementwise broadcasting and a permutation: their result's
// classes are their operands', so their shape rules give the same dims at any stand-ins and
// are not run (they were most of the checks). The stand-in graph is then a graph a user
// could have recorded, of which this graph and any later one that takes the plan are
// specializations (the invariant that already lets one plan serve several sizes). Anything
// unexpected (a size 0, a reshape that regroups dims on both sides, a product that overflows,
// a stand-in that collides, a shape rule that disagrees) gives up, and the graph is planned
// exactly as before.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lazy/graph.h"
#include "lazy/plan.h"

namespace sloth::lazy {

struct StandInSizes {
  // The stand-in graph's key stream (Graph::sizes / size_ids form), cached with the plan.
  std::vector<int64_t> sizes;
  std::vector<uint32_t> size_ids;
  // The value in the real graph of each stand-in symbol (instantiate_plan's `to`).
  std::vector<int64_t> real;
  // Rows of sizes stored end to end (one allocation for all rows, not one per row: a graph of
  // 1e5 nodes has 1e5 rows).
  struct Rows {
    std::vector<int64_t> v;
    std::vector<int32_t> off{0};  // row r is v[off[r] .. off[r + 1])
    size_t size() const { return off.size() - 1; }
    std::span<const int64_t> operator[](size_t r) const {
      return {v.data() + off[r], static_cast<size_t>(off[r + 1] - off[r])};
    }
    void end_row() { off.push_back(static_cast<int32_t>(v.size())); }
  };
  // For the lowering hook: the stand-in of every size the key walk saw, per slot and
  // instruction (see apply()).
  Rows input_shapes, input_strides, node_shapes;
  Rows node_size_attrs;  // for_each_size_attr order
  std::string summary;                                 // which sizes were split, for the log

  // Rewrites a plan lower() just built for the graph (slots and instructions still numbered
  // as the graph) to the stand-in sizes.
  void apply(Plan& p) const;
};

// The stand-in sizes when `g`'s sizes coincide where its ops do not force them equal;
// nullopt when there is nothing to split or the pass gave up (then `*why`, when given, says
// why, or stays empty when no two sizes coincided). `p` is the plan lower() is building for
// `g`, before any pass (slots and instructions numbered as the graph): the pass reads the
// sizes there, where they lie together, rather than in the graph's nodes (lower's hook).
std::optional<StandInSizes> generalize_sizes(const Graph& g, const Plan& p, std::string* why);

}  // namespace sloth::lazy
