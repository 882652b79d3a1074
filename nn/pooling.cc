#include "nn/pooling.h"

#include <sstream>

namespace sloth::nn {
namespace {

// PyTorch prints the arguments as given: a single value stays a number, a pair a tuple.
std::string arg(const Shape& s) {
  if (s.size() == 2 && s[0] == s[1]) return std::to_string(s[0]);
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ")";
  return os.str();
}
const char* py(bool b) { return b ? "True" : "False"; }

}  // namespace

MaxPool2dImpl::MaxPool2dImpl(const MaxPool2dOptions& o)
    : Module("MaxPool2d"),
      kernel_size(o.kernel_size().expand(2, "kernel_size")),
      stride(o.stride() ? o.stride()->expand(2, "stride") : kernel_size),
      padding(o.padding().expand(2, "padding")),
      dilation(o.dilation().expand(2, "dilation")),
      ceil_mode(o.ceil_mode()) {}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2dImpl::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << arg(kernel_size) << ", stride=" << arg(stride)
     << ", padding=" << arg(padding) << ", dilation=" << arg(dilation)
     << ", ceil_mode=" << py(ceil_mode);
  return os.str();
}

AvgPool2dImpl::AvgPool2dImpl(const AvgPool2dOptions& o)
    : Module("AvgPool2d"),
      kernel_size(o.kernel_size().expand(2, "kernel_size")),
      stride(o.stride() ? o.stride()->expand(2, "stride") : kernel_size),
      padding(o.padding().expand(2, "padding")),
      ceil_mode(o.ceil_mode()),
      count_include_pad(o.count_include_pad()),
      divisor_override(o.divisor_override()) {}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override);
}

std::string AvgPool2dImpl::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << arg(kernel_size) << ", stride=" << arg(stride)
     << ", padding=" << arg(padding);
  if (ceil_mode) os << ", ceil_mode=True";
  if (!count_include_pad) os << ", count_include_pad=False";
  if (divisor_override) os << ", divisor_override=" << *divisor_override;
  return os.str();
}

AdaptiveAvgPool2dImpl::AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& o)
    : Module("AdaptiveAvgPool2d"), output_size(o.output_size().expand(2, "output_size")) {}

std::string AdaptiveAvgPool2dImpl::extra_repr() const {
  std::ostringstream os;
  os << "output_size=" << (output_size[0] == output_size[1]
                               ? std::to_string(output_size[0])
                               : "(" + std::to_string(output_size[0]) + ", " +
                                     std::to_string(output_size[1]) + ")");
  return os.str();
}

}  // namespace sloth::nn
