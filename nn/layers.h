// Small layers with PyTorch's semantics: Flatten and Dropout2d (and its functional form).
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>
#include <string>

#include "nn/module.h"

namespace sloth {
// Zeroes whole channels: each (sample, channel) of x [N, C, *] (3-D or 4-D) is dropped with
// probability p and the kept ones are scaled by 1 / (1 - p); the identity unless training.
// (PyTorch 1.13's feature dropout: a 3-D input is read as [N, C, L].)
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
}  // namespace sloth

namespace sloth::nn {

// x.flatten(start_dim, end_dim): [N, C, H, W] -> [N, C*H*W] with the defaults.
class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  int64_t start_dim, end_dim;
 protected:
  std::string extra_repr() const override;
};

class Dropout2dImpl : public Module {
 public:
  explicit Dropout2dImpl(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout2d(x, p, is_training()); }
  double p;
 protected:
  std::string extra_repr() const override;
};

// Wraps a function as a module, for Sequential: nn::Functional(sloth::relu), or with the
// arguments after the input bound: nn::Functional(sloth::log_softmax, 1) calls
// log_softmax(x, 1). (LibTorch's torch::nn::Functional.)
class FunctionalImpl : public Module {
 public:
  using Function = std::function<Tensor(Tensor)>;
  explicit FunctionalImpl(Function f) : Module("Functional"), f_(std::move(f)) {
    if (!f_) fail("nn::Functional: the function is empty");
  }
  template <class F, class A, class... Rest>
    requires std::is_invocable_r_v<Tensor, F&, const Tensor&, A&, Rest&...>
  FunctionalImpl(F f, A a, Rest... rest)
      : FunctionalImpl(Function([f, a, rest...](Tensor x) { return f(x, a, rest...); })) {}
  Tensor forward(Tensor x) { return f_(std::move(x)); }
 private:
  Function f_;
};

// Holders (LibTorch's names) over the Impl classes above.
SLOTH_MODULE(Flatten);
SLOTH_MODULE(Dropout2d);
SLOTH_MODULE(Functional);

}  // namespace sloth::nn
