// Runtime counters behind sloth::metrics(). Cheap to bump (plain integers; the trace path is
// single-threaded per tensor program).
#pragma once

#include <cstdint>
#include <string>

namespace sloth::lazy {

struct Counters {
  int64_t ops_traced = 0;
  int64_t graphs_executed = 0;
  int64_t plan_cache_hits = 0;
  int64_t plan_cache_misses = 0;
  int64_t kernels_launched = 0;
  int64_t row_blocked_steps = 0;  // kernel steps run row-blocked (CPU row groups)
  int64_t bytes_allocated = 0;
  int64_t nodes_executed = 0;   // IR nodes in executed graphs
  int64_t host_syncs = 0;       // item/to_vector/printing
  int64_t auto_flushes = 0;     // graphs flushed because the pending IR grew past the limit
  double trace_s = 0, plan_s = 0, execute_s = 0;
  std::string last_miss_reason;  // why the last plan-cache miss missed (SLOTH_LOG=plans prints each)
};

Counters& counters();

}  // namespace sloth::lazy
