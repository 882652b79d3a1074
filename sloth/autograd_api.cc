#include "sloth/autograd_api.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "lazy/tensor_impl.h"
#include "sloth/ops.h"
#include "sloth/view_autograd.h"

namespace sloth {

NoGradGuard::NoGradGuard() : prev_(autograd::is_grad_enabled()) { autograd::set_grad_enabled(false); }
NoGradGuard::~NoGradGuard() { autograd::set_grad_enabled(prev_); }
EnableGradGuard::EnableGradGuard() : prev_(autograd::is_grad_enabled()) { autograd::set_grad_enabled(true); }
EnableGradGuard::~EnableGradGuard() { autograd::set_grad_enabled(prev_); }
bool is_grad_enabled() { return autograd::is_grad_enabled(); }

namespace autograd {

using lazy::TensorImplPtr;

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  if (inputs.empty()) fail("autograd::grad: inputs must not be empty");
  std::vector<TensorImplPtr> outs, gos, ins;
  for (const auto& t : outputs) outs.push_back(t.impl());
  for (const auto& t : grad_outputs) gos.push_back(t.defined() ? t.impl() : nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("autograd::grad: input %d is an undefined tensor", static_cast<int64_t>(i));
    if (!internal::tracks_grad(t))
      fail("autograd::grad: input %d does not require grad; call requires_grad_() on it",
           static_cast<int64_t>(i));
    ins.push_back(t.impl());
  }
  auto r = run_backward(outs, gos, retain_graph.value_or(create_graph), create_graph, ins, allow_unused);
  std::vector<Tensor> res;
  for (auto& p : r) res.push_back(p ? Tensor(p) : Tensor());
  return res;
}

// ---- custom functions ------------------------------------------------------------------------
void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  saved_ = std::move(tensors);
  saved_versions_.clear();
  for (const auto& t : saved_) saved_versions_.push_back(t.defined() ? t.version() : 0);
}
std::vector<Tensor> AutogradContext::get_saved_variables() const {
  if (released_)
    fail("get_saved_variables: the saved tensors were freed by an earlier backward; pass "
         "retain_graph=true to it if you need to go through the graph again");
  for (size_t i = 0; i < saved_.size(); ++i)
    if (saved_[i].defined() && saved_[i].version() != saved_versions_[i])
      fail("one of the variables needed for gradient computation has been modified by an "
           "inplace operation: saved tensor %d (%s %s) is at version %d; expected version %d",
           static_cast<int64_t>(i), dtype_name(saved_[i].dtype()), shape_str(saved_[i].shape()),
           saved_[i].version(), saved_versions_[i]);
  return saved_;
}
void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const auto& t : outputs) non_differentiable_.insert(t.impl().get());
}
void AutogradContext::mark_dirty(const std::vector<Tensor>& inputs) {
  for (const auto& t : inputs) dirty_.insert(t.impl().get());
}
bool AutogradContext::needs_input_grad(size_t i) const {
  return i < needs_input_grad_.size() && needs_input_grad_[i];
}

namespace detail {
class CustomNode final : public GradFn {
 public:
  CustomNode(std::string name, std::shared_ptr<AutogradContext> ctx, CustomFunctionCall::Backward bw)
      : name_(std::move(name)), ctx_(std::move(ctx)), backward_(std::move(bw)) {}
  std::string name() const override { return name_ + "Backward"; }
  bool released() const override { return ctx_->released_; }
  void release_saved() override {
    ctx_->saved_.clear();
    ctx_->released_ = true;
  }
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override {
    std::vector<Tensor> g;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i < grads.size() && grads[i]) g.emplace_back(grads[i]);
      else g.push_back(zeros(outputs[i].shape, TensorOptions().dtype(outputs[i].dtype).device(outputs[i].device)));
    }
    std::vector<Tensor> r = backward_(ctx_.get(), std::move(g));
    if (r.size() < next.size())
      fail("%s: backward returned %d gradients but the function has %d tensor inputs", name(),
           static_cast<int64_t>(r.size()), static_cast<int64_t>(next.size()));
    std::vector<TensorImplPtr> out;
    for (size_t i = 0; i < next.size(); ++i) out.push_back(r[i].defined() ? r[i].impl() : nullptr);
    return out;
  }

 private:
  std::string name_;
  std::shared_ptr<AutogradContext> ctx_;
  CustomFunctionCall::Backward backward_;
};
}  // namespace detail

std::vector<Tensor> CustomFunctionCall::run(
    const std::string& name, const std::vector<Tensor>& inputs,
    const std::function<std::vector<Tensor>(AutogradContext*)>& forward, Backward backward) {
  auto ctx = std::make_shared<AutogradContext>();
  bool any = false;
  for (const auto& t : inputs) {
    bool r = t.defined() && t.requires_grad();
    ctx->needs_input_grad_.push_back(r);
    any |= r;
  }
  any &= is_grad_enabled();
  std::vector<Tensor> out;
  {
    NoGradGuard no_grad;
    out = forward(ctx.get());
  }
  if (!any) return out;
  Ref<detail::CustomNode> node(new detail::CustomNode(name, ctx, std::move(backward)));
  for (const auto& t : inputs)
    node->next.push_back(t.defined() ? internal::gradient_edge_of(t) : Edge{});
  for (size_t i = 0; i < out.size(); ++i) {
    Tensor& o = out[i];
    const void* key = o.impl().get();
    const bool dirty = ctx->dirty_.contains(key);
    const bool nondiff = ctx->non_differentiable_.contains(key);
    node->outputs.push_back({o.shape(), o.dtype(), o.device()});
    if (!dirty) {
      for (const auto& in : inputs)
        if (in.impl() == o.impl()) o = Tensor(lazy::TensorImpl::alias_of(o.impl()));
    }
    auto& m = ensure_meta(*o.impl());
    if (nondiff || !is_floating(o.dtype())) {
      m.grad_fn.reset();
      m.requires_grad = false;
      m.frozen_view = true;
      m.non_differentiable = true;
      continue;
    }
    m.grad_fn = node;
    m.output_nr = static_cast<int>(i);
    m.requires_grad = true;
    m.view_version = o.impl()->group->version;
    m.frozen_view = false;
    m.non_differentiable = false;
  }
  return out;
}

// ---- gradcheck ---------------------------------------------------------------------------------
namespace {

std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs,
                                 const std::vector<std::vector<double>>& vals) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = from_vector<double>(vals[i], inputs[i].shape(), TensorOptions().dtype(inputs[i].dtype()));
    if (inputs[i].requires_grad()) t.requires_grad_(true);
    xs.push_back(t);
  }
  return xs;
}

bool compare(const char* what, size_t input, int64_t elem, int64_t out, double analytic,
             double numeric, const GradcheckOptions& o) {
  if (std::fabs(analytic - numeric) <= o.atol + o.rtol * std::fabs(numeric)) return true;
  std::fprintf(stderr,
               "%s mismatch for input %zu, element %ld, output element %ld: analytical %.10g vs "
               "numerical %.10g\n",
               what, input, static_cast<long>(elem), static_cast<long>(out), analytic, numeric);
  return false;
}

bool check(std::function<Tensor(const std::vector<Tensor>&)> f, const std::vector<Tensor>& inputs,
           const GradcheckOptions& o, const char* what) {
  std::vector<std::vector<double>> vals;
  for (const auto& t : inputs) vals.push_back(t.to_vector<double>());
  // Analytical Jacobian, one output element at a time.
  std::vector<Tensor> xs = fresh_leaves(inputs, vals);
  Tensor y = f(xs);
  const int64_t ny = y.numel();
  std::vector<std::vector<std::vector<double>>> jac(inputs.size());  // [input][out][elem]
  std::vector<Tensor> diff_inputs;
  std::vector<size_t> diff_index;
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i].requires_grad()) { diff_inputs.push_back(xs[i]); diff_index.push_back(i); }
  if (diff_inputs.empty()) return true;
  for (int64_t j = 0; j < ny; ++j) {
    std::vector<double> onehot(ny, 0.0);
    onehot[j] = 1;
    Tensor go = from_vector<double>(onehot, y.shape(), TensorOptions().dtype(y.dtype()));
    std::vector<Tensor> g;
    if (y.requires_grad()) g = grad({y}, diff_inputs, {go}, true, false, true);
    for (size_t k = 0; k < diff_inputs.size(); ++k) {
      size_t i = diff_index[k];
      jac[i].push_back(k < g.size() && g[k].defined() ? g[k].to_vector<double>()
                                                      : std::vector<double>(vals[i].size(), 0.0));
    }
  }
  // Numerical Jacobian by central differences, compared element by element.
  bool ok = true;
  for (size_t i : diff_index) {
    for (size_t e = 0; e < vals[i].size() && ok; ++e) {
      auto plus = vals, minus = vals;
      plus[i][e] += o.eps;
      minus[i][e] -= o.eps;
      std::vector<double> yp, ym;
      {
        NoGradGuard ng;
        yp = f(fresh_leaves(inputs, plus)).template to_vector<double>();
        ym = f(fresh_leaves(inputs, minus)).template to_vector<double>();
      }
      for (int64_t j = 0; j < ny && ok; ++j)
        ok = compare(what, i, static_cast<int64_t>(e), j, jac[i][j][e], (yp[j] - ym[j]) / (2 * o.eps), o);
    }
  }
  return ok;
}

}  // namespace

bool gradcheck(std::function<Tensor(const std::vector<Tensor>&)> f,
               const std::vector<Tensor>& inputs, GradcheckOptions options) {
  return check(std::move(f), inputs, options, "gradcheck");
}

bool gradgradcheck(std::function<Tensor(const std::vector<Tensor>&)> f,
                   const std::vector<Tensor>& inputs, GradcheckOptions options) {
  // The function checked is x -> sum of (d f/d x_i * fixed random weights): its gradient is
  // the second derivative contracted with those weights.
  auto g = [f](const std::vector<Tensor>& xs) -> Tensor {
    EnableGradGuard enable;  // the numerical side evaluates g under no_grad
    std::vector<Tensor> diff;
    for (const auto& x : xs)
      if (x.requires_grad()) diff.push_back(x);
    Tensor y = f(xs);
    if (!y.requires_grad()) return zeros({}, TensorOptions().dtype(kFloat64));
    Tensor w = ones(y.shape(), TensorOptions().dtype(y.dtype())) * 0.5 + 0.25;
    auto gs = grad({y}, diff, {w}, true, true, true);
    Tensor acc = zeros({}, TensorOptions().dtype(kFloat64));
    for (size_t k = 0; k < gs.size(); ++k)
      if (gs[k].defined()) acc = acc + (gs[k] * gs[k]).sum().to(kFloat64) * (0.3 + 0.1 * k);
    return acc;
  };
  return check(g, inputs, options, "gradgradcheck");
}

}  // namespace autograd
}  // namespace sloth
