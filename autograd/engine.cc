#include "autograd/engine.h"

#include <algorithm>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "autograd/grad_mode.h"
#include "core/error.h"

namespace sloth::autograd {
namespace {

thread_local bool accumulate_with_graph = false;

// Accumulates into a leaf's .grad. Holds the leaf (the leaf's meta points back weakly).
class AccumulateGrad final : public GradFn {
 public:
  explicit AccumulateGrad(TensorImplPtr leaf) : leaf_(std::move(leaf)) {
    outputs.push_back({leaf_->shape, leaf_->dtype, leaf_->group->device});
  }
  ~AccumulateGrad() override {
    if (auto* m = meta(*leaf_); m && m->accumulator == this) m->accumulator = nullptr;
  }
  std::string name() const override { return "AccumulateGrad"; }
  bool is_accumulator() const override { return true; }
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override {
    TensorImplPtr g = grads.empty() ? nullptr : grads[0];
    if (!g) return {};
    AutogradMeta& m = ensure_meta(*leaf_);
    if (m.extras)
      for (auto& h : m.extras->leaf_hooks) {
        TensorImplPtr r = h(g);
        if (r) g = r;
      }
    if (accumulate_with_graph) {
      // create_graph: the sum keeps its history, so it is a new tensor (as PyTorch).
      m.grad = m.grad ? grad_math().add(m.grad, g) : g;
    } else if (!m.grad) {
      // The first gradient: a tensor of its own (a new alias group over the gradient's
      // value), never an alias of the incoming one, which may be a caller's tensor
      // (y.backward(gout) with y a leaf): later accumulation writes into it.
      m.grad = lazy::TensorImpl::make(g->value(), leaf_->group->device);
    } else {
      // In place, as PyTorch's AccumulateGrad (variable_grad += new_grad without
      // create_graph): .grad stays the same tensor object, and whoever holds it (or a view
      // of it) sees the sum.
      m.grad->write(grad_math().add(m.grad, g)->value());
    }
    // By index: a hook may touch the leaf's meta (set_grad), not its hook list.
    if (m.extras)
      for (size_t i = 0; i < m.extras->post_accumulate_hooks.size(); ++i)
        m.extras->post_accumulate_hooks[i](leaf_);
    return {};
  }
  const TensorImplPtr& leaf() const { return leaf_; }

 private:
  TensorImplPtr leaf_;
};

struct GradModeGuard {
  bool prev;
  explicit GradModeGuard(bool on) : prev(is_grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(prev); }
};

}  // namespace

GradFnPtr grad_accumulator(const TensorImplPtr& leaf) {
  AutogradMeta& m = ensure_meta(*leaf);
  if (m.accumulator) return GradFnPtr(m.accumulator);
  GradFnPtr acc(new AccumulateGrad(leaf));
  m.accumulator = acc.get();
  return acc;
}

std::vector<TensorImplPtr> run_backward(const std::vector<TensorImplPtr>& roots,
                                        const std::vector<TensorImplPtr>& grad_roots,
                                        bool retain_graph, bool create_graph,
                                        const std::vector<TensorImplPtr>& inputs,
                                        bool allow_unused) {
  // 1. Root edges and their starting gradients. Every check happens before anything runs,
  // so a failing call leaves .grad and the graph as they were.
  std::vector<Edge> root_edges;
  std::vector<TensorImplPtr> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const TensorImplPtr& r = roots[i];
    Edge e = gradient_edge(r);
    if (!e.fn)
      fail("backward: element %d of tensors does not require grad and does not have a grad_fn; "
           "call requires_grad_() on the leaves you want gradients for",
           static_cast<int64_t>(i));
    TensorImplPtr g = i < grad_roots.size() ? grad_roots[i] : nullptr;
    if (!g) {
      if (numel(r->shape) != 1)
        fail("backward: grad can be implicitly created only for scalar outputs, but the output "
             "has shape %s; pass a gradient of that shape (e.g. ones_like(y)) or reduce with sum()",
             shape_str(r->shape));
      g = grad_math().ones_like(r);
    } else if (g->shape != r->shape) {
      fail("backward: gradient has shape %s but the output has shape %s", shape_str(g->shape),
           shape_str(r->shape));
    }
    root_edges.push_back(e);
    root_grads.push_back(g);
  }

  // 2. Discover the graph and count dependencies (iteratively: graphs can be deep).
  // Sized from the previous backward on this thread (training steps repeat the same graph),
  // so the tables are allocated once instead of regrown node by node.
  thread_local size_t size_hint = 16;
  absl::flat_hash_map<GradFn*, int> deps;
  deps.reserve(size_hint);
  std::vector<GradFn*> order;  // discovery order
  order.reserve(size_hint);
  {
    std::vector<GradFn*> stack;
    stack.reserve(size_hint);
    absl::flat_hash_set<GradFn*> seen;
    seen.reserve(size_hint);
    for (auto& e : root_edges)
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      GradFn* f = stack.back();
      stack.pop_back();
      order.push_back(f);
      for (auto& n : f->next) {
        if (!n.fn) continue;
        ++deps[n.fn.get()];
        if (seen.insert(n.fn.get()).second) stack.push_back(n.fn.get());
      }
    }
  }

  size_hint = std::max(size_hint, order.size());

  // 3. autograd::grad: capture targets and the nodes needed to reach them.
  const bool capture_mode = !inputs.empty();
  std::vector<Edge> targets;
  absl::flat_hash_set<GradFn*> needed;
  if (capture_mode) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      Edge e = gradient_edge(inputs[i]);
      // The face checked that every input requires grad; one with no edge (a view whose
      // history is not regenerated) simply receives nothing.
      targets.push_back(e);
    }
    absl::flat_hash_set<GradFn*> target_fns;
    for (auto& t : targets)
      if (t.fn) target_fns.insert(t.fn.get());
    // Reverse discovery order visits every node after the nodes it reaches? Not always, so
    // iterate to a fixed point (graphs here are small relative to the cost of backward).
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        GradFn* f = *it;
        if (needed.contains(f)) continue;
        bool need = target_fns.contains(f);
        for (auto& n : f->next) need |= n.fn && needed.contains(n.fn.get());
        if (need) { needed.insert(f); changed = true; }
      }
    }
  }
  for (GradFn* f : order) {
    if (capture_mode && !needed.contains(f)) continue;
    // Saved tensors modified in place since: PyTorch raises when it reaches the node; checking
    // every node first raises the same error with nothing accumulated yet.
    if (!f->released()) f->check_versions();
    if (f->released() && !f->is_accumulator())
      fail("Trying to backward through the graph a second time (or to use saved values after "
           "they were freed) at %s. Saved values are freed by backward() and autograd::grad(); "
           "pass retain_graph=true to the first call if you need to go through the graph again",
           f->name());
  }

  // 4. Run in dependency order, newest node first among the ready ones.
  GradModeGuard mode(create_graph);
  accumulate_with_graph = create_graph;
  absl::flat_hash_map<GradFn*, std::vector<TensorImplPtr>> buffers;
  buffers.reserve(order.size());
  auto add_to = [&](GradFn* f, int nr, const TensorImplPtr& g) {
    if (!g) return;
    auto& buf = buffers[f];
    if (buf.size() < f->outputs.size()) buf.resize(std::max<size_t>(f->outputs.size(), nr + 1));
    if (buf.size() <= static_cast<size_t>(nr)) buf.resize(nr + 1);
    buf[nr] = buf[nr] ? grad_math().add(buf[nr], g) : g;
  };
  auto cmp = [](GradFn* a, GradFn* b) { return a->sequence_nr < b->sequence_nr; };
  std::vector<GradFn*> ready_storage;
  ready_storage.reserve(order.size());
  std::priority_queue<GradFn*, std::vector<GradFn*>, decltype(cmp)> ready(cmp, std::move(ready_storage));
  for (size_t i = 0; i < root_edges.size(); ++i)
    add_to(root_edges[i].fn.get(), root_edges[i].input_nr, root_grads[i]);
  absl::flat_hash_set<GradFn*> queued;
  queued.reserve(order.size());
  for (auto& e : root_edges)
    if (deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());

  std::vector<TensorImplPtr> captured(targets.size());
  while (!ready.empty()) {
    GradFn* f = ready.top();
    ready.pop();
    if (capture_mode && !needed.contains(f)) continue;
    std::vector<TensorImplPtr> grads = std::move(buffers[f]);
    buffers.erase(f);
    grads.resize(std::max<size_t>(grads.size(), f->outputs.size()));
    if (f->extras) {
      for (auto& [nr, hook] : f->extras->pre_hooks)
        if (grads[nr]) {
          TensorImplPtr r = hook(grads[nr]);
          if (r) grads[nr] = r;
        }
      for (auto& [nr, t] : f->extras->retained)
        if (grads[nr]) {
          AutogradMeta& m = ensure_meta(*t);
          TensorImplPtr g = create_graph ? grads[nr] : grad_math().detach(grads[nr]);
          m.grad = m.grad ? grad_math().add(m.grad, g) : g;
        }
    }
    bool is_target = false;
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i].fn.get() == f) {
        is_target = true;
        captured[i] = grads[targets[i].input_nr];
      }
    if (capture_mode && is_target && dynamic_cast<AccumulateGrad*>(f)) continue;
    std::vector<TensorImplPtr> out = f->apply(std::move(grads));
    if (!retain_graph) f->release_saved();
    for (size_t i = 0; i < f->next.size() && i < out.size(); ++i) {
      const Edge& e = f->next[i];
      if (!e.fn) continue;
      add_to(e.fn.get(), e.input_nr, out[i]);
    }
    for (const Edge& e : f->next) {
      if (!e.fn) continue;
      if (--deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());
    }
  }
  accumulate_with_graph = false;

  if (capture_mode) {
    for (size_t i = 0; i < captured.size(); ++i) {
      if (!captured[i] && !allow_unused)
        fail("autograd::grad: input %d was not used in the graph of the outputs; pass "
             "allow_unused=true if that is expected (its gradient is then undefined)",
             static_cast<int64_t>(i));
      if (captured[i] && !create_graph) captured[i] = grad_math().detach(captured[i]);
    }
  }
  return captured;
}

}  // namespace sloth::autograd
