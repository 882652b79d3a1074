#include "lazy/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/settings.h"
#include "lazy/backend.h"
#include "lazy/graph.h"
#include "lazy/ir_dump.h"
#include "lazy/lowering.h"
#include "lazy/metrics.h"
#include "lazy/profiler.h"
#include "lazy/tensor_impl.h"

namespace sloth::lazy {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct CachedPlan {
  Plan plan;
  std::unique_ptr<Executable> exe;
  // Some kernel checks data at run time (index bounds) and may fail half-way: then no input
  // is donated, so a failed sync leaves every input as it was.
  bool fallible = false;
};

bool plan_is_fallible(const Plan& p) {
  for (const Instr& in : p.instrs)
    if (op_info(in.op).category == OpCategory::Index) return true;
  return false;
}

struct PlanCache {
  absl::flat_hash_map<uint64_t, std::unique_ptr<CachedPlan>> plans[2];  // per DeviceType
};
PlanCache& cache() {
  static auto* c = new PlanCache();
  return *c;
}

int64_t auto_flush_limit = 20000;
bool in_sync = false;
thread_local bool worker_thread = false;  // ---- data loader workers: no auto-flush here ----

bool fusion_enabled() { return settings().fusion; }

// Why a plan missed the cache: the first instruction that differs from the nearest cached
// plan (the one sharing the longest prefix), so a user sees which op or shape changed.
std::string miss_reason(const Plan& p, DeviceType dt) {
  const Plan* best = nullptr;
  size_t best_len = 0;
  for (const auto& [k, c] : cache().plans[static_cast<int>(dt)]) {
    const Plan& q = c->plan;
    size_t n = 0;
    while (n < p.instrs.size() && n < q.instrs.size() && p.instrs[n].op == q.instrs[n].op &&
           p.instrs[n].shape == q.instrs[n].shape && p.instrs[n].dtype == q.instrs[n].dtype &&
           p.instrs[n].attrs == q.instrs[n].attrs && p.instrs[n].in == q.instrs[n].in)
      ++n;
    if (!best || n > best_len) { best = &q; best_len = n; }
  }
  if (!best) return "first graph on this device";
  if (best_len < p.instrs.size() && best_len < best->instrs.size()) {
    const Instr &a = p.instrs[best_len], &b = best->instrs[best_len];
    std::string what = a.op != b.op ? absl::StrFormat("op %s vs %s", op_name(a.op), op_name(b.op))
                     : a.shape != b.shape ? absl::StrFormat("shape %s vs %s", shape_str(a.shape), shape_str(b.shape))
                     : a.dtype != b.dtype ? absl::StrFormat("dtype %s vs %s", dtype_name(a.dtype), dtype_name(b.dtype))
                     : a.attrs != b.attrs ? std::string("attributes differ")
                     : std::string("operands are wired differently");
    return absl::StrFormat("instruction %d (%s) differs from the nearest cached plan: %s", best_len,
                           op_name(a.op), what);
  }
  if (p.instrs.size() != best->instrs.size())
    return absl::StrFormat("%d instructions vs %d in the nearest cached plan", p.instrs.size(),
                           best->instrs.size());
  for (size_t i = 0; i < p.slots.size() && i < best->slots.size(); ++i)
    if (p.slots[i].kind == SlotKind::kInput &&
        (p.slots[i].shape != best->slots[i].shape || p.slots[i].input_strides != best->slots[i].input_strides))
      return absl::StrFormat("input %d has shape %s strides %s (cached: %s strides %s)", i,
                             shape_str(p.slots[i].shape), shape_str(p.slots[i].input_strides),
                             shape_str(best->slots[i].shape), shape_str(best->slots[i].input_strides));
  return "outputs or input layouts differ from the nearest cached plan";
}

}  // namespace

Counters& counters() {
  static Counters c;
  return c;
}

bool log_enabled(const char* topic) { return settings().log_on(topic); }

void set_auto_flush_limit(int64_t nodes) { auto_flush_limit = nodes; }

void sync_nodes(absl::Span<const NodePtr> roots, Device device) {
  std::lock_guard<std::recursive_mutex> trace_guard(trace_lock());
  Backend* backend = backend_for(device);
  if (backend == nullptr)
    fail("sync: no backend for device %s; %s", device.str(),
         device.is_cuda() ? "build with --config=cuda on a machine with a GPU" : "link //backends/cpu");
  // trace_s: wall time between the end of one sync and the start of the next (recording
  // and whatever else the program did), so trace-bound steps are visible next to plan/execute.
  static Clock::time_point last_sync_end = Clock::now();
  static int64_t last_sync_end_ns = 0;  // the profiler's clock
  profiling::start_from_env_once();
  auto t0 = Clock::now();
  counters().trace_s += std::chrono::duration<double>(t0 - last_sync_end).count();
  struct MarkEnd {
    ~MarkEnd() {
      last_sync_end = Clock::now();
      if (profiling::on()) last_sync_end_ns = profiling::now_ns();
    }
  } mark_end;
  if (profiling::on()) {
    // The trace phase: from the previous sync's end (or the session's start) to this one.
    const int64_t now = profiling::now_ns(), from = std::clamp<int64_t>(last_sync_end_ns, 0, now);
    profiling::record({.kind = profiling::Kind::kPhase, .tid = 0, .start_ns = from,
                       .dur_ns = now - from, .name = "trace", .detail = "recording ops"});
  }
  profiling::Scope plan_scope(profiling::Kind::kPhase, "plan");
  Graph g = build_graph(roots);
  if (g.roots.empty()) return;
  auto& plans = cache().plans[static_cast<int>(device.type)];
  const int64_t misses_before = counters().plan_cache_misses;
  auto it = plans.find(g.key);
  CachedPlan* cp;
  if (it != plans.end()) {
    ++counters().plan_cache_hits;
    cp = it->second.get();
  } else {
    ++counters().plan_cache_misses;
    auto fresh = std::make_unique<CachedPlan>();
    fresh->plan = lower(g);
    plan_kernels(fresh->plan, fusion_enabled());
    counters().last_miss_reason = miss_reason(fresh->plan, device.type);
    if (log_enabled("plans"))
      std::fprintf(stderr, "[sloth] plan cache miss (%s)\n%s", counters().last_miss_reason.c_str(),
                   fresh->plan.describe().c_str());
    if (settings().dump_ir) std::fprintf(stderr, "[sloth] IR of a new graph:\n%s", dump_text(roots).c_str());
    fresh->fallible = plan_is_fallible(fresh->plan);
    fresh->exe = backend->compile(fresh->plan);
    cp = fresh.get();
    plans[g.key] = std::move(fresh);
  }
  counters().plan_s += seconds_since(t0);
  if (profiling::on())
    plan_scope.set_detail(absl::StrFormat("%s, %d nodes", counters().plan_cache_misses > misses_before
                                                              ? "plan cache miss"
                                                              : "plan cache hit",
                                          g.order.size()));
  plan_scope.finish();

  auto t1 = Clock::now();
  profiling::Scope exec_scope(profiling::Kind::kPhase, "execute");
  // Bind inputs. One that only this graph's nodes reference, and whose storage only it holds,
  // is dead once the graph has run: hand it over so a kernel can write in place (donation).
  // "Dead" holds because build_graph made every graph node that is held from outside an
  // output: the graph's other nodes are freed once the outputs hold data, so no pending node
  // that reads a donated input survives the sync. (A view cache may still hold such a node,
  // but a cache is never read once its base holds data.)
  std::vector<DeviceData> inputs;
  inputs.reserve(g.inputs.size());
  bool donating = false;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Node* n = g.inputs[i];
    if (!cp->fallible && n->use_count() == n->graph_refs && n->data->storage &&
        n->data->storage->use_count() == 1 && !n->data->storage->external()) {
      inputs.push_back(std::move(*n->data));
      donating = true;
    } else {
      inputs.push_back(*n->data);
    }
  }
  std::vector<double> scalars;
  scalars.reserve(g.scalars.size());
  for (Node* n : g.scalars) scalars.push_back(n->scalar);
  std::vector<DeviceData> outputs;
  RunStats stats;
  absl::Status st = donating ? cp->exe->run_donating(absl::MakeSpan(inputs), scalars, &outputs, &stats)
                             : cp->exe->run(inputs, scalars, &outputs, &stats);
  counters().execute_s += seconds_since(t1);
  if (!st.ok()) throw Error(std::string(st.message()));
  for (size_t i = 0; i < g.roots.size(); ++i) g.roots[i]->materialize(std::move(outputs[i]));
  ++counters().graphs_executed;
  counters().kernels_launched += stats.kernels_launched;
  counters().row_blocked_steps += stats.row_blocked_steps;
  counters().bytes_allocated += stats.bytes_allocated;
  counters().nodes_executed += static_cast<int64_t>(g.order.size());
}

void mark_step() {
  std::lock_guard<std::recursive_mutex> trace_guard(trace_lock());
  if (in_sync) return;
  in_sync = true;
  struct Reset { ~Reset() { in_sync = false; } } reset;
  for (Device d : {Device::cpu(), Device::cuda(0)}) {
    if (!has_backend(d.type)) continue;
    auto groups = pending_groups(d);
    if (groups.empty()) continue;
    std::vector<NodePtr> roots;
    roots.reserve(groups.size());
    for (const auto& g : groups) roots.push_back(g->value);
    sync_nodes(roots, d);
  }
}

void maybe_auto_flush() {
  if (!worker_thread && pending_nodes() > auto_flush_limit && !in_sync) {
    ++counters().auto_flushes;
    mark_step();
  }
}

// ---- data loader workers ----
std::recursive_mutex& trace_lock() {
  static std::recursive_mutex mu;
  return mu;
}
WorkerTraceScope::WorkerTraceScope() : lock(trace_lock()) { worker_thread = true; }
WorkerTraceScope::~WorkerTraceScope() { worker_thread = false; }

std::string describe_plan(absl::Span<const NodePtr> roots) {
  Graph g = build_graph(roots);
  Plan p = lower(g);
  plan_kernels(p, fusion_enabled());
  return p.describe();
}

int64_t plan_cache_size() {
  return static_cast<int64_t>(cache().plans[0].size() + cache().plans[1].size());
}
void clear_plan_cache() {
  cache().plans[0].clear();
  cache().plans[1].clear();
}

}  // namespace sloth::lazy
