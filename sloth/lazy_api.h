// Lazy execution controls: sync points, IR dumps and runtime metrics.
#pragma once

#include <string>
#include <vector>

#include "lazy/metrics.h"
#include "sloth/tensor.h"

namespace sloth {

// Flushes all pending live tensors as ONE graph per device.
void mark_step();
// Flushes just these tensors and what they need.
void sync(const std::vector<Tensor>& tensors);

enum class IrFormat { kText, kDot };
std::string dump_ir(const std::vector<Tensor>& tensors, IrFormat format = IrFormat::kText);
// The plan (kernels after fusion) a sync of these tensors would run.
std::string dump_plan(const std::vector<Tensor>& tensors);

// The runtime counters (each one is listed, with what it counts, in SLOTH_COUNTERS of
// lazy/metrics.h: ops_traced, graphs_executed, plan_cache_hits, plan_cache_misses,
// kernels_launched, row_blocked_steps, frozen_runs, bytes_allocated, nodes_executed, host_syncs,
// auto_flushes, trace_s, plan_s, execute_s, last_miss_reason), then the allocator's.
struct Metrics {
  SLOTH_COUNTERS(SLOTH_COUNTER_FIELD)
  int64_t os_allocations = 0;    // host blocks taken from the OS (caching allocator misses)
  int64_t os_bytes = 0;
  int64_t cached_bytes = 0;      // host bytes held in the allocator's free lists
  int64_t live_ir_nodes = 0;     // IR nodes alive now, pending or holding data (not reset):
                                 // flat from step to step in a loop that keeps no history
  std::string to_string() const;
};
Metrics metrics();
void reset_metrics();

// Past this many recorded nodes without a sync, the pending graph is flushed by itself.
void set_auto_flush_limit(int64_t nodes);

}  // namespace sloth
