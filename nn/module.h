// sloth::nn modules, LibTorch style: a model is a struct deriving from nn::Module that
// registers its parameters and submodules; modules are held by std::shared_ptr.
//
//   struct Net : sloth::nn::Module {
//     std::shared_ptr<sloth::nn::Linear> fc1, fc2;
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", std::make_shared<sloth::nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<sloth::nn::Linear>(128, 10));
//     }
//     sloth::Tensor forward(const sloth::Tensor& x) override {
//       return fc2->forward(sloth::relu(fc1->forward(x)));
//     }
//   };
//
// Names: named_parameters() yields dotted names in registration order ("fc1.weight",
// "fc1.bias", ...; Sequential children are named "0", "1", ... as in PyTorch).
// Parameters are leaf tensors that require grad; initialization runs under NoGradGuard.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sloth/sloth.h"

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
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  // Buffers (state that is not a parameter, e.g. BatchNorm's running statistics), in the same
  // order and with the same dotted names as PyTorch's named_buffers(). Undefined buffers are
  // skipped. Checkpoints save and load them with the parameters.
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;

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
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

 protected:
  virtual std::string extra_repr() const { return ""; }
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, bool recurse, bool buffers,
               std::vector<std::pair<std::string, Tensor>>* out) const;
  void check_new_name(const char* what, const std::string& name) const;
  std::string name_;
  bool training_ = true;
  std::list<std::pair<std::string, Tensor>> params_;   // std::list: stable addresses
  std::list<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// y = x W^T + b. W: [out, in] ~ U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's kaiming_uniform_ with
// a = sqrt(5)); b: [out] ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t in_features, out_features;
  Tensor& weight;
  Tensor& bias;   // undefined when bias = false
 protected:
  std::string extra_repr() const override;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) override { return gelu(x); }
};

// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p);
// the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  double p;
 protected:
  std::string extra_repr() const override;
};

// A lookup table [num_embeddings, embedding_dim] ~ N(0, 1); forward takes int64 indices.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override { return embedding(weight, indices); }
  int64_t num_embeddings, embedding_dim;
  Tensor& weight;
 protected:
  std::string extra_repr() const override;
};

// Normalizes over the trailing `normalized_shape` dims; weight = 1, bias = 0 at init.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  Shape normalized_shape;
  double eps;
  Tensor& weight;   // undefined without elementwise_affine
  Tensor& bias;
 protected:
  std::string extra_repr() const override;
};

// Runs its children in order; children are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <class... M>
  explicit Sequential(std::shared_ptr<M>... modules) : Module("Sequential") {
    (push_back(std::move(modules)), ...);
  }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    add_child(std::to_string(size()), m);
    return m;
  }
  Tensor forward(const Tensor& x) override;
  size_t size() const { return named_children().size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return children().at(i); }
};

// Linear layers of the given sizes with ReLU between them and nothing after the last:
// MLP({784, 256, 10}) = Sequential(Linear(784,256), ReLU, Linear(256,10)), so the names are
// "0.weight", "0.bias", "2.weight", "2.bias".
class MLP : public Sequential {
 public:
  explicit MLP(const std::vector<int64_t>& sizes, bool bias = true);
};

}  // namespace sloth::nn
