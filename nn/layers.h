// Small layers with PyTorch's semantics: Flatten and Dropout2d (and its functional form).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

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

namespace functional_detail {
// Whether f(x, the first N of the bound arguments) is a call returning a Tensor.
template <class F, class Tuple, class Seq> struct PrefixCallable;
template <class F, class Tuple, size_t... I>
struct PrefixCallable<F, Tuple, std::index_sequence<I...>>
    : std::bool_constant<
          std::is_invocable_r_v<Tensor, F&, const Tensor&, std::tuple_element_t<I, Tuple>&...>> {};
template <class... A>
constexpr bool last_is_nullopt() {
  if constexpr (sizeof...(A) == 0) return false;
  else return std::is_same_v<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>, std::nullopt_t>;
}
// The bound arguments f takes: all of them, or all but a trailing nullopt.
template <class F, class... A>
inline constexpr bool kBindable =
    std::is_invocable_r_v<Tensor, F&, const Tensor&, A&...> ||
    (last_is_nullopt<A...>() &&
     PrefixCallable<F, std::tuple<A...>, std::make_index_sequence<sizeof...(A) - 1>>::value);
}  // namespace functional_detail

// Wraps a function as a module, for Sequential: nn::Functional(sloth::relu), or with the
// arguments after the input bound: nn::Functional(sloth::log_softmax, 1) calls
// log_softmax(x, 1), nn::Functional(sloth::max_pool2d, 3, stride, 0, 1, false) calls
// max_pool2d(x, 3, stride, 0, 1, false). (LibTorch's torch::nn::Functional.) A trailing
// nullopt the function has no parameter for is dropped: LibTorch's
// Functional(torch::log_softmax, 1, torch::nullopt) passes softmax's optional dtype, which
// sloth's log_softmax does not have (it computes in the input's dtype, the same result).
class FunctionalImpl : public Module {
 public:
  using Function = std::function<Tensor(Tensor)>;
  explicit FunctionalImpl(Function f) : Module("Functional"), f_(std::move(f)) {
    if (!f_) fail("nn::Functional: the function is empty");
  }
  template <class F, class A, class... Rest>
    requires functional_detail::kBindable<F, A, Rest...>
  FunctionalImpl(F f, A a, Rest... rest)
      : FunctionalImpl(bind(f, std::tuple<A, Rest...>(a, rest...))) {}
  Tensor forward(Tensor x) { return f_(std::move(x)); }
 private:
  template <class F, class Tuple, size_t... I>
  static Function bind_first(F f, Tuple t, std::index_sequence<I...>) {
    return [f, t](Tensor x) { return f(x, std::get<I>(t)...); };
  }
  template <class F, class... A>
  static Function bind(F f, std::tuple<A...> t) {
    constexpr size_t n = sizeof...(A);
    if constexpr (std::is_invocable_r_v<Tensor, F&, const Tensor&, A&...>)
      return bind_first(f, std::move(t), std::make_index_sequence<n>{});
    else
      return bind_first(f, std::move(t), std::make_index_sequence<n - 1>{});
  }
  Function f_;
};

// Holders (LibTorch's names) over the Impl classes above.
SLOTH_MODULE(Flatten);
SLOTH_MODULE(Dropout2d);
SLOTH_MODULE(Functional);

}  // namespace sloth::nn
