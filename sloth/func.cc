#include "sloth/func.h"

namespace sloth::func::detail {

int& depth() {
  thread_local int d = 0;
  return d;
}

Tensor enter(const Tensor& x) {
  if (x.requires_grad()) return x.view(x.shape());  // an alias with its own grad_fn
  Tensor leaf = x.detach();
  if (!is_floating(leaf.dtype())) leaf = leaf.to(kDefaultFloat);
  leaf.requires_grad_(true);
  return leaf;
}

Tensor leave(const Tensor& t, bool outermost) { return outermost ? t.detach() : t; }

Tensor grad_or_zeros(const Tensor& y, const Tensor& x_level) {
  if (!y.requires_grad()) return zeros_like(x_level);
  auto g = autograd::grad({y}, {x_level}, {}, true, true, true);
  return g[0].defined() ? g[0] : zeros_like(x_level);
}

}  // namespace sloth::func::detail
