// The op functions of the public API (API.md). Each one checks its inputs against the op
// table's rule (throwing sloth::Error before anything is recorded), records lazy IR and
// attaches autograd history when grad is needed.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "sloth/int_list.h"
#include "sloth/op_api.h"
#include "sloth/tensor.h"

namespace sloth {

// ---- elementwise (NumPy broadcasting, PyTorch type promotion) ----
// Numbers are Scalars (core/scalar.h): what the caller wrote, an integer, a floating value or a
// bool, decides promotion as in PyTorch (int64 tensor * 2 is int64, * 2.5 is float32).
// alpha scales b; a floating alpha with integer tensors is an error, as in PyTorch.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
// Python's % (the result has the divisor's sign), C's fmod (the dividend's), floor(a / b).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor remainder(const Scalar& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, const Scalar& b);
Tensor operator%(const Tensor& a, const Tensor& b);  // remainder, as LibTorch
Tensor operator%(const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor clamp(const Tensor& x, const Scalar& lo, const Scalar& hi);

// One function per generated row of core/ops.def (its Api column, sloth/op_api.h):
//   Fn:       Tensor f(const Tensor& x);  f = neg abs exp log log1p sqrt rsqrt sin cos tanh
//                                         sigmoid relu gelu silu erf square reciprocal sign
//                                         floor ceil round logical_not
//             Tensor f(const Tensor& a, const Tensor& b);  f = maximum minimum eq ne lt le gt
//                                                         ge logical_and logical_or
//   ReduceFn: Tensor f(const Tensor& x, Shape dims = {}, bool keepdim = false);
//             f = prod amax amin  (dims may be negative; {} means all dims)
//   ArgFn:    Tensor f(const Tensor& x, int64_t dim, bool keepdim = false);  f = argmax argmin
//             Tensor f(const Tensor& x);  the index into the flattened tensor (torch.argmax(x))
//   DimFn:    Tensor f(const Tensor& x, int64_t dim, const Tensor& index);  f = index_select gather
//             Tensor f(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
//             f = scatter_add index_add
//             Tensor f(const Tensor& x, int64_t dim);  f = softmax log_softmax
//   ListDim:  Tensor f(const std::vector<Tensor>& tensors, int64_t dim = 0);  f = cat stack
#define SLOTH_API_Fn_Unary(Id, name) Tensor name(const Tensor& x);
#define SLOTH_API_Fn_Binary(Id, name) Tensor name(const Tensor& a, const Tensor& b);
#define SLOTH_API_DimFn_1(Id, name) Tensor name(const Tensor& x, int64_t dim);
#define SLOTH_API_DimFn_2(Id, name) Tensor name(const Tensor& x, int64_t dim, const Tensor& index);
#define SLOTH_API_DimFn_3(Id, name) \
  Tensor name(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
#define SLOTH_API_ListDim(Id, name) Tensor name(const std::vector<Tensor>& tensors, int64_t dim = 0);
#define SLOTH_API_ReduceFn(Id, name) Tensor name(const Tensor& x, Shape dims = {}, bool keepdim = false);
#define SLOTH_API_ArgFn(Id, name)                                      \
  Tensor name(const Tensor& x, int64_t dim, bool keepdim = false);     \
  Tensor name(const Tensor& x); /* over all elements, flattened: a 0-dim index */
#include "sloth/op_api_rows.inc"

// ---- reductions: dims may be negative; {} means all dims (prod amax amin argmax argmin above) ----
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, Shape dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, Shape dims, bool keepdim = false);
Tensor var(const Tensor& x, Shape dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, Shape dims, bool unbiased = true, bool keepdim = false);
Tensor logsumexp(const Tensor& x, Shape dims, bool keepdim = false);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});

// ---- indexing (index_select gather scatter_add index_add above) ----
Tensor index_put(const Tensor& base, const Tensor& index, const Tensor& values);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor one_hot(const Tensor& indices, int64_t num_classes);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

// ---- functional forms of views' inverses ----
Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t start,
                     int64_t end, int64_t step = 1);
Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index);
Tensor diagonal_scatter(const Tensor& base, const Tensor& src, int64_t offset = 0,
                        int64_t d0 = 0, int64_t d1 = 1);
Tensor as_strided_scatter(const Tensor& base, const Tensor& src, Shape size, Shape stride,
                          int64_t offset = 0);

// ---- neural-network functions (softmax log_softmax above) ----
// cross_entropy and nll_loss take class indices (int64 [N] for input [N, C], 0-dim for [C]),
// with PyTorch's options: a target equal to ignore_index adds nothing and is not counted by
// the mean (all ignored: NaN, as PyTorch); label_smoothing in [0, 1] mixes the uniform
// distribution into the target (cross_entropy_loss_label_smoothing). reduction none gives the
// per-sample losses [N].
//   cross_entropy(logits, y);  cross_entropy(logits, y, {.ignore_index = 0, .label_smoothing = 0.1});
// (Options structs only, no positional overloads: `cross_entropy(x, y, {})` must not mean
// ignore_index = 0.)
// LibTorch's at::Reduction::Mean/Sum/None spellings are aliases of kMean/kSum/kNone.
enum class Reduction { kMean = 0, kSum = 1, kNone = 2, Mean = kMean, Sum = kSum, None = kNone };
// weight: an optional class weight [C] (PyTorch's weighted mean: sum_i w[y_i] l_i / sum_i
// w[y_i] over the samples not ignored; not with label_smoothing).
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::kMean;
  Tensor weight = {};
};
struct NllLossOptions {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::kMean;
  Tensor weight = {};
};
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& options = {});
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {});
// LibTorch's positional forms: nll_loss(out, y, /*weight=*/{}, Reduction::Sum). The reduction
// is required here, so `nll_loss(x, y, {})` still means the options struct.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight,
                Reduction reduction, int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     Reduction reduction, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);
Tensor dropout(const Tensor& x, double p, bool train);
Tensor layer_norm(const Tensor& x, Shape normalized_shape, const Tensor& w = {},
                  const Tensor& b = {}, double eps = 1e-5);

// ---- normalization (nn) ----
// input [N, C, *]. training: normalizes with the batch statistics (biased variance) and, when
// running_mean/running_var are given, updates them in place as PyTorch does:
//   running_mean = (1 - momentum) * running_mean + momentum * batch_mean
//   running_var  = (1 - momentum) * running_var  + momentum * unbiased batch_var
// (in-place writes recorded in the step graph, functionalized like any other write).
// eval: normalizes with the running statistics, which must be given. weight/bias: [C] or {}.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps);
// Normalizes each of num_groups groups of C / num_groups channels of every sample.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
namespace internal {
// batch_norm whose running-stat update factor is a 0-dim tensor (nn::BatchNorm's cumulative
// average, 1 / num_batches_tracked, computed in the graph so each step traces the same).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training,
                  const Tensor& momentum, double eps);
}  // namespace internal

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator==(const Scalar& a, const Tensor& b);
Tensor operator!=(const Scalar& a, const Tensor& b);
Tensor operator<(const Scalar& a, const Tensor& b);
Tensor operator<=(const Scalar& a, const Tensor& b);
Tensor operator>(const Scalar& a, const Tensor& b);
Tensor operator>=(const Scalar& a, const Tensor& b);

// ---- convolution and pooling (sloth/conv_ops.cc; NCHW, LibTorch's signatures) ----
// A Shape argument with one value stands for every spatial dim, as LibTorch's
// ExpandingArray ({3} is {3, 3}). Unbatched inputs ([C, H, W]; conv1d: [C, L]) work too.
// unfold: im2col, [N, C, H, W] -> [N, C*kh*kw, L] (F.unfold); fold: its adjoint (F.fold).
Tensor unfold(const Tensor& input, Shape kernel_size, Shape dilation = {1, 1},
              Shape padding = {0, 0}, Shape stride = {1, 1});
Tensor fold(const Tensor& input, Shape output_size, Shape kernel_size, Shape dilation = {1, 1},
            Shape padding = {0, 0}, Shape stride = {1, 1});
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Shape stride = {1}, Shape padding = {0}, Shape dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Shape stride = {1, 1}, Shape padding = {0, 0}, Shape dilation = {1, 1},
              int64_t groups = 1);
// padding "same" (stride 1 only) or "valid". Templates over the string's type, so that a
// braced {0} stays an explicit padding (it would also convert to a null string_view).
Tensor conv1d_padding_mode(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           Shape stride, std::string_view padding, Shape dilation, int64_t groups);
Tensor conv2d_padding_mode(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           Shape stride, std::string_view padding, Shape dilation, int64_t groups);
template <class S, class = std::enable_if_t<std::is_convertible_v<const S&, std::string_view>>>
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride,
              const S& padding, Shape dilation = {1}, int64_t groups = 1) {
  return conv1d_padding_mode(input, weight, bias, std::move(stride), padding, std::move(dilation),
                             groups);
}
template <class S, class = std::enable_if_t<std::is_convertible_v<const S&, std::string_view>>>
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride,
              const S& padding, Shape dilation = {1, 1}, int64_t groups = 1) {
  return conv2d_padding_mode(input, weight, bias, std::move(stride), padding, std::move(dilation),
                             groups);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        Shape stride = {1, 1}, Shape padding = {0, 0},
                        Shape output_padding = {0, 0}, int64_t groups = 1,
                        Shape dilation = {1, 1});
// stride {} = kernel_size. The gradient goes to the first maximum of each window.
// The size lists are IntArrayRefs (sloth/int_list.h): max_pool2d(x, 3, 2) as LibTorch, and the
// one function `Functional(max_pool2d, 3, stride, 0, 1, false)` can name.
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1},
                  bool ceil_mode = false);
// (values, indices): indices are int64, the flat index h*W+w of each window's maximum in its
// input plane (PyTorch's return_indices); values are differentiable as max_pool2d's.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {},
                                                   IntArrayRef padding = {0, 0},
                                                   IntArrayRef dilation = {1, 1},
                                                   bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size);

// ---- factories (TensorOptions last; float32 on the CPU by default) ----
Tensor tensor(std::vector<double> values, Shape shape = {-1}, TensorOptions = {});
Tensor tensor(double scalar, TensorOptions = {});
// A braced list is 1-D, as in LibTorch, even with one element: tensor({3.0}) has shape [1]
// (it would otherwise bind to tensor(double) and be 0-dim).
inline Tensor tensor(std::initializer_list<double> values, Shape shape = {-1}, TensorOptions o = {}) {
  return tensor(std::vector<double>(values), std::move(shape), o);
}
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, TensorOptions = {});
Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter = {});
Tensor empty(Shape shape, TensorOptions = {});
Tensor zeros(Shape shape, TensorOptions = {});
Tensor ones(Shape shape, TensorOptions = {});
// full: dtype from the options, else from the value's kind (bool, int64, default float).
// arange: dtype from the options, else int64 when every argument is an integer and the
// default float when any is floating. Integer results are exact for all int64 values.
Tensor full(Shape shape, const Scalar& value, TensorOptions = {});
Tensor arange(const Scalar& end, TensorOptions = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions = {});
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions);  // step 1 (LibTorch's)
Tensor linspace(double start, double end, int64_t steps, TensorOptions = {});
Tensor eye(int64_t n, TensorOptions = {});
void manual_seed(uint64_t seed);
Tensor rand(Shape shape, TensorOptions = {});
Tensor randn(Shape shape, TensorOptions = {});
Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions = {});
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, const Scalar& value);  // x's dtype and device
Tensor rand_like(const Tensor& x);
Tensor randn_like(const Tensor& x);
Tensor empty_like(const Tensor& x);

// ---- attention and sequence ops (sloth/attention_ops.cc) ----
// PyTorch 2's F.scaled_dot_product_attention: q [..., L, E], k [..., S, E], v [..., S, Ev]
// (same batch dims), scale 1/sqrt(E); a bool mask keeps where true, a float mask is added;
// is_causal keeps key j <= query i. Without dropout it is one fused op (kSdpa).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0,
                                    bool is_causal = false);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor cumsum(const Tensor& x, int64_t dim);  // integers and bool accumulate as int64
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);  // stable
// (values, int64 indices); stable, NaN sorts as the largest value.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1,
                                bool largest = true, bool sorted = true);
// Category indices (int64) drawn from the rows of probs ([C] or [N, C], non-negative,
// unnormalized), seeded by manual_seed. Reads probs back once to check them (a sync).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

}  // namespace sloth
