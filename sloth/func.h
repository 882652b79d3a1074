// functorch-style transforms. They nest to any depth: each level differentiates with respect
// to its own alias of the argument (a differentiable identity view), so levels never confuse
// their perturbations, and tensors made inside f (tensor(), zeros(), constants) are ordinary
// values of the one autograd graph, i.e. lifted into every active level. Results leave the
// outermost level without history.
#pragma once

#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "sloth/autograd_api.h"
#include "sloth/ops.h"

namespace sloth::func {

namespace detail {
// Transform nesting depth on this thread (0: no transform active).
int& depth();
struct Level {
  Level() { ++depth(); }
  ~Level() { --depth(); }
  bool outermost() const { return depth() == 1; }
};
// The argument as this level sees it: a fresh leaf, or a differentiable alias when an outer
// level already tracks it.
Tensor enter(const Tensor& x);
Tensor leave(const Tensor& t, bool outermost);
Tensor grad_or_zeros(const Tensor& y, const Tensor& x_level);

template <class F, class Tuple, size_t... I>
auto call_with(F& f, Tuple& args, std::index_sequence<I...>) {
  return f(std::get<I>(args)...);
}
}  // namespace detail

// value_and_grad(f, argnum)(args...) -> {f(args...), d f / d args[argnum]}; f returns a
// one-element tensor.
template <class F>
auto value_and_grad(F f, int argnum = 0) {
  return [f, argnum](auto... args) -> std::pair<Tensor, Tensor> {
    detail::Level level;
    EnableGradGuard enable;
    auto tup = std::make_tuple(Tensor(args)...);
    Tensor at_level;
    int i = 0;
    std::apply([&](auto&... a) {
      ((i++ == argnum ? (a = detail::enter(a), at_level = a, 0) : 0), ...);
    }, tup);
    if (!at_level.defined()) fail("grad: argnum %d is out of range for %d arguments", argnum, i);
    Tensor y = detail::call_with(f, tup, std::make_index_sequence<sizeof...(args)>{});
    if (y.numel() != 1)
      fail("grad: f must return a tensor with one element, got shape %s", shape_str(y.shape()));
    Tensor g = detail::grad_or_zeros(y, at_level);
    return {detail::leave(y, level.outermost()), detail::leave(g, level.outermost())};
  };
}

template <class F>
auto grad(F f, int argnum = 0) {
  return [vg = value_and_grad(std::move(f), argnum)](auto... args) -> Tensor {
    return vg(args...).second;
  };
}

// vjp(f, primals...) -> {f(primals...), fn(cotangent) -> one gradient per primal}.
template <class F, class... Args>
std::pair<Tensor, std::function<std::vector<Tensor>(const Tensor&)>> vjp(F f, Args... primals) {
  auto level = std::make_shared<detail::Level>();
  EnableGradGuard enable;
  std::vector<Tensor> originals{Tensor(primals)...};
  std::vector<Tensor> at_level;
  for (const auto& p : originals) at_level.push_back(detail::enter(p));
  auto tup = std::make_tuple(Tensor(primals)...);
  size_t k = 0;
  std::apply([&](auto&... a) { ((a = at_level[k++]), ...); }, tup);
  Tensor y = detail::call_with(f, tup, std::make_index_sequence<sizeof...(Args)>{});
  const bool outermost = level->outermost();
  auto fn = [y, at_level, originals, outermost, level](const Tensor& cot) {
    EnableGradGuard enable;
    std::vector<Tensor> out;
    std::vector<Tensor> g;
    if (y.requires_grad()) g = autograd::grad({y}, at_level, {cot}, true, true, true);
    for (size_t i = 0; i < originals.size(); ++i) {
      Tensor gi = i < g.size() && g[i].defined() ? g[i] : zeros_like(originals[i]);
      out.push_back(detail::leave(gi, outermost));
    }
    return out;
  };
  return {detail::leave(y, outermost), fn};
}

}  // namespace sloth::func
