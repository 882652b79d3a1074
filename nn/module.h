// sloth::nn modules, LibTorch style: a model is a struct deriving from nn::Module that
// registers its parameters and submodules. The built-in modules are holders (nn::Linear is a
// handle over a shared nn::LinearImpl; see nn/holder.h), and SLOTH_MODULE(Net) makes one for
// a user module:
//
//   struct NetImpl : sloth::nn::Module {
//     NetImpl() {
//       fc1 = register_module("fc1", sloth::nn::Linear(784, 128));
//       fc2 = register_module("fc2", sloth::nn::Linear(128, 10));
//     }
//     sloth::Tensor forward(sloth::Tensor x) { return fc2(sloth::relu(fc1(x))); }
//     sloth::nn::Linear fc1{nullptr}, fc2{nullptr};
//   };
//   SLOTH_MODULE(Net);   // Net net; net(x); net->parameters();
//
// (Deriving from Module and overriding `Tensor forward(const Tensor&)`, held by
// std::shared_ptr, works as before.)
// Names: named_parameters() yields dotted names in registration order ("fc1.weight",
// "fc1.bias", ...; Sequential children are named "0", "1", ... as in PyTorch).
// Parameters are leaf tensors that require grad; initialization runs under NoGradGuard.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "nn/holder.h"
#include "nn/ordered_dict.h"
#include "sloth/sloth_core.h"

namespace sloth::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "Module");
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation. The default throws: a module without forward is a container.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Parameters of this module and (recurse) its submodules, in registration order.
  // Undefined parameters (e.g. Linear's bias with bias=false) are skipped.
  std::vector<Tensor> parameters(bool recurse = true) const;
  // named_*: LibTorch's OrderedDict (items with key()/value(), and first/second).
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  // Buffers (state that is not a parameter, e.g. BatchNorm's running statistics), in the same
  // order and with the same dotted names as PyTorch's named_buffers(). Undefined buffers are
  // skipped. Checkpoints save and load them with the parameters.
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // This module (when include_self) and every descendant, depth first in registration order
  // (LibTorch's modules()/named_modules(): "" names this one, "fc1", "seq.0" the others). With
  // include_self the module must be held by a std::shared_ptr (a holder or make_shared).
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(
      const std::string& name_prefix = "", bool include_self = true);
  // Calls fn on this module, then on each descendant, depth first (LibTorch's apply; the
  // custom-initialization idiom: `net->apply([](nn::Module& m) { if (auto* l =
  // m.as<nn::Linear>()) nn::init::xavier_uniform_(l->weight); })`).
  void apply(const std::function<void(Module&)>& fn);
  void apply(const std::function<void(const Module&)>& fn) const;
  void apply(const std::function<void(const std::string&, Module&)>& fn,
             const std::string& name_prefix = "");
  void apply(const std::function<void(const std::shared_ptr<Module>&)>& fn);
  // This module as a T, or null when it is not one. T is a module class or a holder:
  // m.as<nn::Linear>() is a LinearImpl*.
  template <class T>
  auto* as() {
    if constexpr (is_module_holder_v<T>)
      return dynamic_cast<typename T::ContainedType*>(this);
    else
      return dynamic_cast<T*>(this);
  }
  template <class T>
  const auto* as() const {
    return const_cast<Module*>(this)->as<T>();
  }
  template <class T>
  bool is() const { return as<T>() != nullptr; }

  // Training mode (affects Dropout); recursive like PyTorch.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // set_to_none = true (PyTorch 2's default): grads become undefined and the next backward
  // writes fresh ones. false: existing grads are zeroed in place.
  void zero_grad(bool set_to_none = true);

  // Moves every parameter and buffer to `device`. On the same device this is a no-op.
  // Otherwise each registered parameter slot is replaced by a new leaf on the device (and each
  // buffer slot by its copy there): references returned by register_parameter and
  // register_buffer (and the built-in modules' members) follow, copies made earlier do not.
  void to(Device device);
  void to(DeviceType type) { to(Device{type, 0}); }  // LibTorch's net->to(torch::kCPU)
  // Converts every floating-point parameter and buffer to `dtype` (same rules as to(Device));
  // integer buffers such as BatchNorm's num_batches_tracked keep their dtype, as in PyTorch.
  void to(DType dtype);

  const std::string& name() const { return name_; }
  // A one-line-per-module description, like printing a PyTorch module.
  virtual std::string repr(int indent = 0) const;

  // Registers a parameter: the tensor is detached, made a leaf and marked requires_grad.
  // The returned reference stays valid for the module's lifetime (slots never move).
  // An undefined tensor registers an absent parameter (skipped by parameters()).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Registers a buffer: kept as given (no grad is added), with a reference that stays valid
  // for the module's lifetime, like register_parameter. An undefined tensor registers an
  // absent buffer (skipped by buffers()). In-place writes through the reference (running
  // statistics) are recorded in the step graph like any other write.
  Tensor& register_buffer(const std::string& name, Tensor t);
  // Registers a submodule and returns what it was given. Takes a std::shared_ptr to a module
  // (or to a holder: what std::make_shared<nn::Linear> makes) or a holder by value, LibTorch's
  // `fc1 = register_module("fc1", nn::Linear(784, 64))`; the holder returned shares the
  // registered module.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    if constexpr (is_module_holder_v<M>)
      add_child(name, m ? holder_impl(*m) : nullptr);
    else
      add_child(name, m);
    return m;
  }
  template <class H>
    requires is_module_holder_v<H>
  std::remove_cvref_t<H> register_module(const std::string& name, const H& holder) {
    add_child(name, holder_impl(holder));
    return holder;
  }

 protected:
  virtual std::string extra_repr() const { return ""; }
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  // Containers that insert or remove children (ModuleList, ModuleDict) re-register them all.
  void clear_children() { children_.clear(); }

 private:
  void collect(const std::string& prefix, bool recurse, bool buffers,
               OrderedDict<std::string, Tensor>* out) const;
  void check_new_name(const char* what, const std::string& name) const;
  std::string name_;
  bool training_ = true;
  std::list<std::pair<std::string, Tensor>> params_;   // std::list: stable addresses
  std::list<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// y = x W^T + b. W: [out, in] ~ U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's kaiming_uniform_ with
// a = sqrt(5)); b: [out] ~ U(-1/sqrt(in), 1/sqrt(in)).
// LibTorch's builder: nn::Linear(nn::LinearOptions(4, 3).bias(false)).
class LinearOptions {
 public:
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  SLOTH_NN_ARG(int64_t, in_features);
  SLOTH_NN_ARG(int64_t, out_features);
  SLOTH_NN_ARG(bool, bias) = true;
};

class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  explicit LinearImpl(const LinearOptions& o)
      : LinearImpl(o.in_features(), o.out_features(), o.bias()) {}
  Tensor forward(const Tensor& x) override;
  int64_t in_features, out_features;
  Tensor& weight;
  Tensor& bias;   // undefined when bias = false
 protected:
  std::string extra_repr() const override;
};

// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p);
// the identity in eval mode.
// nn::Dropout(nn::DropoutOptions().p(0.2)) or nn::Dropout(0.2).
class DropoutOptions {
 public:
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT: implicit, as LibTorch
  SLOTH_NN_ARG(double, p);
  SLOTH_NN_ARG(bool, inplace) = false;   // accepted; sloth's result is always a new value
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  explicit DropoutImpl(const DropoutOptions& o) : DropoutImpl(o.p()) {}
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  double p;
 protected:
  std::string extra_repr() const override;
};

// A lookup table [num_embeddings, embedding_dim] ~ N(0, 1); forward takes int64 indices.
// padding_idx (LibTorch's EmbeddingOptions(n, d).padding_idx(0)): that row starts at zero and
// gets no gradient. _weight: the table to use instead of a random one.
class EmbeddingOptions {
 public:
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  SLOTH_NN_ARG(int64_t, num_embeddings);
  SLOTH_NN_ARG(int64_t, embedding_dim);
  SLOTH_NN_ARG(std::optional<int64_t>, padding_idx);
  SLOTH_NN_ARG(Tensor, _weight) = {};
};

class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  Tensor forward(const Tensor& indices) override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to [0, num_embeddings)
  Tensor& weight;
 protected:
  std::string extra_repr() const override;
};

// Normalizes over the trailing `normalized_shape` dims; weight = 1, bias = 0 at init.
// LibTorch's LayerNorm(LayerNormOptions({512}).eps(1e-6).elementwise_affine(false)) too.
class LayerNormOptions {
 public:
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  SLOTH_NN_ARG(Shape, normalized_shape);
  SLOTH_NN_ARG(double, eps) = 1e-5;
  SLOTH_NN_ARG(bool, elementwise_affine) = true;
};

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNormImpl(const LayerNormOptions& o)
      : LayerNormImpl(o.normalized_shape(), o.eps(), o.elementwise_affine()) {}
  Tensor forward(const Tensor& x) override;
  Shape normalized_shape;
  double eps;
  Tensor& weight;   // undefined without elementwise_affine
  Tensor& bias;
 protected:
  std::string extra_repr() const override;
};

// Runs its children in order; children are named "0", "1", ... (or the names given to
// push_back(name, module)). Each child is held as an AnyModule made from its static type, so
// its own forward is called whatever its signature (forward(Tensor) included); a child without
// a forward taking one Tensor does not compile. Children are given as holders
// (`seq->push_back(nn::Linear(4, 3))`), std::shared_ptrs to modules or to holders, or
// AnyModules.
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... M>
    requires(sizeof...(M) > 0 && (std::is_constructible_v<AnyModule, M> && ...))
  explicit SequentialImpl(M&&... modules) : Module("Sequential") {
    (push_back(std::forward<M>(modules)), ...);
  }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    push_back(std::to_string(size()), m);
    return m;
  }
  template <class H>
    requires is_module_holder_v<H>
  std::remove_cvref_t<H> push_back(const H& h) {
    push_back(std::to_string(size()), h);
    return h;
  }
  void push_back(AnyModule m) { push_back(std::to_string(size()), std::move(m)); }
  void push_back(const std::string& name, AnyModule m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const { return ptr(i); }
  // The i-th child (throws naming the size for a bad index); typed: nullptr when it is not a T.
  std::shared_ptr<Module> ptr(size_t i) const;
  template <class T>
  std::shared_ptr<T> ptr(size_t i) const { return std::dynamic_pointer_cast<T>(ptr(i)); }
  std::vector<AnyModule>::const_iterator begin() const { return modules_.begin(); }
  std::vector<AnyModule>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<AnyModule> modules_;
};

// The holder adds Sequential's own calls, so today's value spelling
// (`nn::Sequential net(...); net.push_back(...)`) works beside LibTorch's `net->push_back`.
class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder<SequentialImpl>::ModuleHolder;
  using Impl = SequentialImpl;
  template <class... M>
  decltype(auto) push_back(M&&... m) const {
    return get()->push_back(std::forward<M>(m)...);
  }
  size_t size() const { return get()->size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return get()->ptr(i); }
};

// Linear layers of the given sizes with ReLU between them and nothing after the last:
// MLP({784, 256, 10}) = Sequential(Linear(784,256), ReLU, Linear(256,10)), so the names are
// "0.weight", "0.bias", "2.weight", "2.bias".
class MLPImpl : public SequentialImpl {
 public:
  explicit MLPImpl(const std::vector<int64_t>& sizes, bool bias = true);
};

// Holders (LibTorch's names): nn::Linear is a handle over a shared nn::LinearImpl.
SLOTH_MODULE(Linear);
SLOTH_MODULE(Dropout);
SLOTH_MODULE(Embedding);
SLOTH_MODULE(LayerNorm);
SLOTH_MODULE(MLP);

namespace detail {
// U(-bound, bound) of `shape`, made without autograd: PyTorch's init of Linear, conv and
// recurrent weights (kaiming_uniform_ with a = sqrt(5) works out to this bound).
Tensor uniform_init(const Shape& shape, double bound);
}  // namespace detail

// LibTorch's printing: `std::cout << *net` and `std::cout << net` (a holder) write repr().
inline std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }
template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& h) {
  if (!h) return os << "(empty module holder)";
  return os << *h;
}

}  // namespace sloth::nn
