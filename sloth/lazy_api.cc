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
  lazy::explain_last_miss();
  const auto& c = lazy::counters();
  Metrics m;
#define SLOTH_COPY_COUNTER(type, name, label) m.name = c.name;
  SLOTH_COUNTERS(SLOTH_COPY_COUNTER)
#undef SLOTH_COPY_COUNTER
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

namespace {
void append(std::string& out, const char* label, int64_t v) {
  absl::StrAppendFormat(&out, "%s %d | ", label, v);
}
void append(std::string& out, const char* label, double seconds) {
  absl::StrAppendFormat(&out, "%s %.6f | ", label, seconds);
}
void append(std::string& out, const char* label, const std::string& v) {
  if (!v.empty()) absl::StrAppendFormat(&out, "%s: %s | ", label, v);
}
}  // namespace

std::string Metrics::to_string() const {
  std::string out;
#define SLOTH_APPEND_COUNTER(type, name, label) append(out, label, name);
  SLOTH_COUNTERS(SLOTH_APPEND_COUNTER)
#undef SLOTH_APPEND_COUNTER
  absl::StrAppendFormat(&out, "OS allocations %d (%d bytes), cached %d bytes", os_allocations,
                        os_bytes, cached_bytes);
  return out;
}

}  // namespace sloth
