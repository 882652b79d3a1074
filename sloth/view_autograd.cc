#include "sloth/view_autograd.h"

#include "autograd/grad_mode.h"
#include "core/view_layout.h"
#include "sloth/dispatch.h"
#include "sloth/ops.h"

namespace sloth::internal {
namespace {

using lazy::TensorImplPtr;
using lazy::ViewStep;

Tensor zeros_of(const autograd::OutputInfo& info) {
  return zeros(info.shape, TensorOptions().dtype(info.dtype).device(info.device));
}

// grad of a view chain: the base gets the view's gradient in the window, zeros elsewhere.
class ViewChainBackward final : public autograd::GradFn {
 public:
  ViewChainBackward(std::vector<ViewStep> chain, autograd::OutputInfo base)
      : chain_(std::move(chain)), base_(std::move(base)) {}
  std::string name() const override { return "AsStridedBackward"; }
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override {
    if (grads.empty() || !grads[0]) return {nullptr};
    Tensor g(grads[0]);
    return {scatter_chain(zeros_of(base_), g, chain_).impl()};
  }

 private:
  std::vector<ViewStep> chain_;
  autograd::OutputInfo base_;
};

// The base after a write through a view: outside the window the old base flows through,
// inside it the written value does.
class CopySlices final : public autograd::GradFn {
 public:
  CopySlices(std::vector<ViewStep> chain, autograd::OutputInfo view)
      : chain_(std::move(chain)), view_(std::move(view)) {}
  std::string name() const override { return "CopySlices"; }
  // PyTorch's CopySlices drops its wrapped node when a backward frees the graph, so a second
  // pass through it fails even though it saved no tensor.
  void release_saved() override { released_ = true; }
  bool released() const override { return released_; }
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override {
    if (grads.empty() || !grads[0]) return {nullptr, nullptr};
    Tensor g(grads[0]);
    Tensor g_old = next[0].fn ? scatter_chain(g, zeros_of(view_), chain_) : Tensor();
    // PyTorch's is grad.clone() with the window overwritten, so under create_graph it has
    // grad's history even when the window is everything (then its value is all zeros).
    if (g_old.defined() && g.requires_grad() && !g_old.requires_grad())
      g_old = where(full(g.shape(), true, TensorOptions(kBool).device(g.device())), g_old, g);
    Tensor g_new = next[1].fn ? replay_chain(g, chain_).clone() : Tensor();
    return {g_old.defined() ? g_old.impl() : nullptr, g_new.defined() ? g_new.impl() : nullptr};
  }

 private:
  std::vector<ViewStep> chain_;
  autograd::OutputInfo view_;
  bool released_ = false;
};

class OverwriteBackward final : public autograd::GradFn {
 public:
  explicit OverwriteBackward(OpId op) : op_(op) {}
  std::string name() const override { return autograd::backward_name(op_); }
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override {
    if (grads.empty() || !grads[0]) return {nullptr, nullptr};
    Tensor g(grads[0]);
    Tensor old = next[0].fn ? zeros_like(g) : Tensor();
    return {old.defined() ? old.impl() : nullptr, next[1].fn ? grads[0] : nullptr};
  }

 private:
  OpId op_;
};

autograd::OutputInfo info_of(const lazy::TensorImpl& t) {
  return {t.shape, t.dtype, t.group->device};
}

constexpr const char* kMultiOutputRule =
    "This view is the output of a function that returns multiple views (split, chunk). Such "
    "functions do not allow the output views to be modified inplace; replace the inplace "
    "operation by an out-of-place one, or clone() the view";

void refresh_if_stale(const Tensor& t, bool strict) {
  lazy::TensorImpl& ti = *t.impl();
  if (!ti.is_view()) return;
  auto* m = autograd::meta(ti);
  const int64_t version = ti.group->version;
  if (m && (m->frozen_view || m->view_version == version)) return;
  if (m && m->multi_output >= 0 && autograd::requires_grad(*ti.view_base)) {
    if (!strict || !autograd::is_grad_enabled()) return;
    fail("Output %d of SplitBackward0 is a view and its base or another view of its base has "
         "been modified inplace. %s",
         m->multi_output, kMultiOutputRule);
  }
  if (!m && version == 0) return;  // never written: a view made without grad stays so
  const Tensor base(ti.view_base);
  if (!autograd::requires_grad(*ti.view_base)) {
    if (m) { m->grad_fn.reset(); m->view_version = version; }
    return;
  }
  refresh_view_grad_fn(t);
}

}  // namespace

autograd::Edge gradient_edge_of(const Tensor& t) {
  refresh_if_stale(t, true);
  return autograd::gradient_edge(t.impl());
}

bool tracks_grad(const Tensor& t, bool strict) {
  refresh_if_stale(t, strict);
  if (autograd::requires_grad(*t.impl())) return true;
  // A floating view reports requires_grad when its base does, also when it was made before the
  // base's requires_grad_() (PyTorch's DifferentiableViewMeta::requires_grad); until a write
  // regenerates its history it has no grad_fn, so gradients through it go nowhere.
  const lazy::TensorImpl& ti = *t.impl();
  if (auto* m = autograd::meta(ti); m && m->non_differentiable) return false;
  return ti.is_view() && is_floating(ti.dtype) && autograd::requires_grad(*ti.view_base);
}

void check_multi_output_write(const Tensor& t, const char* op) {
  auto* m = autograd::meta(*t.impl());
  if (m == nullptr || m->multi_output < 0 || !autograd::is_grad_enabled()) return;
  fail("%s: output %d of %s is a view and is being modified inplace. %s", op, m->multi_output,
       m->grad_fn ? m->grad_fn->name() : std::string("SplitBackward0"), kMultiOutputRule);
}

void rebase_view_history(const Tensor& view, const Tensor& r) {
  lazy::TensorImpl& vi = *view.impl();
  Tensor base(vi.view_base);
  autograd::Edge old_base = gradient_edge_of(base);
  autograd::Edge value = gradient_edge_of(r);
  if (!old_base.fn && !value.fn) return;
  Ref<CopySlices> fn(new CopySlices({vi.chain.begin(), vi.chain.end()}, info_of(vi)));
  fn->next = {old_base, value};
  fn->outputs.push_back(info_of(*vi.view_base));
  auto& m = autograd::ensure_meta(*vi.view_base);
  m.grad_fn = fn;
  m.output_nr = 0;
}

void refresh_view_grad_fn(const Tensor& view) {
  lazy::TensorImpl& vi = *view.impl();
  auto& m = autograd::ensure_meta(vi);
  m.view_version = vi.group->version;
  autograd::Edge base = autograd::gradient_edge(vi.view_base);
  if (!base.fn) {
    m.grad_fn.reset();
    return;
  }
  Ref<ViewChainBackward> fn(
      new ViewChainBackward({vi.chain.begin(), vi.chain.end()}, info_of(*vi.view_base)));
  fn->next = {base};
  fn->outputs.push_back(info_of(vi));
  m.grad_fn = fn;
  m.output_nr = 0;
}

autograd::GradFnPtr overwrite_backward(OpId op, autograd::Edge old_self, autograd::Edge value,
                                       autograd::OutputInfo self) {
  Ref<OverwriteBackward> fn(new OverwriteBackward(op));
  fn->next = {std::move(old_self), std::move(value)};
  fn->outputs.push_back(std::move(self));
  return fn;
}

Tensor replay_chain(const Tensor& base, absl::Span<const ViewStep> chain) {
  Tensor t = base;
  for (const auto& s : chain) t = call_op(s.op, {t}, s.attrs);
  return t;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const Shape& gs = g.shape();
  const size_t lead = gs.size() - shape.size();
  Shape dims;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) dims.push_back(static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  if (lead > 0 || r.shape() != shape) r = r.reshape(shape);
  return r;
}

Tensor scatter_chain(const Tensor& base, const Tensor& src, absl::Span<const ViewStep> chain) {
  std::vector<Tensor> bases{base};
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    bases.push_back(call_op(chain[i].op, {bases.back()}, chain[i].attrs));
  Tensor v = src;
  for (size_t i = chain.size(); i-- > 0;) {
    const ViewStep& s = chain[i];
    if (s.op == OpId::kExpand) {  // every broadcast copy adds to its source element
      v = sum_to(v, s.in_shape);
      continue;
    }
    ViewInverse inv = inverse_of_view(s.op, s.attrs, s.in_shape);
    v = inv.scatter ? call_op(inv.op, {bases[i], v}, inv.attrs) : call_op(inv.op, {v}, inv.attrs);
  }
  return v;
}

}  // namespace sloth::internal
