// Convolution modules, LibTorch style: Conv1d, Conv2d, ConvTranspose2d with options structs
// (`Conv2d(Conv2dOptions(1, 32, 3).stride(1).padding(1).bias(false))`) or `Conv2d(in, out, k)`.
// Parameters are PyTorch's, so a state dict maps one to one:
//   weight [out, in/groups, k...] (ConvTranspose2d: [in, out/groups, kh, kw]), bias [out];
//   both ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform_(a = sqrt(5)) and PyTorch's
//   bias init), fan_in = weight.size(1) * kernel elements.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "nn/module.h"

namespace sloth::nn {

// LibTorch's ExpandingArray: one value for every spatial dim, or one per dim.
struct Ints {
  Shape v;
  Ints(int64_t x) : v{x} {}                          // NOLINT: implicit, as LibTorch
  Ints(int x) : v{x} {}                              // NOLINT
  Ints(std::initializer_list<int64_t> l) : v(l) {}   // NOLINT
  Ints(Shape s) : v(std::move(s)) {}                 // NOLINT
  // The value for each of `n` dims (throws naming `what` when the count is neither 1 nor n).
  Shape expand(size_t n, const char* what) const;
};

// padding: explicit sizes, or "same" / "valid" (LibTorch's kSame / kValid).
template <size_t D>
class ConvOptions {
 public:
  ConvOptions(int64_t in_channels, int64_t out_channels, Ints kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  auto& padding(Ints v) { padding_ = v; padding_mode_.clear(); return *this; }
  auto& padding(const char* mode) { padding_mode_ = mode; return *this; }
  const Ints& padding() const { return padding_; }
  const std::string& padding_mode_string() const { return padding_mode_; }  // "" = explicit
  SLOTH_NN_ARG(int64_t, in_channels);
  SLOTH_NN_ARG(int64_t, out_channels);
  SLOTH_NN_ARG(Ints, kernel_size);
  SLOTH_NN_ARG(Ints, stride) = 1;
  SLOTH_NN_ARG(Ints, dilation) = 1;
  SLOTH_NN_ARG(Ints, output_padding) = 0;  // ConvTranspose only
  SLOTH_NN_ARG(int64_t, groups) = 1;
  SLOTH_NN_ARG(bool, bias) = true;

 private:
  Ints padding_ = 0;
  std::string padding_mode_;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using ConvTranspose2dOptions = ConvOptions<2>;

// What Conv1d, Conv2d and ConvTranspose2d share: the resolved options, the parameters and
// PyTorch's repr.
class ConvNd : public Module {
 public:
  int64_t in_channels, out_channels, groups;
  Shape kernel_size, stride, padding, dilation, output_padding;
  std::string padding_mode;  // "", "same" or "valid"
  Tensor& weight;
  Tensor& bias;  // undefined with bias(false)

 protected:
  // Conv1d passes its options as o1 (o2 is then unused).
  ConvNd(const char* name, bool transposed, const ConvOptions<2>& o2, const ConvOptions<1>* o1);
  std::string extra_repr() const override;
  bool transposed_;
};

class Conv1dImpl : public ConvNd {
 public:
  explicit Conv1dImpl(const Conv1dOptions& options);
  Conv1dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
};

class Conv2dImpl : public ConvNd {
 public:
  explicit Conv2dImpl(const Conv2dOptions& options);
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
};

class ConvTranspose2dImpl : public ConvNd {
 public:
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options);
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
};

// Holders (LibTorch's names) over the Impl classes above.
SLOTH_MODULE(Conv1d);
SLOTH_MODULE(Conv2d);
SLOTH_MODULE(ConvTranspose2d);

}  // namespace sloth::nn
