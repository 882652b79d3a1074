// Graph -> Plan: numbered slots, one instruction per node, kernels (grouped by the fusion
// pass), outputs and the liveness table that lets the executor release buffers early.
#pragma once

#include "lazy/graph.h"
#include "lazy/plan.h"

namespace sloth::lazy {

// Also merges repeated instructions (lazy/cse.h).
Plan lower(const Graph& graph);
// ---- dynamic shapes: stand-in sizes ----
// As lower(graph), with `resize` rewriting the plan's sizes (slots and instructions still
// numbered as the graph) before any pass reads them: the general plan of a graph whose sizes
// coincide is made at stand-in sizes (lazy/size_provenance.h). A resize that rewrites sizes
// clears Plan::shape_ids (the numbers were given for the real sizes). With a resize, CSE runs
// after it instead of inside the lowering walk.
Plan lower(const Graph& graph, void (*resize)(Plan&, void*), void* ctx);

// Groups instructions into kernels. Every decision that says no has a reason, printed with
// SLOTH_LOG=fusion. Without fusion every instruction is its own kernel.
void plan_kernels(Plan& plan, bool fuse);

}  // namespace sloth::lazy
