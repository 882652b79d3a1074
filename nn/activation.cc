#include "nn/activation.h"

#include "absl/strings/str_format.h"
#include "nn/functional.h"

namespace sloth::nn {
namespace F = functional;

namespace {
std::string inplace_repr(bool inplace) { return inplace ? "inplace=true" : ""; }
}  // namespace

Tensor ReLUImpl::forward(const Tensor& x) { return F::relu(x, options); }
std::string ReLUImpl::extra_repr() const { return inplace_repr(options.inplace()); }
Tensor ReLU6Impl::forward(const Tensor& x) { return F::relu6(x, options); }
std::string ReLU6Impl::extra_repr() const { return inplace_repr(options.inplace()); }
Tensor SELUImpl::forward(const Tensor& x) { return F::selu(x, options); }
std::string SELUImpl::extra_repr() const { return inplace_repr(options.inplace()); }

Tensor LeakyReLUImpl::forward(const Tensor& x) { return F::leaky_relu(x, options); }
std::string LeakyReLUImpl::extra_repr() const {
  return absl::StrFormat("negative_slope=%g%s", options.negative_slope(),
                         options.inplace() ? ", inplace=true" : "");
}
Tensor ELUImpl::forward(const Tensor& x) { return F::elu(x, options); }
std::string ELUImpl::extra_repr() const {
  return absl::StrFormat("alpha=%g%s", options.alpha(), options.inplace() ? ", inplace=true" : "");
}
Tensor CELUImpl::forward(const Tensor& x) { return F::celu(x, options); }
std::string CELUImpl::extra_repr() const {
  return absl::StrFormat("alpha=%g%s", options.alpha(), options.inplace() ? ", inplace=true" : "");
}
Tensor GELUImpl::forward(const Tensor& x) { return F::gelu(x, options); }
std::string GELUImpl::extra_repr() const {
  return options.approximate() == "none" ? "" : "approximate=" + options.approximate();
}
Tensor HardtanhImpl::forward(const Tensor& x) { return F::hardtanh(x, options); }
std::string HardtanhImpl::extra_repr() const {
  return absl::StrFormat("min_val=%g, max_val=%g%s", options.min_val(), options.max_val(),
                         options.inplace() ? ", inplace=true" : "");
}
Tensor SoftplusImpl::forward(const Tensor& x) { return F::softplus(x, options); }
std::string SoftplusImpl::extra_repr() const {
  return absl::StrFormat("beta=%g, threshold=%g", options.beta(), options.threshold());
}
Tensor HardshrinkImpl::forward(const Tensor& x) { return F::hardshrink(x, options); }
std::string HardshrinkImpl::extra_repr() const { return absl::StrFormat("%g", options.lambda()); }
Tensor SoftshrinkImpl::forward(const Tensor& x) { return F::softshrink(x, options); }
std::string SoftshrinkImpl::extra_repr() const { return absl::StrFormat("%g", options.lambda()); }
Tensor GLUImpl::forward(const Tensor& x) { return F::glu(x, options); }
std::string GLUImpl::extra_repr() const { return absl::StrFormat("dim=%d", options.dim()); }
Tensor ThresholdImpl::forward(const Tensor& x) { return F::threshold(x, options); }
std::string ThresholdImpl::extra_repr() const {
  return absl::StrFormat("threshold=%g, value=%g%s", options.threshold(), options.value(),
                         options.inplace() ? ", inplace=true" : "");
}

Tensor SoftmaxImpl::forward(const Tensor& x) { return F::softmax(x, options.dim()); }
std::string SoftmaxImpl::extra_repr() const { return absl::StrFormat("dim=%d", options.dim()); }
Tensor LogSoftmaxImpl::forward(const Tensor& x) { return F::log_softmax(x, options.dim()); }
std::string LogSoftmaxImpl::extra_repr() const { return absl::StrFormat("dim=%d", options.dim()); }
Tensor SoftminImpl::forward(const Tensor& x) { return F::softmin(x, options.dim()); }
std::string SoftminImpl::extra_repr() const { return absl::StrFormat("dim=%d", options.dim()); }

Tensor TanhImpl::forward(const Tensor& x) { return tanh(x); }
Tensor SigmoidImpl::forward(const Tensor& x) { return sigmoid(x); }
Tensor SiLUImpl::forward(const Tensor& x) { return F::silu(x); }
Tensor MishImpl::forward(const Tensor& x) { return F::mish(x); }
Tensor SoftsignImpl::forward(const Tensor& x) { return F::softsign(x); }
Tensor TanhshrinkImpl::forward(const Tensor& x) { return F::tanhshrink(x); }
Tensor LogSigmoidImpl::forward(const Tensor& x) { return F::logsigmoid(x); }
Tensor IdentityImpl::forward(const Tensor& x) { return x; }

}  // namespace sloth::nn
