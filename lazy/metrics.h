// Runtime counters behind sloth::metrics(). Cheap to bump (plain integers; the trace path is
// single-threaded per tensor program).
#pragma once

#include <cstdint>
#include <string>

// Every runtime counter, declared once: X(type, name, label). lazy::Counters below and the
// public sloth::Metrics (sloth/lazy_api.h) are generated from this list, and so are the copy
// between them and Metrics::to_string, so adding a counter is one line here.
#define SLOTH_COUNTERS(X)                                                                     \
  X(int64_t, ops_traced, "ops traced")                                                        \
  X(int64_t, graphs_executed, "graphs")                                                       \
  X(int64_t, plan_cache_hits, "plan cache hits")                                              \
  X(int64_t, plan_cache_misses, "plan cache misses")                                          \
  /* a cached plan mapped to new sizes (lazy/plan_instance.h): no lowering or fusion, only    \
     the backend's compile; repeated sizes reuse it (plan_cache_hits counts those hits too) */ \
  X(int64_t, plan_instantiations, "plan instantiations")                                      \
  /* misses planned at stand-in sizes: sizes coincided where no op forces them equal          \
     (lazy/size_provenance.h) */                                                              \
  X(int64_t, plans_generalized, "plans generalized")                                          \
  X(int64_t, kernels_launched, "kernels")                                                     \
  /* CPU: steps run row block by row block with the steps around them (row groups), so        \
     intermediates stay in cache */                                                           \
  X(int64_t, row_blocked_steps, "row-blocked steps")                                          \
  /* CPU: graphs run from their frozen form (a repeat of a completed run's layouts: no        \
     per-kernel binding; SLOTH_LOG=frozen says why a plan has none) */                       \
  X(int64_t, frozen_runs, "frozen runs")                                                      \
  X(int64_t, bytes_allocated, "bytes allocated") /* by kernels' outputs during runs */        \
  X(int64_t, nodes_executed, "nodes") /* IR nodes in executed graphs */                       \
  X(int64_t, host_syncs, "host syncs") /* item/to_vector/printing */                          \
  /* graphs flushed because the pending IR grew past the limit */                             \
  X(int64_t, auto_flushes, "auto flushes")                                                    \
  X(double, trace_s, "trace (s)")                                                             \
  X(double, plan_s, "plan (s)")                                                               \
  /* the planning thread's CPU time in the plan phase: plan_s is wall time, which on a        \
     loaded machine also counts time the thread waited for a core */                          \
  X(double, plan_cpu_s, "plan cpu (s)")                                                       \
  X(double, execute_s, "execute (s)")                                                         \
  /* why the last plan-cache miss missed, e.g. which shape changed (SLOTH_LOG=plans prints    \
     each) */                                                                                 \
  X(std::string, last_miss_reason, "last miss")

// One field of a struct generated from SLOTH_COUNTERS.
#define SLOTH_COUNTER_FIELD(type, name, label) type name{};

namespace sloth::lazy {

struct Counters {
  SLOTH_COUNTERS(SLOTH_COUNTER_FIELD)
};

Counters& counters();

}  // namespace sloth::lazy
