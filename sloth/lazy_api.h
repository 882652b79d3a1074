// Lazy execution controls: sync points, IR dumps and runtime metrics.
#pragma once

#include <string>
#include <vector>

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

struct Metrics {
  int64_t ops_traced = 0;
  int64_t graphs_executed = 0;
  int64_t plan_cache_hits = 0;
  int64_t plan_cache_misses = 0;
  int64_t kernels_launched = 0;
  int64_t row_blocked_steps = 0;  // CPU: steps run row block by row block with the steps
                                  // around them, so intermediates stay in cache
  int64_t bytes_allocated = 0;   // bytes taken by kernels' outputs during runs
  double trace_s = 0, plan_s = 0, execute_s = 0;
  int64_t nodes_executed = 0;
  int64_t host_syncs = 0;
  int64_t auto_flushes = 0;
  int64_t os_allocations = 0;    // host blocks taken from the OS (caching allocator misses)
  int64_t os_bytes = 0;
  int64_t cached_bytes = 0;      // host bytes held in the allocator's free lists
  int64_t live_ir_nodes = 0;     // IR nodes alive now, pending or holding data (not reset):
                                 // flat from step to step in a loop that keeps no history
  std::string last_miss_reason;  // why the last plan-cache miss missed, e.g. which shape changed
  std::string to_string() const;
};
Metrics metrics();
void reset_metrics();

// Past this many recorded nodes without a sync, the pending graph is flushed by itself.
void set_auto_flush_limit(int64_t nodes);

}  // namespace sloth
