// sloth::jit: recording a step's graph (which inputs are arguments, state, host values or
// constants; which outputs are returned or become the new values of tensors that outlive the
// step), checking that two traces agree, and replaying the recorded executable.
#include "sloth/jit.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "core/error.h"
#include "lazy/backend.h"
#include "lazy/borrowed_memory.h"
#include "lazy/graph.h"
#include "lazy/metrics.h"
#include "lazy/scheduler.h"
#include "lazy/tensor_impl.h"

namespace sloth {

using lazy::AliasGroup;
using lazy::DeviceData;
using lazy::Executable;
using lazy::Graph;
using lazy::Node;
using lazy::NodePtr;
using lazy::TensorImpl;

std::string JitStats::to_string() const {
  return absl::StrFormat("jit: %d calls, %d traced, %d replayed%s%s", calls, traces, replays,
                         last_reason.empty() ? "" : "; last trace: ", last_reason);
}

namespace jit_detail {
namespace {

constexpr int kMaxRecords = 8;     // shape signatures kept per step
constexpr int kMaxMismatches = 4;  // consecutive differing traces before giving up on a shape

bool log_on() { return lazy::log_enabled("replay"); }

enum class InKind : uint8_t { kArg, kArgView, kState, kStateView, kHostValue, kConst };

const char* kind_name(InKind k) {
  switch (k) {
    case InKind::kArg: return "argument";
    case InKind::kArgView: return "view of an argument";
    case InKind::kState: return "state tensor";
    case InKind::kStateView: return "view of a state tensor";
    case InKind::kHostValue: return "host value";
    case InKind::kConst: return "constant made in the step";
  }
  return "?";
}

struct InputBind {
  InKind kind = InKind::kConst;
  int32_t arg = -1;            // kArg/kArgView
  AliasGroup* group = nullptr;  // kState/kStateView (kept alive by Record::held)
  Layout layout;       // the layout the plan reads
  Layout base_layout;  // kStateView/kState: the layout of the data it reads from
  // kArgView: the argument's own offset in its storage when traced. The input reads the
  // argument's elements at layout.offset - arg_offset past wherever the argument starts (a
  // batch taken with narrow() from one dataset tensor starts elsewhere in each call).
  int64_t arg_offset = 0;
  DeviceData data;           // kConst: the data; kHostValue: the jit's own buffer
  int32_t action = -1;       // kHostValue: its action
  // kState: the step gives the tensor a new value (a parameter, a momentum buffer), so its
  // current buffer is dead after the step and may be donated. A state tensor the step only
  // reads keeps its buffer.
  bool rewritten = false;
};

struct OutputBind {
  std::vector<AliasGroup*> groups;      // tensors that outlive the step and take this value
  std::vector<bool> preexisting;        // per group: it existed before the call (state)
  std::vector<int32_t> returns;         // positions among the returned tensors
};

struct ArgSig {
  Shape shape;
  Strides strides;
  DType dtype;
  Device device;
  // The first earlier argument sharing this one's storage when traced (step(x, x), or two
  // views of one batch): the graph then reads both through one input, so a replay needs the
  // same sharing. Arguments traced apart may share storage later (they are bound apart).
  int32_t shares = -1;
  bool operator==(const ArgSig&) const = default;
};

// Whether the elements `x` addresses lie within the span of `a`'s (same storage assumed): true
// for every view of `a`. A layout inside the span but off a's grid (the other columns of a
// strided batch) also passes; difference() then catches it when the argument moved between
// the two traces (its offset relative to the argument changes).
bool within(const Layout& x, const Layout& a) {
  auto span = [](const Layout& l) {
    int64_t lo = l.offset, hi = l.offset;
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (l.shape[d] == 0) return std::pair<int64_t, int64_t>{l.offset, l.offset - 1};  // empty
      const int64_t ext = (l.shape[d] - 1) * l.strides[d];
      (ext < 0 ? lo : hi) += ext;
    }
    return std::pair<int64_t, int64_t>{lo, hi};
  };
  const auto [xl, xh] = span(x);
  if (xh < xl) return true;  // reads nothing
  const auto [al, ah] = span(a);
  return al <= xl && xh <= ah;
}

const Storage* storage_of(const Tensor& t) {
  const NodePtr& v = t.impl()->base_value();
  return v->data ? v->data->storage.get() : nullptr;
}

struct Action {
  std::function<void()> effect;   // or
  std::function<double()> value;  // a host value bound to input `input`
  NodePtr node;                   // the value's node while tracing
  int32_t input = -1;
};

struct Record {
  Record() = default;
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;
  std::vector<ArgSig> args;
  std::string problem;  // non-empty: this trace cannot be replayed, and why
  int graphs = 0;
  uint64_t key = 0;
  std::shared_ptr<Executable> exe;  // kept alive even if the plan cache evicts it
  bool fallible = false;
  Device device;
  uint64_t epoch = 0;
  std::vector<InputBind> inputs;
  std::vector<double> scalars;
  std::vector<OutputBind> outputs;
  std::vector<Action> actions;
  int32_t num_returns = 0;
  // Every group the record binds or writes, with the references others held once it was
  // recorded: a change means the tensor was dropped or replaced, and the record may be stale.
  // (References held by jit records are counted in AliasGroup::jit_holds and left out.)
  struct Held {
    Ref<AliasGroup> group;
    int64_t others = 0;
  };
  std::vector<Held> held;
  AliasGroup* hold(AliasGroup* g) {
    for (const Held& h : held)
      if (h.group.get() == g) return g;
    held.push_back({Ref<AliasGroup>(g), 0});
    ++g->jit_holds;
    return g;
  }
  ~Record() {
    for (Held& h : held) --h.group->jit_holds;
  }
  bool armed = false;  // verified by a second, equal trace
  int mismatches = 0;
  bool given_up = false;
  // Replay scratch, reused call after call.
  std::vector<DeviceData> in_buf, out_buf;
  std::vector<StoragePtr> recycled;  // the previous values of rebound outputs (.grad)
};

ArgSig sig_of(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  return ArgSig{i.shape, i.strides(), i.dtype, i.group->device};
}

bool same_bytes(const DeviceData& a, const DeviceData& b) {
  if (a.dtype != b.dtype || a.layout.shape != b.layout.shape) return false;
  if (a.storage == b.storage && a.layout.offset == b.layout.offset &&
      a.layout.strides == b.layout.strides)
    return true;
  if (!a.is_contiguous() || !b.is_contiguous()) return false;  // conservative
  const size_t bytes = static_cast<size_t>(a.numel()) * dtype_size(a.dtype);
  if (a.storage->device().is_cuda() || b.storage->device().is_cuda()) return false;
  return std::memcmp(a.raw(), b.raw(), bytes) == 0;
}

bool same_double(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

// The first difference between two traces with the same argument signature, or "".
std::string difference(const Record& a, const Record& b) {
  if (!b.problem.empty()) return b.problem;
  if (a.key != b.key || a.exe != b.exe) return "the step's graph changed (a different plan)";
  if (a.inputs.size() != b.inputs.size()) return "the graph reads a different number of inputs";
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const InputBind &x = a.inputs[i], &y = b.inputs[i];
    std::string what;
    if (x.kind != y.kind) what = absl::StrFormat("was a %s, now a %s", kind_name(x.kind), kind_name(y.kind));
    else if (x.arg != y.arg) what = "reads another argument";
    else if (x.group != y.group) what = "is a different tensor than in the previous trace";
    else if (x.action != y.action) what = "is another host value";
    else if (x.rewritten != y.rewritten) what = "is written by one trace and not the other";
    else if (x.kind == InKind::kArgView &&
             (x.layout.offset - x.arg_offset != y.layout.offset - y.arg_offset ||
              !lazy::same_dims(x.layout.shape, y.layout.shape) ||
              !lazy::same_dims(x.layout.strides, y.layout.strides)))
      what = "reads another part of its argument (it does not move with the argument)";
    else if (x.kind == InKind::kConst && !same_bytes(x.data, y.data))
      what = absl::StrFormat(
          "(shape %s) holds different values: a number computed on the host that changes from "
          "step to step; pass it as a tensor argument or register it with jit_host_value",
          shape_str(y.data.layout.shape));
    if (!what.empty()) return absl::StrFormat("graph input %d (%s) %s", i, kind_name(y.kind), what);
  }
  if (a.scalars.size() != b.scalars.size()) return "the graph reads a different number of scalars";
  for (size_t i = 0; i < a.scalars.size(); ++i)
    if (!same_double(a.scalars[i], b.scalars[i]))
      return absl::StrFormat(
          "host scalar %d changed between traces (%g, then %g): a number computed on the host "
          "that changes from step to step cannot be replayed; pass it as a tensor argument or "
          "register it with jit_host_value",
          i, a.scalars[i], b.scalars[i]);
  if (a.outputs.size() != b.outputs.size() || a.num_returns != b.num_returns)
    return "the step writes or returns different tensors";
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const OutputBind &x = a.outputs[i], &y = b.outputs[i];
    if (x.returns != y.returns || x.preexisting != y.preexisting)
      return absl::StrFormat("graph output %d goes to different tensors", i);
    for (size_t j = 0; j < x.groups.size(); ++j)
      if (x.preexisting[j] && x.groups[j] != y.groups[j])
        return absl::StrFormat("graph output %d updates a different state tensor", i);
  }
  if (a.actions.size() != b.actions.size()) return "the step registered different host values";
  for (size_t i = 0; i < a.actions.size(); ++i)
    if (bool(a.actions[i].effect) != bool(b.actions[i].effect) || a.actions[i].input != b.actions[i].input)
      return "the step registered different host values";
  return "";
}

}  // namespace

struct Core::Impl {
  JitStats stats;
  std::vector<std::unique_ptr<Record>> records;  // most recent first
  int64_t last_used = 0;

  // ---- tracing state ----
  std::unique_ptr<Record> cur;
  absl::flat_hash_map<Node*, Ref<AliasGroup>> entry_value;         // group values at entry
  struct EntryData {
    AliasGroup* group;
    Layout layout;
  };
  absl::flat_hash_map<const Storage*, EntryData> entry_storage;
  std::vector<Layout> arg_layout;  // each argument's layout in its storage when traced
  absl::flat_hash_map<Node*, int32_t> arg_node;
  // The arguments over each storage (two batches cut from one dataset tensor share one).
  absl::flat_hash_map<const Storage*, absl::InlinedVector<int32_t, 2>> arg_storage;
  std::vector<NodePtr> held_nodes;  // keeps entry nodes from being recycled while tracing
  std::vector<NodePtr> roots;
  std::vector<Ref<AliasGroup>> arg_groups;

  void note(const std::string& why) {
    stats.last_reason = why;
    if (log_on()) std::fprintf(stderr, "[sloth] jit: tracing: %s\n", why.c_str());
  }
  void clear_trace() {
    entry_value.clear();
    entry_storage.clear();
    arg_node.clear();
    arg_storage.clear();
    held_nodes.clear();
    roots.clear();
    arg_groups.clear();
    arg_layout.clear();
  }
  void observe(const Graph& g, const std::shared_ptr<Executable>& exe, bool fallible, Device device);
  void classify_outputs(const std::vector<Ref<AliasGroup>>& pending,
                        const std::vector<Tensor>& returned);
  // held_pending: some held group's value is still to be computed.
  bool replay(Record& r, absl::Span<const Tensor* const> args, std::vector<Tensor>* outs,
              bool held_pending);
};

namespace {
Core::Impl* g_active = nullptr;  // the step being traced (one at a time)

void observe_graph(void* ctx, const Graph& g, const std::shared_ptr<Executable>& exe, bool fallible,
                   Device device) {
  static_cast<Core::Impl*>(ctx)->observe(g, exe, fallible, device);
}
}  // namespace

void Core::Impl::observe(const Graph& g, const std::shared_ptr<Executable>& exe, bool fallible,
                         Device device) {
  Record& r = *cur;
  if (++r.graphs > 1) return;  // reported by end_trace
  r.key = g.key;
  r.exe = exe;
  r.fallible = fallible;
  r.device = device;
  r.epoch = lazy::plan_cache_epoch();
  r.inputs.resize(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Node* n = g.inputs[i];
    InputBind& b = r.inputs[i];
    b.layout = n->data->layout;
    const Storage* st = n->data->storage.get();
    if (auto a = arg_node.find(n); a != arg_node.end()) {
      b.kind = InKind::kArg;
      b.arg = a->second;
    } else if (auto e = entry_value.find(n); e != entry_value.end()) {
      b.kind = InKind::kState;
      b.group = r.hold(e->second.get());
      b.base_layout = n->data->layout;
    } else if (auto as = arg_storage.find(st); as != arg_storage.end()) {
      b.kind = InKind::kArgView;
      // Bound relative to an argument at replay: the one whose elements it reads (a view of
      // it). Another view of the same storage (the dataset tensor the batch was cut from,
      // read whole) does not move with any argument.
      for (int32_t k : as->second)
        if (within(b.layout, arg_layout[k])) {
          b.arg = k;
          break;
        }
      if (b.arg < 0) {
        b.arg = as->second.front();
        r.problem = absl::StrFormat(
            "graph input %d reads the storage of argument %d outside that argument (a view of "
            "the tensor the argument was cut from); pass that tensor as an argument of its own",
            i, b.arg);
      }
      b.arg_offset = arg_layout[b.arg].offset;
    } else if (auto es = entry_storage.find(st); es != entry_storage.end()) {
      b.kind = InKind::kStateView;
      b.group = r.hold(es->second.group);
      b.base_layout = es->second.layout;
    } else {
      b.kind = InKind::kConst;
      for (size_t k = 0; k < r.actions.size(); ++k)
        if (r.actions[k].node.get() == n) {
          b.kind = InKind::kHostValue;
          b.action = static_cast<int32_t>(k);
          r.actions[k].input = static_cast<int32_t>(i);
        }
      if (b.kind == InKind::kHostValue) {
        // The jit's own buffer: rewriting it never changes a tensor the program holds.
        if (n->data->storage->device().is_cuda() || n->data->numel() != 1) {
          r.problem = "a host value registered with jit_host_value is not a one-element CPU tensor";
        } else {
          b.data = lazy::allocate_data(lazy::backend_for(Device::cpu())->allocator(),
                                       n->data->layout.shape, n->dtype);
          std::memcpy(b.data.raw(), n->data->raw(), dtype_size(n->dtype));
          b.layout = b.data.layout;
        }
      } else {
        b.data = *n->data;
      }
    }
  }
  r.scalars.clear();
  for (Node* n : g.scalars) r.scalars.push_back(n->scalar);
  roots.clear();
  for (Node* n : g.roots) roots.emplace_back(n);
}

void Core::Impl::classify_outputs(const std::vector<Ref<AliasGroup>>& pending,
                                  const std::vector<Tensor>& returned) {
  Record& r = *cur;
  r.num_returns = static_cast<int32_t>(returned.size());
  r.outputs.assign(roots.size(), OutputBind{});
  absl::flat_hash_map<Node*, int32_t> root_index;
  for (size_t i = 0; i < roots.size(); ++i) root_index[roots[i].get()] = static_cast<int32_t>(i);
  absl::flat_hash_set<const AliasGroup*> preexisting;
  for (const auto& e : entry_value) preexisting.insert(e.second.get());
  std::vector<const AliasGroup*> returned_groups;
  for (size_t k = 0; k < returned.size(); ++k) {
    const Tensor& t = returned[k];
    if (!t.defined()) { r.problem = absl::StrFormat("returned tensor %d is undefined", k); return; }
    if (t.impl()->is_view()) {
      r.problem = absl::StrFormat("returned tensor %d is a view; return a tensor the step computed (clone() the view)", k);
      return;
    }
    auto it = root_index.find(t.impl()->base_value().get());
    if (it == root_index.end()) {
      r.problem = absl::StrFormat(
          "returned tensor %d was not computed by the step's graph (an argument, a state tensor or a constant)", k);
      return;
    }
    r.outputs[it->second].returns.push_back(static_cast<int32_t>(k));
    returned_groups.push_back(t.impl()->group.get());
  }
  for (const auto& grp : pending) {
    auto it = root_index.find(grp->value.get());
    if (it == root_index.end()) continue;  // pending but not computed: cannot happen after a flush
    const bool pre = preexisting.contains(grp.get());
    if (!pre && std::find(returned_groups.begin(), returned_groups.end(), grp.get()) != returned_groups.end())
      continue;  // the returned tensor itself: replays return a fresh one
    for (const auto& ag : arg_groups)
      if (ag.get() == grp.get()) {
        r.problem = "the step writes to one of its arguments in place";
        return;
      }
    r.outputs[it->second].groups.push_back(r.hold(grp.get()));
    r.outputs[it->second].preexisting.push_back(pre);
  }
  // A computed value may also be held by something other than a tensor: a pending view node
  // in a view's cache (harmless: a view re-reads its base once the version moved on) or an
  // autograd graph kept with retain_graph across steps (it keeps the traced values; the
  // contract in jit.h leaves autograd history out of replays).
  // Constants and host values must not come back as outputs (their buffers are reused).
  for (const auto& b : r.inputs)
    if (b.kind == InKind::kConst || b.kind == InKind::kHostValue)
      for (const auto& n : roots)
        if (n->data && n->data->storage == b.data.storage) {
          r.problem = "a graph output shares storage with a constant made in the step";
          return;
        }
}

Core::Core() : impl_(std::make_unique<Impl>()) {}
Core::~Core() {
  if (g_active == impl_.get()) abort_trace();
}
const JitStats& Core::stats() const { return impl_->stats; }
void Core::reset() { impl_->records.clear(); }

bool Core::begin_trace(absl::Span<const Tensor* const> args) {
  Impl& m = *impl_;
  ++m.stats.calls;
  ++m.stats.traces;
  m.stats.last_replayed = false;
  if (g_active != nullptr) {
    m.note("called inside another jitted step's trace (nested jit runs as plain code)");
    return false;
  }
  std::vector<ArgSig> sigs;
  sigs.reserve(args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    if (!args[k]->defined()) fail("jit: argument %d is undefined", int64_t(k));
    sigs.push_back(sig_of(*args[k]));
  }
  for (const auto& rec : m.records)
    if (rec->args == sigs && rec->given_up) {
      m.note("gave up on these argument shapes: " + rec->problem);
      return false;
    }
  // Everything pending before the call runs first, as its own graph: the step's graph then
  // holds the step only, and every input it reads is data.
  lazy::mark_step();
  m.cur = std::make_unique<Record>();
  m.cur->args = std::move(sigs);
  for (Device d : {Device::cpu(), Device::cuda(0)}) {
    if (!lazy::has_backend(d.type)) continue;
    for (auto& grp : lazy::live_groups(d)) {
      if (!grp->value->materialized()) continue;
      m.held_nodes.push_back(grp->value);
      m.entry_storage.emplace(grp->value->data->storage.get(),
                              Impl::EntryData{grp.get(), grp->value->data->layout});
      m.entry_value.emplace(grp->value.get(), std::move(grp));
    }
  }
  for (size_t k = 0; k < args.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      if (storage_of(*args[j]) == storage_of(*args[k])) {
        m.cur->args[k].shares = static_cast<int32_t>(j);
        break;
      }
  for (size_t k = 0; k < args.size(); ++k) {
    NodePtr v = args[k]->impl()->value();
    m.arg_groups.push_back(args[k]->impl()->group);
    m.arg_layout.push_back(v->data->layout);
    m.arg_storage[v->data->storage.get()].push_back(static_cast<int32_t>(k));
    m.arg_node.emplace(v.get(), static_cast<int32_t>(k));
    m.held_nodes.push_back(std::move(v));
  }
  g_active = &m;
  lazy::set_graph_observer(&observe_graph, &m);
  return true;
}

void Core::abort_trace() {
  Impl& m = *impl_;
  if (g_active != &m) return;
  lazy::set_graph_observer(nullptr, nullptr);
  g_active = nullptr;
  m.cur.reset();
  m.clear_trace();
}

void Core::end_trace(const std::vector<Tensor>& returned) {
  Impl& m = *impl_;
  std::vector<Ref<AliasGroup>> pending;
  for (Device d : {Device::cpu(), Device::cuda(0)})
    if (lazy::has_backend(d.type))
      for (auto& grp : lazy::pending_groups(d)) pending.push_back(std::move(grp));
  try {
    lazy::mark_step();
  } catch (...) {
    abort_trace();
    throw;
  }
  lazy::set_graph_observer(nullptr, nullptr);
  g_active = nullptr;
  Record& r = *m.cur;
  if (r.graphs == 0) r.problem = "the step computed nothing (no graph ran)";
  else if (r.graphs > 1)
    r.problem = absl::StrFormat(
        "the step ran %d graphs: it syncs inside (item(), to_vector(), printing or sync()); "
        "jit replays a step that runs one graph (read loss.item() after the call)", r.graphs);
  if (r.problem.empty()) m.classify_outputs(pending, returned);
  for (InputBind& b : r.inputs)
    if (b.kind == InKind::kState)
      for (const OutputBind& o : r.outputs)
        if (std::find(o.groups.begin(), o.groups.end(), b.group) != o.groups.end()) b.rewritten = true;
  std::unique_ptr<Record> cur = std::move(m.cur);
  for (auto& a : r.actions) a.node.reset();
  pending.clear();
  m.clear_trace();

  // Compare with the previous trace of the same argument signature.
  auto it = std::find_if(m.records.begin(), m.records.end(),
                         [&](const auto& rec) { return rec->args == r.args; });
  const bool had_prev = it != m.records.end();
  std::string diff = had_prev ? difference(**it, r) : std::string("(first trace)");
  if (had_prev) {
    r.mismatches = diff.empty() ? 0 : (*it)->mismatches + 1;
    m.records.erase(it);
  }
  r.armed = diff.empty();
  if (r.armed && r.exe) r.exe->make_hot();  // replays follow: compile its small kernels too
  if (!diff.empty() && r.mismatches >= kMaxMismatches) {
    r.given_up = true;
    r.problem = absl::StrFormat("%d traces in a row differed; the last difference: %s",
                                r.mismatches, diff);
  }
  if (log_on()) {
    if (r.armed) std::fprintf(stderr, "[sloth] jit: trace verified, replaying from the next call\n");
    else if (had_prev)
      std::fprintf(stderr, "[sloth] jit: trace differs from the previous one: %s\n", diff.c_str());
  }
  if (!r.armed && !r.problem.empty() && had_prev) m.stats.last_reason = r.problem;
  m.records.insert(m.records.begin(), std::move(cur));
  if (static_cast<int>(m.records.size()) > kMaxRecords) m.records.pop_back();
  // The use counts a replay expects (with this record's own references in place).
  for (auto& h : m.records.front()->held) h.others = h.group->use_count() - h.group->jit_holds;
}

bool Core::try_replay(absl::Span<const Tensor* const> args, std::vector<Tensor>* outs) {
  Impl& m = *impl_;
  if (m.records.empty()) {
    m.note("first call");
    return false;
  }
  if (g_active != nullptr) return false;
  Record* match = nullptr;
  const std::string* shape_reason = nullptr;
  std::string why;
  for (auto& rec : m.records) {
    const Record& r = *rec;
    if (r.args.size() != args.size()) {
      why = absl::StrFormat("called with %d arguments, recorded with %d", args.size(), r.args.size());
      continue;
    }
    bool ok = true;
    for (size_t k = 0; k < args.size() && ok; ++k) {
      const Tensor& t = *args[k];
      if (!t.defined()) fail("jit: argument %d is undefined", int64_t(k));
      const TensorImpl& i = *t.impl();
      const ArgSig& s = r.args[k];
      if (!lazy::same_dims(i.shape, s.shape) || i.dtype != s.dtype ||
          !lazy::same_dims(i.strides(), s.strides) ||
          i.group->device != s.device || (s.shares >= 0 && i.group != args[s.shares]->impl()->group)) {
        ok = false;
        if (why.empty())
          why = absl::StrFormat("argument %d is %s %s strides %s, recorded %s %s strides %s", k,
                                dtype_name(i.dtype), shape_str(i.shape), shape_str(i.strides()),
                                dtype_name(s.dtype), shape_str(s.shape), shape_str(s.strides));
      }
    }
    if (ok) {
      match = rec.get();
      break;
    }
  }
  (void)shape_reason;
  if (match == nullptr) {
    m.note(why.empty() ? "new argument shapes" : why);
    return false;
  }
  Record& r = *match;
  if (!r.armed) {
    m.note(r.problem.empty() ? "verifying: second trace with these argument shapes" : r.problem);
    return false;
  }
  if (r.epoch != lazy::plan_cache_epoch()) {
    m.note("the plan cache was cleared");
    return false;
  }
  // One pass over the held groups: their reference counts, and whether a value the step
  // reads is still to be computed.
  bool pending = false;
  for (const auto& h : r.held) {
    if (h.group->use_count() - h.group->jit_holds != h.others) {
      m.note("a tensor the step reads or writes was dropped, replaced or newly aliased since "
             "the last call (e.g. a .grad cleared outside the step)");
      r.armed = false;
      return false;
    }
    pending |= !h.group->value->materialized();
  }
  return m.replay(r, args, outs, pending);
}

bool Core::Impl::replay(Record& r, absl::Span<const Tensor* const> args, std::vector<Tensor>* outs,
                        bool held_pending) {
  // Pending work the step reads (an argument still to compute, a parameter changed by hand)
  // runs first, as a traced call would do.
  bool pending = held_pending;
  for (const Tensor* a : args) pending |= a->impl()->pending();
  if (pending) lazy::mark_step();
  // Host values and effects, in trace order.
  for (const Action& a : r.actions) {
    if (a.effect) {
      a.effect();
      continue;
    }
    if (a.input < 0) continue;  // a host value the graph does not read
    const double v = a.value();
    DeviceData& d = r.inputs[a.input].data;
    visit_dtype(d.dtype, [&](auto tag) {
      using D = decltype(tag);
      *d.data<D>() = static_cast<D>(v);
    });
  }
  r.in_buf.resize(r.inputs.size());
  r.out_buf.reserve(r.outputs.size());
  // Pass 1: everything but whole state tensors (a view of a state tensor bound here keeps
  // its storage referenced, so pass 2 will not donate it).
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const InputBind& b = r.inputs[i];
    DeviceData& d = r.in_buf[i];
    switch (b.kind) {
      case InKind::kArg: {
        TensorImpl& t = *args[b.arg]->impl();
        if (!t.has_chain()) {  // a base tensor: its group's value, no node reference taken
          lazy::assign_data(d, *t.group->value->data);
        } else {
          NodePtr v = t.value();
          lazy::assign_data(d, *v->data);
        }
        break;
      }
      case InKind::kArgView: {
        // The argument's current elements, at the input's offset within the argument.
        TensorImpl& t = *args[b.arg]->impl();
        NodePtr v;
        const DeviceData* a = nullptr;
        if (!t.has_chain()) {
          a = &*t.group->value->data;
        } else {
          v = t.value();
          a = &*v->data;
        }
        d.storage = a->storage;
        lazy::assign_dims(d.layout.shape, b.layout.shape);
        lazy::assign_dims(d.layout.strides, b.layout.strides);
        d.layout.offset = b.layout.offset - b.arg_offset + a->layout.offset;
        d.dtype = a->dtype;
        break;
      }
      case InKind::kStateView: {
        const DeviceData& base = *b.group->value->data;
        if (!lazy::same_dims(base.layout.shape, b.base_layout.shape) ||
            !lazy::same_dims(base.layout.strides, b.base_layout.strides)) {
          note("the layout of a tensor the step reads through a view changed");
          for (auto& x : r.in_buf) x.storage.reset();
          r.armed = false;
          return false;
        }
        d.storage = base.storage;
        lazy::assign_dims(d.layout.shape, b.layout.shape);
        lazy::assign_dims(d.layout.strides, b.layout.strides);
        d.layout.offset = b.layout.offset - b.base_layout.offset + base.layout.offset;
        d.dtype = base.dtype;
        break;
      }
      case InKind::kHostValue:
      case InKind::kConst:
        lazy::assign_data(d, b.data);
        break;
      case InKind::kState:
        break;
    }
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const InputBind& b = r.inputs[i];
    if (b.kind != InKind::kState) continue;
    Node* v = b.group->value.get();
    DeviceData& src = *v->data;
    if (!lazy::same_dims(src.layout.shape, b.layout.shape) ||
        !lazy::same_dims(src.layout.strides, b.layout.strides)) {
      note("the layout of a state tensor changed since it was recorded");
      for (auto& x : r.in_buf) x.storage.reset();
      r.armed = false;
      return false;
    }
    // Donation as in the scheduler: a buffer that only this group's value holds is dead
    // once the step has run, so the executable may write the new value into it.
    if (!r.fallible && b.rewritten && v->use_count() == 1 && src.storage &&
        src.storage->use_count() == 1) {
      // Only the buffer moves: the layout vectors stay with the node (which output
      // rebinding below reuses).
      lazy::move_data(r.in_buf[i], src);
    } else {
      lazy::assign_data(r.in_buf[i], src);
    }
  }
  // The executable always takes the bound references over (run_donating moves them into its
  // slot table instead of copying each and dropping both copies: two locked reference-count
  // operations fewer per input). Only buffers nothing else references may be written in
  // place, and those are the state buffers moved above (only for plans that cannot fail
  // half-way): every other binding shares its buffer with a tensor, a view or the record.
  lazy::RunStats st;
  absl::Status s = r.exe->run_donating(absl::MakeSpan(r.in_buf), r.scalars, &r.out_buf, &st);
  for (auto& x : r.in_buf) x.storage.reset();
  if (!s.ok()) throw Error(std::string(s.message()));
  auto& c = lazy::counters();
  ++c.graphs_executed;
  c.kernels_launched += st.kernels_launched;
  c.row_blocked_steps += st.row_blocked_steps;
  c.frozen_runs += st.frozen_runs;
  c.bytes_allocated += st.bytes_allocated;
  outs->resize(r.num_returns);
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const OutputBind& o = r.outputs[i];
    DeviceData& out = r.out_buf[i];
    if (o.groups.size() == 1 && o.returns.empty()) {
      AliasGroup* grp = o.groups[0];
      Node* v = grp->value.get();
      if (v->use_count() == 1 && v->op == OpId::kData && v->data) {
        // The state's own data node, held by nothing else: it takes the new value in place
        // (no node, no layout vectors allocated; out_buf keeps its capacity).
        DeviceData& dst = *v->data;
        StoragePtr old = std::exchange(dst.storage, std::move(out.storage));
        // The previous value (a .grad) is dead now: the executable may write the next one
        // into it (a replay then takes no buffer from the shared allocator).
        if (old && old->use_count() == 1) r.recycled.push_back(std::move(old));
        lazy::assign_dims(dst.layout.shape, out.layout.shape);
        lazy::assign_dims(dst.layout.strides, out.layout.strides);
        dst.layout.offset = out.layout.offset;
        dst.dtype = out.dtype;
        ++grp->version;
        if (grp->borrowed) lazy::note_borrowed_write(*grp);
        continue;
      }
    }
    NodePtr n = Node::data_leaf(out);
    out.storage.reset();
    for (AliasGroup* grp : o.groups) {
      grp->value = n;
      ++grp->version;
      if (grp->borrowed) lazy::note_borrowed_write(*grp);
    }
    for (int32_t k : o.returns) (*outs)[k] = Tensor(TensorImpl::make(n, r.device));
  }
  if (!r.recycled.empty()) {
    r.exe->recycle_all(absl::MakeSpan(r.recycled));
    r.recycled.clear();
  }
  // from_blob memory the step wrote (lazy/borrowed_memory.h), as a sync copies it.
  if (lazy::borrowed_written_count.load(std::memory_order_relaxed) != 0) lazy::write_back_borrowed();
  ++stats.calls;
  ++stats.replays;
  stats.last_replayed = true;
  return true;
}

}  // namespace jit_detail

bool jit_recording() { return jit_detail::g_active != nullptr; }

void jit_host_value(const Tensor& t, std::function<double()> value) {
  if (jit_detail::g_active == nullptr) return;
  if (!t.defined() || t.impl()->pending() || t.impl()->is_view())
    fail("jit_host_value: expects a 0-dim tensor holding data (e.g. sloth::tensor(v)), got %s",
         t.defined() ? "a pending or view tensor" : "an undefined tensor");
  jit_detail::g_active->cur->actions.push_back({{}, std::move(value), t.impl()->value(), -1});
}

void jit_on_replay(std::function<void()> effect) {
  if (jit_detail::g_active == nullptr) return;
  jit_detail::g_active->cur->actions.push_back({std::move(effect), {}, nullptr, -1});
}

}  // namespace sloth
