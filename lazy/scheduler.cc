#include "lazy/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "core/error.h"
#include "core/settings.h"
#include "lazy/backend.h"
#include "lazy/borrowed_memory.h"
#include "lazy/graph.h"
#include "lazy/ir_dump.h"
#include "lazy/lowering.h"
#include "lazy/metrics.h"
#include "lazy/plan_instance.h"
#include "lazy/profiler.h"
#include "lazy/root_order.h"
#include "lazy/size_key.h"
#include "lazy/size_provenance.h"
#include "lazy/tensor_impl.h"

namespace sloth::lazy {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// ---- the plan cache: plans per structure key, executables per key and sizes ----
// Sizes are symbols (lazy/size_key.h). Plans are kept per structure key (a graph's structure,
// ranks, dtypes, layouts and size-0/1 dims); a graph takes a plan of its structure key whose
// sizes it specializes, mapped to its own sizes (lazy/plan_instance.h). The backend's compiled
// form specializes on concrete sizes, so each plan keeps the executables of the sizes it ran at
// most recently (an epoch's last partial batch, alternating sequence lengths: no recompile).
struct Instance {
  uint64_t key = 0;            // Graph::key (which sizes are equal)
  std::vector<int64_t> sizes;  // Graph::sizes (their values)
  std::shared_ptr<Executable> exe;
  uint64_t used = 0;
};
struct CachedPlan {
  std::shared_ptr<const Plan> plan;  // as lowered and fused for `sizes`; shared with `base`
  uint64_t struct_key = 0;
  std::vector<int64_t> sizes;  // Graph::sizes and Graph::size_ids of the graph it was made for
  std::vector<uint32_t> size_ids;
  std::vector<Instance> instances;
  // The executable compiled with `plan`: instances for other sizes are made from it
  // (Backend::instantiate reuses what does not depend on sizes).
  std::shared_ptr<Executable> base;
  // Some kernel checks data at run time (index bounds) and may fail half-way: then no input
  // is donated, so a failed sync leaves every input as it was.
  bool fallible = false;
  uint64_t seq = 0;  // insertion order: a miss is explained by the plans cached before it
};
// Enough for every size of a typical variable-size task (sequence lengths 8..64, an epoch of
// 100 batch sizes) to stay compiled after its first use; an instance holds a plan and its
// programs (tens of KB for a transformer block's step), no buffers.
constexpr size_t kMaxInstances = 128;
uint64_t instance_clock = 0;

std::shared_ptr<Executable> find_instance(CachedPlan& cp, const Graph& g) {
  for (Instance& i : cp.instances)
    if (i.key == g.key && i.sizes == g.sizes) {
      i.used = ++instance_clock;
      return i.exe;
    }
  return nullptr;
}

std::shared_ptr<Executable> add_instance(CachedPlan& cp, const Graph& g, std::shared_ptr<Executable> exe) {
  if (cp.instances.size() >= kMaxInstances) {
    auto lru = std::min_element(cp.instances.begin(), cp.instances.end(),
                                [](const Instance& a, const Instance& b) { return a.used < b.used; });
    cp.instances.erase(lru);
  }
  cp.instances.push_back({g.key, g.sizes, std::move(exe), ++instance_clock});
  return cp.instances.back().exe;
}

std::string sizes_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) absl::StrAppendFormat(&s, "%s%d", i ? ", " : "", v[i]);
  return s + ")";
}
// ---- end of the plan cache's types ----

bool plan_is_fallible(const Plan& p) {
  for (const Instr& in : p.instrs) {
    if (op_info(in.op).category == OpCategory::Index) return true;
    // ---- distributed ----
    // A collective fails when the ranks' collectives do not match (SLOTH_DIST_CHECK) or MPI
    // reports an error; the job may go on, so the inputs must survive.
    if (in.op == OpId::kAllReduce || in.op == OpId::kBroadcast || in.op == OpId::kAllGather ||
        in.op == OpId::kReduceScatter)
      return true;
  }
  return false;
}

struct PlanCache {  // per DeviceType
  // Structure key -> its plans (more than one where sizes coincided in one of them).
  absl::flat_hash_map<uint64_t, std::vector<std::unique_ptr<CachedPlan>>> plans[2];
  absl::flat_hash_map<uint64_t, CachedPlan*> by_key[2];  // Graph::key -> the plan it takes
};
PlanCache& cache() {
  static auto* c = new PlanCache();
  return *c;
}

// The last miss, explained only when asked (metrics(), SLOTH_LOG=plans): the explanation
// scans every cached plan, which a program making many new graphs should not pay per graph.
struct PendingMiss {
  std::shared_ptr<const Plan> plan;
  DeviceType device = DeviceType::kCPU;
  uint64_t struct_key = 0;
  uint64_t seq = 0;  // explained against cached plans with a smaller seq
};
PendingMiss pending_miss;
uint64_t next_plan_seq = 1;

int64_t auto_flush_limit = 20000;
bool in_sync = false;
thread_local int sync_depth = 0;  // sync_nodes calls running on this thread
thread_local bool worker_thread = false;  // ---- data loader workers: no auto-flush here ----

bool fusion_enabled() { return settings().fusion; }

// ---- replay (sloth::jit) ----
GraphObserver graph_observer = nullptr;
void* graph_observer_ctx = nullptr;
uint64_t cache_epoch = 0;

// Why a plan missed the cache, against the plans cached before it (seq < before_seq). The
// nearest cached plan is the one sharing the longest prefix of instructions equal up to sizes
// (op, dtype, rank, operands, attributes other than sizes); the first difference names the op
// or attribute that changed, and a plan equal up to sizes gets the size that could not be
// symbolic (size_mismatch_reason).
bool same_but_sizes(const Instr& a, const Instr& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape.size() != b.shape.size() || a.in != b.in)
    return false;
  if (size_attrs_of(a.op) == SizeAttrs::kNone) return a.attrs == b.attrs;
  Attrs x = a.attrs.get(), y = b.attrs.get();
  for_each_size_attr(a.op, x, [](int64_t& v) { v = 0; });
  for_each_size_attr(b.op, y, [](int64_t& v) { v = 0; });
  return x == y;
}

std::string miss_reason(const Plan& p, DeviceType dt, uint64_t struct_key, uint64_t before_seq) {
  if (auto it = cache().plans[static_cast<int>(dt)].find(struct_key);
      it != cache().plans[static_cast<int>(dt)].end())
    for (const auto& c : it->second) {
      if (c->seq >= before_seq) continue;
      std::string r = size_mismatch_reason(p, *c->plan);
      return "a size forced a new plan: " +
             (r.empty() ? std::string("the sizes do not specialize those of the cached plan of this structure") : r);
    }
  const Plan* best = nullptr;
  size_t best_len = 0;
  for (const auto& [k, cs] : cache().plans[static_cast<int>(dt)])
  for (const auto& c : cs) {
    if (c->seq >= before_seq) continue;
    const Plan& q = *c->plan;
    size_t n = 0;
    while (n < p.instrs.size() && n < q.instrs.size() && same_but_sizes(p.instrs[n], q.instrs[n])) ++n;
    if (!best || n > best_len) { best = &q; best_len = n; }
  }
  if (!best) return "first graph on this device";
  if (best_len < p.instrs.size() && best_len < best->instrs.size()) {
    const Instr &a = p.instrs[best_len], &b = best->instrs[best_len];
    std::string what = a.op != b.op ? absl::StrFormat("op %s vs %s", op_name(a.op), op_name(b.op))
                     : a.shape.size() != b.shape.size() ? absl::StrFormat("rank of %s vs %s", shape_str(a.shape), shape_str(b.shape))
                     : a.dtype != b.dtype ? absl::StrFormat("dtype %s vs %s", dtype_name(a.dtype), dtype_name(b.dtype))
                     : a.in != b.in ? std::string("operands are wired differently")
                     : absl::StrFormat("attributes differ (%s vs %s)", a.attrs->debug_string(), b.attrs->debug_string());
    return absl::StrFormat("instruction %d (%s) differs from the nearest cached plan: %s", best_len,
                           op_name(a.op), what);
  }
  if (p.instrs.size() != best->instrs.size())
    return absl::StrFormat("%d instructions vs %d in the nearest cached plan", p.instrs.size(),
                           best->instrs.size());
  for (size_t i = 0; i < p.slots.size() && i < best->slots.size(); ++i)
    if (p.slots[i].kind != best->slots[i].kind || p.slots[i].dtype != best->slots[i].dtype)
      return absl::StrFormat("slot %d (an input or scalar) differs in kind or dtype (%s vs %s)", i,
                             dtype_name(p.slots[i].dtype), dtype_name(best->slots[i].dtype));
  std::string r = size_mismatch_reason(p, *best);
  if (!r.empty()) return "a size forced a new plan: " + r;
  return "outputs or input layouts differ from the nearest cached plan";
}

}  // namespace

void explain_last_miss() {
  if (!pending_miss.plan) return;
  // reset_metrics() since the miss: it is no longer the counters' last miss.
  if (counters().plan_cache_misses > 0)
    counters().last_miss_reason = miss_reason(*pending_miss.plan, pending_miss.device,
                                                pending_miss.struct_key, pending_miss.seq);
  pending_miss = PendingMiss{};
}

Counters& counters() {
  static Counters c;
  return c;
}

bool log_enabled(const char* topic) { return settings().log_on(topic); }

void set_auto_flush_limit(int64_t nodes) { auto_flush_limit = nodes; }

void sync_nodes(absl::Span<const NodePtr> roots_in, Device device) {
  std::lock_guard<std::recursive_mutex> trace_guard(trace_lock());
  ++sync_depth;
  struct Depth { ~Depth() { --sync_depth; } } depth;
  // The roots in structural order (lazy/root_order.h): a step whose tensors were created in
  // another order (AdamW's moments on the first step) numbers its values alike, so it takes
  // the same plan. Each root node is materialized by itself below, so no result moves.
  std::vector<NodePtr> ordered;
  absl::Span<const NodePtr> roots = roots_in;
  if (roots_in.size() > 1) {
    ordered.assign(roots_in.begin(), roots_in.end());
    order_roots(ordered);
    roots = ordered;
  }
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
  const double cpu0 = thread_cpu_seconds();
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
  const int dev = static_cast<int>(device.type);
  const int64_t misses_before = counters().plan_cache_misses;
  CachedPlan* cp = nullptr;
  std::shared_ptr<Executable> exe;  // shared: a replay (sloth::jit) may keep it past eviction
  if (auto it = cache().by_key[dev].find(g.key);
      it != cache().by_key[dev].end() && it->second->struct_key == g.struct_key) {
    cp = it->second;
    exe = find_instance(*cp, g);
  }
  if (exe == nullptr) {
    // New sizes: the first plan of this structure whose sizes these specialize, mapped to them.
    std::vector<CachedPlan*> candidates;
    if (cp != nullptr) candidates.push_back(cp);
    if (auto it = cache().plans[dev].find(g.struct_key); it != cache().plans[dev].end())
      for (const auto& c : it->second)
        if (c.get() != cp) candidates.push_back(c.get());
    cp = nullptr;
    for (CachedPlan* c : candidates) {
      std::optional<std::vector<int64_t>> to = specialize(c->size_ids, c->sizes.size(), g);
      if (!to) continue;
      std::optional<Plan> q =
          instantiate_plan(*c->plan, c->sizes, *to, g, backend->instantiate_reads_kernels());
      if (!q) continue;
      ++counters().plan_instantiations;
      if (log_enabled("plans"))
        std::fprintf(stderr, "[sloth] plan instantiated for sizes %s (planned for %s)\n",
                     sizes_str(g.sizes).c_str(), sizes_str(c->sizes).c_str());
      cp = c;
      exe = add_instance(*cp, g, backend->instantiate(*cp->base, std::move(*q)));
      cache().by_key[dev][g.key] = cp;
      break;
    }
  }
  if (exe != nullptr) {
    ++counters().plan_cache_hits;
  } else {
    ++counters().plan_cache_misses;
    auto fresh = std::make_unique<CachedPlan>();
    // Sizes that coincide here but that no op forces equal (a batch of 8 and a sequence of
    // 8) are kept apart: the plan is made at stand-in sizes (lazy/size_provenance.h), cached
    // with them so that later graphs of this structure specialize it, and mapped back to this
    // graph's sizes to run now. A plan made at the coincidence could not serve the others.
    struct General {
      const Graph* g;
      std::string why;
      bool log;
      std::optional<StandInSizes> stand;
    } general{&g, {}, log_enabled("plans"), std::nullopt};
    gather_values(g);  // what lowering reads of the nodes, and Graph::sizes_trivial
    // A graph whose sizes cannot coincide (Graph::sizes_trivial, seen while building it)
    // skips the pass, and CSE runs inside the lowering walk.
    auto plan = std::make_shared<Plan>(
        g.sizes_trivial ? lower(g)
                        : lower(
                              g,
                              [](Plan& p, void* c) {
                                auto& x = *static_cast<General*>(c);
                                x.stand = generalize_sizes(*x.g, p, x.log ? &x.why : nullptr);
                                if (x.stand) x.stand->apply(p);
                              },
                              &general));
    std::optional<StandInSizes>& stand = general.stand;
    const bool log = general.log;
    std::string& general_why = general.why;
    plan_kernels(*plan, fusion_enabled());
    std::optional<Plan> real;  // the stand-in plan at this graph's sizes
    if (stand) {
      real = instantiate_plan(*plan, stand->sizes, stand->real, g);
      if (!real) {
        general_why = "sizes coincide, but the stand-in plan did not map back to them: planned for these sizes";
        stand.reset();
        plan = std::make_shared<Plan>(lower(g));
        plan_kernels(*plan, fusion_enabled());
      }
    }
    const uint64_t seq = next_plan_seq++;
    pending_miss = PendingMiss{plan, device.type, g.struct_key, seq};
    counters().last_miss_reason.clear();
    if (stand) ++counters().plans_generalized;
    if (log) {
      explain_last_miss();
      std::string general;
      if (stand)
        general = absl::StrFormat(
            "[sloth] general plan: sizes that coincide here are not forced equal by the ops, so "
            "it is made at stand-in sizes (%s) and serves graphs where they differ\n",
            stand->summary);
      else if (!general_why.empty())
        general = "[sloth] " + general_why + "\n";
      std::fprintf(stderr, "[sloth] new plan (plan cache miss): %s\n%s%s",
                   counters().last_miss_reason.c_str(), general.c_str(),
                   (real ? real->describe() : plan->describe()).c_str());
    }
    if (settings().dump_ir) std::fprintf(stderr, "[sloth] IR of a new graph:\n%s", dump_text(roots).c_str());
    fresh->fallible = plan_is_fallible(*plan);
    fresh->seq = seq;
    fresh->struct_key = g.struct_key;
    fresh->sizes = stand ? std::move(stand->sizes) : g.sizes;
    fresh->size_ids = stand ? std::move(stand->size_ids) : g.size_ids;
    fresh->plan = plan;
    // The backend compiles at this graph's sizes (nothing is sized at stand-ins); instances
    // for other sizes are made from it as from any base.
    fresh->base = backend->compile_shared(real ? std::make_shared<const Plan>(std::move(*real))
                                               : std::shared_ptr<const Plan>(plan));
    exe = add_instance(*fresh, g, fresh->base);
    cp = fresh.get();
    // The most general plans first: a plan whose sizes are all distinct serves every size.
    auto& list = cache().plans[dev][g.struct_key];
    list.push_back(std::move(fresh));
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a->sizes.size() > b->sizes.size();
    });
    cache().by_key[dev][g.key] = cp;
  }
  counters().plan_s += seconds_since(t0);
  counters().plan_cpu_s += thread_cpu_seconds() - cpu0;
  if (profiling::on())
    plan_scope.set_detail(absl::StrFormat("%s, %d nodes", counters().plan_cache_misses > misses_before
                                                              ? "plan cache miss"
                                                              : "plan cache hit",
                                          g.order.size()));
  plan_scope.finish();
  if (graph_observer) graph_observer(graph_observer_ctx, g, exe, cp->fallible, device);

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
  absl::Status st = donating ? exe->run_donating(absl::MakeSpan(inputs), scalars, &outputs, &stats)
                             : exe->run(inputs, scalars, &outputs, &stats);
  counters().execute_s += seconds_since(t1);
  if (!st.ok()) throw Error(std::string(st.message()));
  for (size_t i = 0; i < g.roots.size(); ++i) g.roots[i]->materialize(std::move(outputs[i]));
  if (borrowed_written_count.load(std::memory_order_relaxed) != 0) write_back_borrowed();
  ++counters().graphs_executed;
  counters().kernels_launched += stats.kernels_launched;
  counters().row_blocked_steps += stats.row_blocked_steps;
  counters().frozen_runs += stats.frozen_runs;
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
bool can_sync_here() { return !worker_thread && sync_depth == 0 && !in_sync; }

WorkerTraceScope::WorkerTraceScope() : lock(trace_lock()) { worker_thread = true; }
WorkerTraceScope::~WorkerTraceScope() { worker_thread = false; }

std::string describe_plan(absl::Span<const NodePtr> roots_in) {
  std::vector<NodePtr> roots(roots_in.begin(), roots_in.end());
  order_roots(roots);  // as sync_nodes orders them
  Graph g = build_graph(roots);
  Plan p = lower(g);
  plan_kernels(p, fusion_enabled());
  return p.describe();
}

int64_t plan_cache_size() {
  int64_t n = 0;
  for (const auto& per_device : cache().plans)
    for (const auto& [k, list] : per_device) n += static_cast<int64_t>(list.size());
  return n;
}
void clear_plan_cache() {
  ++cache_epoch;
  explain_last_miss();  // against the plans it was missed among
  for (int d = 0; d < 2; ++d) {
    cache().by_key[d].clear();
    cache().plans[d].clear();
  }
}

// ---- replay (sloth::jit) ----
void set_graph_observer(GraphObserver observer, void* ctx) {
  graph_observer = observer;
  graph_observer_ctx = ctx;
}
uint64_t plan_cache_epoch() { return cache_epoch; }

}  // namespace sloth::lazy
