// The scheduler: turns pending IR into executed data at sync points. A sync builds one graph
// from its roots (graph batching), looks its structural key up in the plan cache (a hit skips
// lowering, fusion and compilation), binds the graph's data and scalars, runs it on the
// device's backend and materializes every root.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/device.h"
#include "lazy/node.h"

namespace sloth::lazy {

// Materializes `roots` (all on `device`) as one graph, and with them every node of that graph
// that something outside it still holds (a live tensor, a pending node, a saved value), so
// that nothing the graph computed runs again (DESIGN I9; see build_graph). Throws
// sloth::Error on failure, with every root still pending (nothing is lost).
void sync_nodes(absl::Span<const NodePtr> roots, Device device);
// Whether this thread may start a sync now: not inside one, not a data loader worker.
bool can_sync_here();
// Every live pending tensor of every device, one graph per device.
void mark_step();
// Called after each recorded op: flushes when the pending IR grew past the limit, so loops
// that never sync stay bounded in memory.
void maybe_auto_flush();
void set_auto_flush_limit(int64_t nodes);

// ---- data loader workers ----
// Data loader worker threads record IR (a dataset's get(), its transforms) while the consumer
// thread records and runs its step. Recording on two threads is safe (per-thread pools, a
// locked live-group list), but a sync walks every live group, so it must not run while a
// worker is mid-recording: sync_nodes and mark_step hold trace_lock(), and a worker holds it
// around each batch it builds. A worker thread never auto-flushes (that would sync the
// consumer's half-recorded step): WorkerTraceScope turns auto-flush off on its thread.
std::recursive_mutex& trace_lock();
struct WorkerTraceScope {
  WorkerTraceScope();
  ~WorkerTraceScope();
  std::unique_lock<std::recursive_mutex> lock;
};

// The plan the scheduler would run for these roots (for dump_ir and tests).
std::string describe_plan(absl::Span<const NodePtr> roots);
int64_t plan_cache_size();
// Fills counters().last_miss_reason for the last plan-cache miss (computed on demand: it
// compares the missed plan with every plan cached before it). metrics() calls it.
void explain_last_miss();
void clear_plan_cache();

// SLOTH_LOG=plans,fusion (comma separated) turns on logging to stderr.
bool log_enabled(const char* topic);

// ---- replay (sloth::jit, sloth/jit.h) ----
// While an observer is set, every graph a sync runs is shown to it after its plan is found
// and before its inputs are bound (the graph's nodes are still as built). sloth::jit records
// a step's graph this way and later runs `exe` itself with new data.
struct Graph;
class Executable;
using GraphObserver = void (*)(void* ctx, const Graph& g, const std::shared_ptr<Executable>& exe,
                               bool fallible, Device device);
void set_graph_observer(GraphObserver observer, void* ctx);
// Bumps whenever cached executables are dropped (clear_plan_cache), so a recorded executable
// is known to be gone.
uint64_t plan_cache_epoch();

}  // namespace sloth::lazy
