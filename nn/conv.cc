#include "nn/conv.h"

#include <cmath>
#include <sstream>

namespace sloth::nn {
namespace {

using detail::uniform_init;

std::string tuple(const Shape& s) {  // Python's tuple repr: (3, 3), (3,)
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

// The options of any dimensionality as Conv2dOptions-like fields, checked.
struct Resolved {
  int64_t in, out, groups;
  Shape k, stride, padding, dilation, output_padding;
  std::string mode;
  bool bias;
};
template <size_t D>
Resolved resolve(const char* name, const ConvOptions<D>& o) {
  Resolved r{o.in_channels(), o.out_channels(), o.groups(),
             o.kernel_size().expand(D, "kernel_size"), o.stride().expand(D, "stride"),
             o.padding().expand(D, "padding"), o.dilation().expand(D, "dilation"),
             o.output_padding().expand(D, "output_padding"), o.padding_mode_string(), o.bias()};
  if (r.in <= 0 || r.out <= 0)
    fail("nn::%s: in_channels (%d) and out_channels (%d) must be positive", name, r.in, r.out);
  if (r.groups <= 0) fail("nn::%s: groups must be a positive integer, got %d", name, r.groups);
  if (r.in % r.groups != 0) fail("nn::%s: in_channels (%d) must be divisible by groups (%d)", name, r.in, r.groups);
  if (r.out % r.groups != 0) fail("nn::%s: out_channels (%d) must be divisible by groups (%d)", name, r.out, r.groups);
  for (int64_t v : r.k)
    if (v <= 0) fail("nn::%s: kernel_size must be positive, got %s", name, shape_str(r.k));
  if (!r.mode.empty() && r.mode != "same" && r.mode != "valid")
    fail("nn::%s: invalid padding string '%s'; use \"same\" or \"valid\"", name, r.mode);
  if (r.mode == "same")
    for (int64_t s : r.stride)
      if (s != 1) fail("nn::%s: padding='same' is not supported for strided convolutions", name);
  return r;
}

}  // namespace

Shape Ints::expand(size_t n, const char* what) const {
  if (v.size() == n) return v;
  if (v.size() == 1) return Shape(n, v[0]);
  fail("nn: %s must have 1 or %d values, got %s", what, n, shape_str(v));
}

ConvNd::ConvNd(const char* name, bool transposed, const ConvOptions<2>& o2,
               const ConvOptions<1>* o1)
    : Module(name), weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())), transposed_(transposed) {
  Resolved r = o1 ? resolve(name, *o1) : resolve(name, o2);
  in_channels = r.in, out_channels = r.out, groups = r.groups;
  kernel_size = r.k, stride = r.stride, padding = r.padding, dilation = r.dilation;
  output_padding = r.output_padding;
  padding_mode = r.mode;
  Shape ws = transposed ? Shape{r.in, r.out / r.groups} : Shape{r.out, r.in / r.groups};
  ws.insert(ws.end(), r.k.begin(), r.k.end());
  int64_t fan_in = ws[1];
  for (int64_t k : r.k) fan_in *= k;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  // Parameters were registered first (undefined) so that their names come in PyTorch's order.
  weight = uniform_init(ws, bound).requires_grad_();
  if (r.bias) bias = uniform_init({r.out}, bound).requires_grad_();
}

std::string ConvNd::extra_repr() const {
  // PyTorch's _ConvNd.extra_repr: defaults left out.
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=" << tuple(kernel_size)
     << ", stride=" << tuple(stride);
  auto all = [](const Shape& s, int64_t v) {
    for (int64_t x : s) if (x != v) return false;
    return true;
  };
  if (!padding_mode.empty()) os << ", padding=" << padding_mode;
  else if (!all(padding, 0)) os << ", padding=" << tuple(padding);
  if (!all(dilation, 1)) os << ", dilation=" << tuple(dilation);
  if (transposed_ && !all(output_padding, 0)) os << ", output_padding=" << tuple(output_padding);
  if (groups != 1) os << ", groups=" << groups;
  if (!bias.defined()) os << ", bias=False";
  return os.str();
}

Conv1dImpl::Conv1dImpl(const Conv1dOptions& o)
    : ConvNd("Conv1d", false, Conv2dOptions(o.in_channels(), o.out_channels(), 1), &o) {}
Tensor Conv1dImpl::forward(const Tensor& x) {
  if (!padding_mode.empty())
    return conv1d_padding_mode(x, weight, bias, stride, padding_mode, dilation, groups);
  return conv1d(x, weight, bias, stride, padding, dilation, groups);
}

Conv2dImpl::Conv2dImpl(const Conv2dOptions& o) : ConvNd("Conv2d", false, o, nullptr) {}
Tensor Conv2dImpl::forward(const Tensor& x) {
  if (!padding_mode.empty())
    return conv2d_padding_mode(x, weight, bias, stride, padding_mode, dilation, groups);
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
}

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& o)
    : ConvNd("ConvTranspose2d", true, o, nullptr) {
  if (!padding_mode.empty())
    fail("nn::ConvTranspose2d: only explicit padding is supported (got padding='%s')", padding_mode);
}
Tensor ConvTranspose2dImpl::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
}

}  // namespace sloth::nn
