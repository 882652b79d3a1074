// sloth::Tensor: a cheap, shared handle to a lazy tensor. Copies alias (like torch::Tensor).
// Operations record lazy IR; reading values (item, to_vector, printing) is a sync point.
#pragma once

#include <memory>
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/ref.h"
#include "core/shape.h"
#include "sloth/int_list.h"
#include "sloth/op_api.h"

namespace sloth {

namespace lazy { class TensorImpl; }
namespace indexing { class TensorIndex; }

bool cuda_is_available();

// Builder-style options; the defaults are float32 on the CPU without grad.
struct TensorOptions {
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  bool has_dtype_ = false;
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; o.has_dtype_ = true; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}  // zeros({2}, kInt64)
  TensorOptions() = default;
};

class Tensor {
 public:
  Tensor();  // undefined
  explicit Tensor(Ref<lazy::TensorImpl> impl);
  ~Tensor();
  Tensor(const Tensor&);
  Tensor(Tensor&&) noexcept;
  Tensor& operator=(const Tensor&);
  Tensor& operator=(Tensor&&) noexcept;

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  // LibTorch's spelling: t.sizes().vec(), t.sizes()[0], t.sizes() == u.sizes(); a view of
  // shape() (sloth/int_list.h), converting to a const Shape&.
  SizesRef sizes() const { return SizesRef(shape()); }
  int64_t size(int64_t dim) const;
  const Strides& strides() const;   // PyTorch's logical strides
  int64_t storage_offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;

  // ---- reading values: sync points ----
  template <typename T> std::vector<T> to_vector() const;
  double item() const;
  // An integer type reads integer tensors exactly (an int64 beyond 2^53 too, as LibTorch's
  // item<int64_t>()); floating values convert as static_cast does.
  template <typename T> T item() const {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return static_cast<T>(item_int64());
    else return static_cast<T>(item());
  }
  int64_t item_int64() const;  // item<int64_t>()
  std::string to_string() const;
  Tensor to(Device) const;
  Tensor to(DType) const;
  Tensor clone() const;
  Tensor contiguous() const;

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true) const;
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor&) const;
  void retain_grad() const;
  bool retains_grad() const;
  // retain_graph defaults to create_graph (LibTorch: an explicit false frees the graph).
  void backward(const Tensor& grad_output = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const;
  Tensor& detach_() const;
  int64_t version() const;
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Leaves that require grad: `hook(leaf)` runs after each backward accumulates into
  // leaf.grad() (PyTorch's register_post_accumulate_grad_hook).
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);
  std::string grad_fn_name() const;  // "" for leaves and tensors without history

  // ---- views: share data with *this ----
  Tensor view(Shape) const;
  Tensor reshape(Shape) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor permute(Shape dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t i) const { return select(0, i); }
  Tensor expand(Shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor diagonal(int64_t offset = 0, int64_t d0 = 0, int64_t d1 = 1) const;
  Tensor as_strided(Shape size, Shape stride, int64_t offset = 0) const;
  std::vector<Tensor> split(int64_t size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t n, int64_t dim = 0) const;
  bool is_view() const;
  Tensor base() const;
  // LibTorch spellings. is_same: the same tensor object (a copy of this handle), not equal
  // values. is_alias_of: shares elements with `other` (a view of it, or of its base).
  // toString: LibTorch's type name, "CPUFloatType" ("UndefinedType" when undefined).
  bool is_same(const Tensor& other) const noexcept { return impl_ == other.impl_; }
  bool is_alias_of(const Tensor& other) const;
  std::string toString() const;

  // ---- in-place: write through views, bump version() ----
  // const, as in LibTorch: a Tensor is a handle, and writing its data does not change the
  // handle (`for (const auto& p : params) p.sub_(...)` compiles there and here).
  Tensor& copy_(const Tensor& src) const;
  // Numbers are Scalars (core/scalar.h): the kind written (2 vs 2.0) decides promotion, and
  // an in-place op refuses a result of a higher category than self (int64 add_(1.5)).
  Tensor& fill_(const Scalar& value) const;  // stored as this dtype: 2.5 into int64 is 2
  Tensor& zero_() const;
  // Fill with samples of U(from, to) / N(mean, std) in this tensor's dtype (floating only), as
  // a write: under NoGradGuard for a parameter, like every in-place op on a leaf.
  Tensor& uniform_(double from = 0, double to = 1) const;
  Tensor& normal_(double mean = 0, double std = 1) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& add_(const Scalar& other) const;
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Scalar& other) const;
  Tensor& mul_(const Tensor& other) const;
  Tensor& mul_(const Scalar& other) const;
  Tensor& div_(const Tensor& other) const;
  Tensor& div_(const Scalar& other) const;
  Tensor& clamp_(const Scalar& lo, const Scalar& hi) const;
  Tensor& relu_() const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;
  Tensor& index_put_(const Tensor& index, const Tensor& values) const;
  // LibTorch's indexing (sloth/indexing.h): x.index({Slice(), 0}) is Python's x[:, 0];
  // index_put_ assigns through the same indices (x[:, 0] = v).
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value) const;
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values) const;
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value) const;

  // ---- members mirroring the free functions ----
  Tensor add(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  // One method per generated row of core/ops.def (its Api column, sloth/op_api.h), the free
  // function of sloth/ops.h (which lists them all) without its first operand: x.f() and
  // a.f(b) for the Fn ops (neg abs exp ... maximum eq lt ...), x.f(dims = {}, keepdim = false)
  // for prod amax amin, x.f(dim, keepdim = false) for argmax argmin, x.f(dim) for softmax
  // log_softmax, x.f(dim, index) for index_select gather, base.f(dim, index, src) for
  // scatter_add index_add; the ListDim ops (cat stack) take a list and have no method.
#define SLOTH_API_Fn_Unary(Id, name) Tensor name() const;
#define SLOTH_API_Fn_Binary(Id, name) Tensor name(const Tensor& o) const;
#define SLOTH_API_DimFn_1(Id, name) Tensor name(int64_t dim) const;
#define SLOTH_API_DimFn_2(Id, name) Tensor name(int64_t dim, const Tensor& index) const;
#define SLOTH_API_DimFn_3(Id, name) \
  Tensor name(int64_t dim, const Tensor& index, const Tensor& src) const;
#define SLOTH_API_ListDim(Id, name)
#define SLOTH_API_ReduceFn(Id, name) Tensor name(Shape dims = {}, bool keepdim = false) const;
#define SLOTH_API_ArgFn(Id, name) \
  Tensor name(int64_t dim, bool keepdim = false) const; \
  Tensor name() const;
#include "sloth/op_api_rows.inc"
  Tensor pow(const Tensor& e) const;
  Tensor pow(const Scalar& e) const;
  Tensor remainder(const Tensor& o) const;
  Tensor remainder(const Scalar& o) const;
  Tensor fmod(const Tensor& o) const;
  Tensor fmod(const Scalar& o) const;
  Tensor floor_divide(const Tensor& o) const;
  Tensor floor_divide(const Scalar& o) const;
  Tensor clamp(const Scalar& lo, const Scalar& hi) const;
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor sum() const;
  Tensor sum(Shape dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(Shape dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor var(Shape dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(Shape dims, bool unbiased = true, bool keepdim = false) const;
  Tensor logsumexp(Shape dims, bool keepdim = false) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  // ---- attention and sequence ops (sloth/ops.h) ----
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor cumsum(int64_t dim) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
  // ---- LibTorch conveniences (sloth/compat.cc) ----
  // x.sum(1), x.mean(-1): one dim (a template so that sum({}) still means every dim).
  template <std::integral I>
  Tensor sum(I dim, bool keepdim = false) const { return sum(Shape{int64_t(dim)}, keepdim); }
  template <std::integral I>
  Tensor mean(I dim, bool keepdim = false) const { return mean(Shape{int64_t(dim)}, keepdim); }
  // x.var(), x.std(false): every element (only a bool picks these; a braced list is dims).
  template <std::same_as<bool> B = bool>
  Tensor var(B unbiased = true) const { return var(Shape{}, unbiased); }
  template <std::same_as<bool> B = bool>
  Tensor std(B unbiased = true) const { return std(Shape{}, unbiased); }
  // x.var(1), x.std(-1, true, true): one dim.
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Tensor var(I dim, bool unbiased = true, bool keepdim = false) const {
    return var(Shape{int64_t(dim)}, unbiased, keepdim);
  }
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Tensor std(I dim, bool unbiased = true, bool keepdim = false) const {
    return std(Shape{int64_t(dim)}, unbiased, keepdim);
  }
  // (values, indices) along dim, as LibTorch's max(dim) / min(dim).
  template <std::integral I>
  std::tuple<Tensor, Tensor> max(I dim, bool keepdim = false) const { return max_dim(dim, keepdim); }
  template <std::integral I>
  std::tuple<Tensor, Tensor> min(I dim, bool keepdim = false) const { return min_dim(dim, keepdim); }
  std::tuple<Tensor, Tensor> max_dim(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min_dim(int64_t dim, bool keepdim = false) const;
  // The p-norm of all elements (p = 2: sqrt(sum x^2)); float result.
  Tensor norm(double p = 2) const;
  Tensor norm(double p, int64_t dim, bool keepdim = false) const;   // along one dim
  // kBool 0-dim: every / some element is nonzero.
  Tensor all() const;
  Tensor any() const;
  Tensor to(DeviceType type) const { return to(Device{type, 0}); }
  // x.div(255), x.mul(0.5), x.add(1), x.sub(1, alpha): a number as the other operand.
  Tensor add(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& o, const Scalar& alpha = 1) const;
  Tensor mul(const Scalar& o) const;
  Tensor div(const Scalar& o) const;
  // LibTorch's `y.grad_fn()->name()` ("AddBackward0", "MeanBackward0"); nullptr for leaves
  // and tensors without history.
  struct GradFnInfo {
    std::string name_;
    const std::string& name() const { return name_; }
  };
  std::shared_ptr<const GradFnInfo> grad_fn() const;

  // Internal handle (used by the runtime's layers; not part of the stable API).
  const Ref<lazy::TensorImpl>& impl() const { return impl_; }

 private:
  Ref<lazy::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace sloth
