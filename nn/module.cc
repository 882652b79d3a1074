#include "nn/module.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "nn/activation.h"  // MLP's ReLU
#include "nn/functional.h"  // Embedding's padding_idx

namespace sloth::nn {

Module::Module(std::string name) : name_(std::move(name)) {}
Module::~Module() = default;

Tensor Module::forward(const Tensor&) {
  fail("%s.forward: this module has no forward(const Tensor&) reachable through a Module "
       "pointer; a `Tensor forward(Tensor x)` hides it without overriding it. Call the module "
       "through its own type or a holder (SLOTH_MODULE(Name), where any forward signature "
       "works), or declare `Tensor forward(const Tensor& x) override`",
       name_);
}

void Module::check_new_name(const char* what, const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    fail("%s: invalid name '%s' in %s (must be non-empty and contain no '.')", what, name, name_);
  for (const auto& [n, p] : params_)
    if (n == name) fail("%s: %s already has a parameter named '%s'", what, name_, name);
  for (const auto& [n, b] : buffers_)
    if (n == name) fail("%s: %s already has a buffer named '%s'", what, name_, name);
  for (const auto& [n, c] : children_)
    if (n == name) fail("%s: %s already has a submodule named '%s'", what, name_, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name("register_parameter", name);
  if (t.defined()) {
    t = t.detach();
    if (requires_grad) t.requires_grad_(true);
  }
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name("register_buffer", name);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  if (!m) fail("register_module: submodule '%s' of %s is null", name, name_);
  check_new_name("register_module", name);
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers,
                     OrderedDict<std::string, Tensor>* out) const {
  for (const auto& [n, p] : buffers ? buffers_ : params_)
    if (p.defined()) out->push_back_distinct(prefix + n, p);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", true, buffers, out);
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out("Parameter");
  collect("", recurse, false, &out);
  return out;
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out("Buffer");
  collect("", recurse, true, &out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, b] : named_buffers(recurse)) out.push_back(b);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::string, std::shared_ptr<Module>> out("Module");
  for (const auto& [n, c] : children_) out.push_back_distinct(n, c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules("", include_self)) out.push_back(std::move(m));
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(
    const std::string& name_prefix, bool include_self) {
  OrderedDict<std::string, std::shared_ptr<Module>> out("Module");
  if (include_self) {
    std::shared_ptr<Module> self = weak_from_this().lock();
    if (!self)
      fail("%s.modules(include_self=true): this module is not held by a std::shared_ptr, so "
           "it cannot be returned as one; hold it in a holder (SLOTH_MODULE / TORCH_MODULE) or "
           "std::make_shared, or pass include_self=false", name_);
    out.push_back_distinct(name_prefix, std::move(self));
  }
  // Children are shared_ptrs by construction, so the rest needs no self pointer.
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& prefix,
                                                                     const Module& m) {
    for (const auto& [name, child] : m.children_) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      out.push_back_distinct(full, child);
      walk(full, *child);
    }
  };
  walk(name_prefix, *this);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children_) child->apply(fn);
}

void Module::apply(const std::function<void(const Module&)>& fn) const {
  fn(*this);
  for (const auto& [name, child] : children_) std::as_const(*child).apply(fn);
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn,
                   const std::string& name_prefix) {
  fn(name_prefix, *this);
  for (auto& [name, child] : children_)
    child->apply(fn, name_prefix.empty() ? name : name_prefix + "." + name);
}

void Module::apply(const std::function<void(const std::shared_ptr<Module>&)>& fn) {
  for (const auto& m : modules(true)) fn(m);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard g;
  for (Tensor& p : parameters()) {
    Tensor gr = p.grad();
    if (!gr.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else gr.zero_();
  }
}

void Module::to(Device device) {
  NoGradGuard g;
  for (auto& [n, p] : params_) {
    if (!p.defined()) continue;
    if (p.device().type == device.type && p.device().index == device.index) continue;
    bool rg = p.requires_grad();
    Tensor moved = p.to(device).detach();
    if (rg) moved.requires_grad_(true);
    p = moved;
  }
  for (auto& [n, b] : buffers_) {
    if (!b.defined()) continue;
    if (b.device().type == device.type && b.device().index == device.index) continue;
    b = b.to(device);
  }
  for (auto& [n, c] : children_) c->to(device);
}

void Module::to(DType dtype) {
  NoGradGuard g;
  for (auto& [n, p] : params_) {
    if (!p.defined() || p.dtype() == dtype) continue;
    if (!is_floating(p.dtype())) continue;
    bool rg = p.requires_grad();
    Tensor moved = p.to(dtype).detach();
    if (rg) moved.requires_grad_(true);
    p = moved;
  }
  for (auto& [n, b] : buffers_)
    if (b.defined() && b.dtype() != dtype && is_floating(b.dtype())) b = b.to(dtype);
  for (auto& [n, c] : children_) c->to(dtype);
}

std::string Module::repr(int indent) const {
  std::ostringstream os;
  os << name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (const auto& [n, c] : children_)
      os << std::string(indent + 2, ' ') << "(" << n << "): " << c->repr(indent + 2) << "\n";
    os << std::string(indent, ' ');
  }
  os << ")";
  return os.str();
}

// ---- built-in modules ----------------------------------------------------------------------

Tensor detail::uniform_init(const Shape& shape, double bound) {
  NoGradGuard g;
  return (rand(shape) * (2 * bound) - bound).detach();
}

namespace {
Tensor uniform(const Shape& shape, double bound) { return detail::uniform_init(shape, bound); }
void check_positive(const char* what, const char* arg, int64_t v) {
  if (v <= 0) fail("%s: %s must be positive, got %d", what, arg, v);
}
}  // namespace

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias)
    : Module("Linear"),
      in_features((check_positive("nn::Linear", "in_features", in), in)),
      out_features((check_positive("nn::Linear", "out_features", out), out)),
      weight(register_parameter("weight", uniform({out, in}, 1.0 / std::sqrt(double(in))))),
      bias(register_parameter("bias",
                              with_bias ? uniform({out}, 1.0 / std::sqrt(double(in))) : Tensor())) {}

Tensor LinearImpl::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != in_features)
    fail("nn::Linear(%d, %d): input of shape %s has %d features in its last dim, expected %d",
         in_features, out_features, shape_str(x.shape()), x.dim() ? x.size(-1) : 0, in_features);
  return linear(x, weight, bias);
}

std::string LinearImpl::extra_repr() const {
  std::ostringstream os;
  os << "in_features=" << in_features << ", out_features=" << out_features
     << ", bias=" << (bias.defined() ? "true" : "false");
  return os.str();
}

DropoutImpl::DropoutImpl(double p_) : Module("Dropout"), p(p_) {
  if (!(p >= 0 && p <= 1)) fail("nn::Dropout: p must be in [0, 1], got %g", p);
}
std::string DropoutImpl::extra_repr() const { return "p=" + std::to_string(p); }

namespace {
// The padding row in [0, n), checked before anything is made.
std::optional<int64_t> padding_row(const EmbeddingOptions& o) {
  if (!o.padding_idx()) return std::nullopt;
  const int64_t p = *o.padding_idx(), n = o.num_embeddings();
  if (p < -n || p >= n)
    fail("nn::Embedding: padding_idx %d must be within num_embeddings (%d): in [%d, %d]", p, n,
         -n, n - 1);
  return p < 0 ? p + n : p;
}

Tensor embedding_table(const EmbeddingOptions& o, std::optional<int64_t> pad) {
  const int64_t n = o.num_embeddings(), d = o.embedding_dim();
  check_positive("nn::Embedding", "num_embeddings", n);
  check_positive("nn::Embedding", "embedding_dim", d);
  NoGradGuard g;
  if (o._weight().defined()) {
    if (o._weight().shape() != Shape{n, d})
      fail("nn::Embedding: _weight has shape %s, expected [num_embeddings, embedding_dim] = "
           "[%d, %d]", shape_str(o._weight().shape()), n, d);
    return o._weight().detach();
  }
  Tensor w = randn({n, d}).detach();
  if (pad) w.select(0, *pad).fill_(0);  // PyTorch's reset_parameters zeroes the padding row
  return w;
}
}  // namespace

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o)
    : Module("Embedding"),
      num_embeddings(o.num_embeddings()),
      embedding_dim(o.embedding_dim()),
      padding_idx(padding_row(o)),
      weight(register_parameter("weight", embedding_table(o, padding_idx))) {}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  if (!padding_idx) return embedding(weight, indices);
  return functional::embedding(indices, weight,
                               functional::EmbeddingFuncOptions().padding_idx(*padding_idx));
}

std::string EmbeddingImpl::extra_repr() const {
  return "num_embeddings=" + std::to_string(num_embeddings) +
         ", embedding_dim=" + std::to_string(embedding_dim) +
         (padding_idx ? ", padding_idx=" + std::to_string(*padding_idx) : "");
}

namespace {
Tensor filled(const Shape& s, double v, bool on) {
  if (!on) return Tensor();
  NoGradGuard g;
  return full(s, v).detach();
}
}  // namespace

LayerNormImpl::LayerNormImpl(Shape shape, double eps_, bool affine)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(eps_),
      weight(register_parameter("weight", filled(normalized_shape, 1.0, affine))),
      bias(register_parameter("bias", filled(normalized_shape, 0.0, affine))) {
  if (normalized_shape.empty()) fail("nn::LayerNorm: normalized_shape must not be empty");
  for (int64_t d : normalized_shape) check_positive("nn::LayerNorm", "normalized_shape", d);
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNormImpl::extra_repr() const {
  std::ostringstream os;
  os << shape_str(normalized_shape) << ", eps=" << eps
     << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

void SequentialImpl::push_back(const std::string& name, AnyModule m) {
  if (m.is_empty()) fail("nn::Sequential::push_back: module '%s' is null (an empty holder?)", name);
  add_child(name, m.ptr());   // checks the name first: nothing changes on error
  modules_.push_back(std::move(m));
}

std::shared_ptr<Module> SequentialImpl::ptr(size_t i) const {
  if (i >= modules_.size())
    fail("nn::Sequential: index %d is out of range for a Sequential of %d modules",
         static_cast<int64_t>(i), static_cast<int64_t>(modules_.size()));
  return modules_[i].ptr();
}

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor h = x;
  for (const AnyModule& m : modules_) h = m.forward(h);
  return h;
}

Tensor AnyModule::forward(const Tensor& x) const {
  if (!forward_) fail("nn::AnyModule::forward: this AnyModule is empty");
  return forward_(x);
}

MLPImpl::MLPImpl(const std::vector<int64_t>& sizes, bool bias) {
  if (sizes.size() < 2)
    fail("nn::MLP: needs at least 2 sizes (inputs and outputs), got %d",
         static_cast<int64_t>(sizes.size()));
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    push_back(std::make_shared<LinearImpl>(sizes[i], sizes[i + 1], bias));
    if (i + 2 < sizes.size()) push_back(std::make_shared<ReLUImpl>());
  }
}

}  // namespace sloth::nn
