// Tensor members: metadata, reading values (sync points), views, in-place ops, autograd.
#include "sloth/tensor.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/op_attrs.h"
#include "lazy/backend.h"
#include "lazy/metrics.h"
#include "lazy/scheduler.h"
#include "lazy/tensor_impl.h"
#include "sloth/dispatch.h"
#include "sloth/indexing.h"
#include "sloth/ops.h"
#include "sloth/view_autograd.h"

namespace sloth {

using lazy::TensorImpl;

Tensor::Tensor() = default;
Tensor::Tensor(Ref<TensorImpl> impl) : impl_(std::move(impl)) {}
Tensor::~Tensor() = default;
Tensor::Tensor(const Tensor&) = default;
Tensor::Tensor(Tensor&&) noexcept = default;
Tensor& Tensor::operator=(const Tensor&) = default;
Tensor& Tensor::operator=(Tensor&&) noexcept = default;

namespace {
const TensorImpl& need(const Tensor& t, const char* what) {
  if (!t.defined()) fail("%s: the tensor is undefined (default-constructed)", what);
  return *t.impl();
}
}  // namespace

const Shape& Tensor::shape() const { return need(*this, "shape").shape; }
int64_t Tensor::size(int64_t dim) const {
  const auto& s = shape();
  auto d = wrap_dim("size", dim, static_cast<int64_t>(s.size()));
  throw_if_error(d.status());
  if (s.empty()) fail("size: a 0-dim tensor has no dims");
  return s[*d];
}
const Strides& Tensor::strides() const { return need(*this, "strides").strides(); }
int64_t Tensor::storage_offset() const { return need(*this, "storage_offset").storage_offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::numel() const { return sloth::numel(shape()); }
DType Tensor::dtype() const { return need(*this, "dtype").dtype; }
Device Tensor::device() const { return need(*this, "device").group->device; }
bool Tensor::is_contiguous() const { return sloth::is_contiguous(shape(), strides()); }

// ---- reading values --------------------------------------------------------------------------
namespace internal {

lazy::DeviceData host_data(const Tensor& t) {
  need(t, "read");
  ++lazy::counters().host_syncs;
  lazy::NodePtr v = t.impl()->value();
  if (v->op == OpId::kScalar) {
    lazy::DeviceData d = lazy::allocate_data(cpu_allocator(), {}, v->dtype);
    if (v->dtype == DType::kInt64) *d.data<int64_t>() = static_cast<int64_t>(v->scalar);
    else *d.data<double>() = v->scalar;
    return d;
  }
  v.reset();  // a held view value would be one more graph output (see lazy/graph.cc)
  internal::sync_tensor(t);
  v = t.impl()->value();
  // A view whose chain has no zero-copy layout over the synced base (a reshape that apply_view
  // cannot express) is a small pending graph of its own: run it too.
  if (!v->materialized()) lazy::sync_nodes({&v, 1}, t.impl()->group->device);
  lazy::DeviceData d = *v->data;
  if (!d.storage->device().is_cpu()) {
    Tensor h = t.to(Device::cpu());
    return host_data(h);
  }
  return d;
}

}  // namespace internal

namespace {

template <typename T>
void gather_values(const lazy::DeviceData& d, std::vector<T>& out) {
  const int64_t n = d.numel();
  out.resize(n);
  if (n == 0) return;
  const auto& shape = d.layout.shape;
  const auto& st = d.layout.strides;
  const int64_t r = static_cast<int64_t>(shape.size());
  visit_dtype(d.dtype, [&](auto tag) {
    using S = decltype(tag);
    const S* base = d.data<S>();
    std::vector<int64_t> idx(r, 0);
    int64_t off = 0;
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(base[off]);
      for (int64_t k = r - 1; k >= 0; --k) {
        if (++idx[k] < shape[k]) { off += st[k]; break; }
        off -= st[k] * (shape[k] - 1);
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out;
  gather_values(internal::host_data(*this), out);
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

namespace {

// The one element of a one-element tensor, read in place (a loss read every step: no vector
// made for it) and converted as static_cast does.
template <typename T>
T only_element(const Tensor& t) {
  if (t.numel() != 1)
    fail("item: only a tensor with one element can be converted to a number, got shape %s; "
         "reduce it first (sum, mean) or index it",
         shape_str(t.shape()));
  const lazy::DeviceData d = internal::host_data(t);
  T v{};
  visit_dtype(d.dtype, [&](auto tag) {
    using S = decltype(tag);
    v = static_cast<T>(*d.data<S>());
  });
  return v;
}

}  // namespace

double Tensor::item() const { return only_element<double>(*this); }
int64_t Tensor::item_int64() const { return only_element<int64_t>(*this); }

Tensor Tensor::to(DType d) const {
  if (d == dtype()) return *this;
  Attrs a;
  a.dtype = d;
  return call_op(OpId::kCast, {*this}, a);
}

Tensor Tensor::clone() const { return call_op(OpId::kClone, {*this}); }
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// ---- autograd --------------------------------------------------------------------------------
bool Tensor::requires_grad() const { return internal::tracks_grad(*this, /*strict=*/false); }

Tensor& Tensor::requires_grad_(bool r) const {
  auto* m = autograd::meta(*impl());
  if (!r && m && m->grad_fn)
    fail("requires_grad_(false): you can only change requires_grad of leaf tensors; this one "
         "was computed by %s (use detach() to get a tensor without history)",
         m->grad_fn->name());
  if (r && !is_floating(dtype()))
    fail("requires_grad_: only floating-point tensors can require gradients (PyTorch: \"only "
         "Tensors of floating point dtype can require gradients\"), got %s; convert first with "
         ".to(kFloat)",
         dtype_name(dtype()));
  autograd::ensure_meta(*impl()).requires_grad = r;
  return const_cast<Tensor&>(*this);
}

bool Tensor::is_leaf() const {
  internal::tracks_grad(*this, /*strict=*/false);
  auto* m = autograd::meta(*impl());
  return m == nullptr || !m->grad_fn;
}

Tensor Tensor::grad() const {
  auto* m = autograd::meta(*impl());
  return m && m->grad ? Tensor(m->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && g.shape() != shape())
    fail("set_grad: gradient of shape %s does not match the tensor's shape %s",
         shape_str(g.shape()), shape_str(shape()));
  autograd::ensure_meta(*impl()).grad = g.defined() ? g.impl() : nullptr;
}

void Tensor::retain_grad() const {
  auto& m = autograd::ensure_meta(*impl());
  if (!m.grad_fn) return;  // leaves keep their grad anyway
  if (m.retains_grad) return;
  m.retains_grad = true;
  m.grad_fn->extras_mut().retained.push_back({m.output_nr, impl().get()});
}
bool Tensor::retains_grad() const {
  auto* m = autograd::meta(*impl());
  return m && m->retains_grad;
}

void Tensor::backward(const Tensor& grad_output, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::run_backward({impl()}, {grad_output.defined() ? grad_output.impl() : nullptr},
                         retain_graph.value_or(create_graph), create_graph, {}, false);
}

Tensor Tensor::detach() const { return Tensor(TensorImpl::alias_of(impl())); }

Tensor& Tensor::detach_() const {
  if (auto* m = autograd::meta(*impl())) {
    m->grad_fn.reset();
    m->requires_grad = false;
  }
  return const_cast<Tensor&>(*this);
}

int64_t Tensor::version() const { return need(*this, "version").group->version; }

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  if (!requires_grad())
    fail("register_hook: cannot register a hook on a tensor that doesn't require gradient");
  autograd::Hook h = [hook](const lazy::TensorImplPtr& g) -> lazy::TensorImplPtr {
    Tensor r = hook(Tensor(g));
    return r.defined() ? r.impl() : nullptr;
  };
  auto& m = autograd::ensure_meta(*impl());
  if (m.grad_fn) m.grad_fn->extras_mut().pre_hooks.push_back({m.output_nr, std::move(h)});
  else m.extras_mut().leaf_hooks.push_back(std::move(h));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  if (!requires_grad() || !is_leaf())
    fail("register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a "
         "gradient; call it on a parameter");
  autograd::ensure_meta(*impl()).extras_mut().post_accumulate_hooks.push_back(
      [hook](const lazy::TensorImplPtr& leaf) {
        Tensor t(leaf);
        hook(t);
      });
}

std::string Tensor::grad_fn_name() const {
  internal::tracks_grad(*this);
  auto* m = autograd::meta(*impl());
  return m && m->grad_fn ? m->grad_fn->name() : "";
}

// ---- views -------------------------------------------------------------------------------------
namespace {
Attrs dims_attrs(const Shape& dims) {
  Attrs a;
  a.dims.assign(dims.begin(), dims.end());
  return a;
}
}  // namespace

Tensor Tensor::view(Shape s) const { return call_op(OpId::kView, {*this}, dims_attrs(s)); }
Tensor Tensor::reshape(Shape s) const { return call_op(OpId::kReshape, {*this}, dims_attrs(s)); }
Tensor Tensor::flatten(int64_t start, int64_t end) const {
  const Attrs a = FlattenAttrs{.start_dim = start, .end_dim = end};
  // As ATen: flattening a range of one dim returns the tensor itself (the same tensor: a leaf
  // stays a leaf). Bad dims still go through the op's rule for its error.
  const int64_t n = dim();
  if (defined() && n >= 1 && start >= -n && start < n && end >= -n && end < n &&
      (start < 0 ? start + n : start) == (end < 0 ? end + n : end))
    return *this;
  return call_op(OpId::kFlatten, {*this}, a);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return call_op(OpId::kTranspose, {*this}, TransposeAttrs{.dim0 = d0, .dim1 = d1});
}
Tensor Tensor::t() const { return call_op(OpId::kT, {*this}); }
Tensor Tensor::permute(Shape dims) const { return call_op(OpId::kPermute, {*this}, dims_attrs(dims)); }
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return call_op(OpId::kSlice, {*this},
                 SliceAttrs{.dim = dim, .start = start, .end = end, .step = step});
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return call_op(OpId::kNarrow, {*this}, NarrowAttrs{.dim = dim, .start = start, .length = length});
}
Tensor Tensor::select(int64_t dim, int64_t index) const {
  return call_op(OpId::kSelect, {*this}, SelectAttrs{.dim = dim, .index = index});
}
Tensor Tensor::expand(Shape s) const { return call_op(OpId::kExpand, {*this}, dims_attrs(s)); }
Tensor Tensor::squeeze(int64_t dim) const { return call_op(OpId::kSqueeze, {*this}, dims_attrs({dim})); }
Tensor Tensor::squeeze() const {
  return call_op(OpId::kSqueeze, {*this}, SqueezeAttrs{.all = true});
}
Tensor Tensor::unsqueeze(int64_t dim) const {
  return call_op(OpId::kUnsqueeze, {*this}, DimAttrs{.dim = dim});
}
Tensor Tensor::diagonal(int64_t offset, int64_t d0, int64_t d1) const {
  return call_op(OpId::kDiagonal, {*this}, DiagonalAttrs{.offset = offset, .dim1 = d0, .dim2 = d1});
}
Tensor Tensor::as_strided(Shape size, Shape stride, int64_t offset) const {
  return call_op(OpId::kAsStrided, {*this},
                 AsStridedAttrs{.size = attr_dims(size), .stride = attr_dims(stride), .offset = offset});
}
std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const {
  return call_op_list(OpId::kSplit, *this, SplitAttrs{.size_or_n = size, .dim = dim});
}
std::vector<Tensor> Tensor::chunk(int64_t n, int64_t dim) const {
  return call_op_list(OpId::kChunk, *this, SplitAttrs{.size_or_n = n, .dim = dim});
}
bool Tensor::is_view() const { return need(*this, "is_view").is_view(); }
Tensor Tensor::base() const { return is_view() ? Tensor(impl()->view_base) : Tensor(); }
bool Tensor::is_alias_of(const Tensor& other) const {
  // Views of one base share its alias group (functionalization), as they share its storage
  // in LibTorch.
  return need(*this, "is_alias_of").group == need(other, "is_alias_of").group;
}
std::string Tensor::toString() const {
  if (!defined()) return "UndefinedType";
  static constexpr const char* kScalarType[] = {"Bool", "Int", "Long", "Float", "Double", "Byte"};
  static_assert(std::size(kScalarType) == kNumDTypes);
  return absl::StrCat(device().type == DeviceType::kCUDA ? "CUDA" : "CPU",
                      kScalarType[static_cast<int>(dtype())], "Type");
}

// ---- in-place ----------------------------------------------------------------------------------
Tensor& Tensor::copy_(const Tensor& src) const { call_op(OpId::kCopy_, {*this, src}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::fill_(const Scalar& v) const {
  if (defined()) {
    check_fits("fill_", v, dtype());
    const Scalar stored = v.converted_to(dtype());
    // Lazy operands are doubles: an int64 beyond 2^53 comes in as an exact 0-dim tensor.
    if (!stored.exact_in_double())
      return copy_(full({}, stored, TensorOptions().dtype(dtype()).device(device())));
    call_op(OpId::kFill_, {*this, wrap_scalar(stored)});
    return const_cast<Tensor&>(*this);
  }
  call_op(OpId::kFill_, {*this, wrap_scalar(v)});  // names the undefined operand
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::zero_() const { call_op(OpId::kZero_, {*this}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::uniform_(double from, double to) const {
  if (defined() && !is_floating(dtype()))
    fail("uniform_: not implemented for %s tensors (a %s); sample a float tensor and convert "
         "it, or use randint", dtype_name(dtype()), shape_str(shape()));
  if (!(from <= to))
    fail("uniform_: expects to return a [from, to) range, but found from=%g > to=%g", from, to);
  if (!defined()) return copy_(Tensor());  // names the undefined operand
  return copy_(rand(shape(), TensorOptions().dtype(dtype()).device(device())) * (to - from) +
               from);
}
Tensor& Tensor::normal_(double mean, double std) const {
  if (defined() && !is_floating(dtype()))
    fail("normal_: not implemented for %s tensors (a %s); sample a float tensor and convert it",
         dtype_name(dtype()), shape_str(shape()));
  if (!(std >= 0)) fail("normal_: expects std >= 0.0, but found std %g", std);
  if (!defined()) return copy_(Tensor());
  return copy_(randn(shape(), TensorOptions().dtype(dtype()).device(device())) * std + mean);
}
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) const {
  call_op(OpId::kAdd_, {*this, internal::scaled_by_alpha(*this, o, alpha, "add_")});
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::add_(const Scalar& o) const { call_op(OpId::kAdd_, {*this, wrap_scalar(o)}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) const {
  call_op(OpId::kSub_, {*this, internal::scaled_by_alpha(*this, o, alpha, "sub_")});
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::sub_(const Scalar& o) const { call_op(OpId::kSub_, {*this, wrap_scalar(o)}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::mul_(const Tensor& o) const { call_op(OpId::kMul_, {*this, o}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::mul_(const Scalar& o) const { call_op(OpId::kMul_, {*this, wrap_scalar(o)}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::div_(const Tensor& o) const { call_op(OpId::kDiv_, {*this, o}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::div_(const Scalar& o) const { call_op(OpId::kDiv_, {*this, wrap_scalar(o)}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::clamp_(const Scalar& lo, const Scalar& hi) const {
  call_op(OpId::kClamp_, {*this, wrap_scalar(lo), wrap_scalar(hi)});
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::relu_() const { call_op(OpId::kRelu_, {*this}); return const_cast<Tensor&>(*this); }
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& v) const {
  if (!defined()) {
    call_op(OpId::kMaskedFill_, {*this, mask, wrap_scalar(v)});  // names the undefined operand
    return const_cast<Tensor&>(*this);
  }
  check_fits("masked_fill_", v, dtype());
  call_op(OpId::kMaskedFill_, {*this, mask, exact_operand(v.converted_to(dtype()), dtype(), device())});
  return const_cast<Tensor&>(*this);
}
Tensor& Tensor::index_put_(const Tensor& index, const Tensor& values) const {
  // x.index_put_({mask}, v) and a multi-dim index pick this overload ({t} binds to a
  // Tensor); they mean LibTorch's indexing (sloth/indexing.h), which the op covers only for
  // a 1-d int64 index.
  if (index.defined() && defined() &&
      (index.dtype() == DType::kBool || index.dtype() == DType::kUInt8 || index.dim() != 1))
    return index_put_(std::vector<indexing::TensorIndex>{index}, values);
  call_op(OpId::kIndexPut_, {*this, index, values});
  return const_cast<Tensor&>(*this);
}

// ---- members mirroring free functions ------------------------------------------------------------
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return sloth::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return sloth::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return sloth::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return sloth::div(*this, o); }
// The generated methods (sloth/op_api.h): the free function on *this.
#define SLOTH_API_Fn_Unary(Id, name) \
  Tensor Tensor::name() const { return sloth::name(*this); }
#define SLOTH_API_Fn_Binary(Id, name) \
  Tensor Tensor::name(const Tensor& o) const { return sloth::name(*this, o); }
#define SLOTH_API_DimFn_1(Id, name) \
  Tensor Tensor::name(int64_t dim) const { return sloth::name(*this, dim); }
#define SLOTH_API_DimFn_2(Id, name)                                  \
  Tensor Tensor::name(int64_t dim, const Tensor& index) const {      \
    return sloth::name(*this, dim, index);                           \
  }
#define SLOTH_API_DimFn_3(Id, name)                                                    \
  Tensor Tensor::name(int64_t dim, const Tensor& index, const Tensor& src) const {     \
    return sloth::name(*this, dim, index, src);                                        \
  }
#define SLOTH_API_ListDim(Id, name)
#define SLOTH_API_ReduceFn(Id, name) \
  Tensor Tensor::name(Shape dims, bool keepdim) const { return sloth::name(*this, dims, keepdim); }
#define SLOTH_API_ArgFn(Id, name)                                                                 \
  Tensor Tensor::name(int64_t dim, bool keepdim) const { return sloth::name(*this, dim, keepdim); } \
  Tensor Tensor::name() const { return sloth::name(*this); }
#include "sloth/op_api_rows.inc"
Tensor Tensor::pow(const Tensor& e) const { return sloth::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return sloth::pow(*this, e); }
Tensor Tensor::remainder(const Tensor& o) const { return sloth::remainder(*this, o); }
Tensor Tensor::remainder(const Scalar& o) const { return sloth::remainder(*this, o); }
Tensor Tensor::fmod(const Tensor& o) const { return sloth::fmod(*this, o); }
Tensor Tensor::fmod(const Scalar& o) const { return sloth::fmod(*this, o); }
Tensor Tensor::floor_divide(const Tensor& o) const { return sloth::floor_divide(*this, o); }
Tensor Tensor::floor_divide(const Scalar& o) const { return sloth::floor_divide(*this, o); }
Tensor Tensor::clamp(const Scalar& lo, const Scalar& hi) const { return sloth::clamp(*this, lo, hi); }
Tensor Tensor::matmul(const Tensor& o) const { return sloth::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return sloth::mm(*this, o); }
Tensor Tensor::sum() const { return sloth::sum(*this); }
Tensor Tensor::sum(Shape dims, bool keepdim) const { return sloth::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return sloth::mean(*this); }
Tensor Tensor::mean(Shape dims, bool keepdim) const { return sloth::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return sloth::amax(*this); }
Tensor Tensor::min() const { return sloth::amin(*this); }
Tensor Tensor::var(Shape dims, bool unbiased, bool keepdim) const { return sloth::var(*this, dims, unbiased, keepdim); }
Tensor Tensor::std(Shape dims, bool unbiased, bool keepdim) const { return sloth::std(*this, dims, unbiased, keepdim); }
Tensor Tensor::logsumexp(Shape dims, bool keepdim) const { return sloth::logsumexp(*this, dims, keepdim); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& v) const { return sloth::masked_fill(*this, mask, v); }
// ---- attention and sequence ops ----
Tensor Tensor::tril(int64_t d) const { return sloth::tril(*this, d); }
Tensor Tensor::triu(int64_t d) const { return sloth::triu(*this, d); }
Tensor Tensor::cumsum(int64_t dim) const { return sloth::cumsum(*this, dim); }
Tensor Tensor::argsort(int64_t dim, bool desc) const { return sloth::argsort(*this, dim, desc); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool desc) const { return sloth::sort(*this, dim, desc); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return sloth::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::multinomial(int64_t n, bool replacement) const { return sloth::multinomial(*this, n, replacement); }

}  // namespace sloth
