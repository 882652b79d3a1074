#include "sloth/lazy_api.h"

#include "absl/strings/str_format.h"
#include "core/storage.h"
#include "lazy/ir_dump.h"
#include "lazy/metrics.h"
#include "lazy/node.h"
#include "lazy/scheduler.h"
#include "lazy/tensor_impl.h"

namespace sloth {
namespace {
AllocatorStats& stats_at_reset() {
  static AllocatorStats s;
  return s;
}
std::vector<lazy::NodePtr> roots_of(const std::vector<Tensor>& ts) {
  std::vector<lazy::NodePtr> roots;
  for (const auto& t : ts) {
    if (!t.defined()) fail("sync: tensor is undefined");
    roots.push_back(t.impl()->base_value());
  }
  return roots;
}
}  // namespace

void mark_step() { lazy::mark_step(); }

void sync(const std::vector<Tensor>& tensors) {
  for (Device d : {Device::cpu(), Device::cuda(0)}) {
    std::vector<lazy::NodePtr> roots;
    for (const auto& t : tensors) {
      if (!t.defined()) fail("sync: tensor is undefined");
      if (t.device() == d) roots.push_back(t.impl()->base_value());
    }
    if (!roots.empty()) lazy::sync_nodes(roots, d);
  }
}

std::string dump_ir(const std::vector<Tensor>& tensors, IrFormat format) {
  std::vector<lazy::NodePtr> roots;
  for (const auto& t : tensors) roots.push_back(t.impl()->value());
  return format == IrFormat::kText ? lazy::dump_text(roots) : lazy::dump_dot(roots);
}

std::string dump_plan(const std::vector<Tensor>& tensors) {
  return lazy::describe_plan(roots_of(tensors));
}

Metrics metrics() {
  const auto& c = lazy::counters();
  Metrics m;
  m.ops_traced = c.ops_traced;
  m.graphs_executed = c.graphs_executed;
  m.plan_cache_hits = c.plan_cache_hits;
  m.plan_cache_misses = c.plan_cache_misses;
  m.kernels_launched = c.kernels_launched;
  m.row_blocked_steps = c.row_blocked_steps;
  m.bytes_allocated = c.bytes_allocated;
  m.trace_s = c.trace_s;
  m.plan_s = c.plan_s;
  m.execute_s = c.execute_s;
  m.nodes_executed = c.nodes_executed;
  m.host_syncs = c.host_syncs;
  m.auto_flushes = c.auto_flushes;
  m.last_miss_reason = c.last_miss_reason;
  AllocatorStats s = cpu_allocator_stats();
  m.os_allocations = s.os_allocations - stats_at_reset().os_allocations;
  m.os_bytes = s.os_bytes - stats_at_reset().os_bytes;
  m.cached_bytes = s.cached_bytes;
  m.live_ir_nodes = lazy::live_nodes();
  return m;
}

void reset_metrics() {
  lazy::counters() = {};
  stats_at_reset() = cpu_allocator_stats();
}

void set_auto_flush_limit(int64_t nodes) { lazy::set_auto_flush_limit(nodes); }

std::string Metrics::to_string() const {
  return absl::StrFormat(
      "ops traced %d | graphs %d | plan cache %d hits / %d misses | kernels %d | nodes %d | "
      "host syncs %d | auto flushes %d | trace %.3f ms | plan %.3f ms | execute %.3f ms | OS "
      "allocations %d (%d bytes), cached %d bytes",
      ops_traced, graphs_executed, plan_cache_hits, plan_cache_misses, kernels_launched,
      nodes_executed, host_syncs, auto_flushes, trace_s * 1e3, plan_s * 1e3, execute_s * 1e3, os_allocations,
      os_bytes, cached_bytes);
}

}  // namespace sloth
