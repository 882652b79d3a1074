// Factories. Host data (tensor, from_vector, from_blob) becomes a data leaf at once; the
// others (zeros, full, arange, rand, ...) are lazy ops whose numbers enter as data, so a
// loop that makes them with new values each step keeps one plan. Random numbers come from a
// counter-based generator: (seed, offset) is data, and the offset advances by numel per call.
#include <cmath>
#include <cstring>

#include "autograd/grad_mode.h"
#include "core/op_attrs.h"
#include "core/range_rule.h"
#include "lazy/backend.h"
#include "lazy/borrowed_memory.h"
#include "lazy/tensor_impl.h"
#include "sloth/autograd_api.h"
#include "sloth/dispatch.h"
#include "sloth/jit.h"
#include "sloth/ops.h"

namespace sloth {
namespace {

struct RngState {
  uint64_t seed = 0x5eed;
  uint64_t offset = 0;
};
RngState& rng() {
  static RngState r;
  return r;
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (!o.device_.is_cpu() || !t.device().is_cpu()) t = t.to(o.device_);
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

Attrs shape_attrs(const Shape& s, DType d) {
  Attrs a;
  a.dims.assign(s.begin(), s.end());
  a.dtype = d;
  return a;
}

template <typename T>
Tensor host_tensor(const T* values, int64_t n, const Shape& shape, DType dtype) {
  lazy::DeviceData d = lazy::allocate_data(cpu_allocator(), shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using D = decltype(tag);
    D* out = d.data<D>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<D>(values[i]);
  });
  return Tensor(lazy::TensorImpl::make(lazy::Node::data_leaf(std::move(d)), Device::cpu()));
}

// {} is a 0-dim shape when there is one value; otherwise (and by default, {-1}) 1-D.
Shape resolve_shape(const char* op, Shape shape, int64_t n) {
  if (shape.empty()) {
    if (n == 1) return {};
    shape = {-1};
  }
  auto s = infer_size(op, shape, n, Shape{n});
  throw_if_error(s.status());
  return *s;
}

// Seeds are data: only the low 52 bits survive the trip through a double.
double seed_bits(uint64_t seed) { return static_cast<double>(seed & ((uint64_t{1} << 52) - 1)); }

Tensor random_op(OpId op, const Shape& shape, DType dtype, Attrs a) {
  a.dims.assign(shape.begin(), shape.end());
  a.dtype = dtype;
  RngState& r = rng();
  const uint64_t n = static_cast<uint64_t>(numel(shape));
  Tensor t;
  if (jit_recording()) {
    // Under sloth::jit a replayed step draws new numbers as a traced call does (dropout's
    // mask changes every step): seed and offset enter as host values that each replay reads
    // again, in trace order, advancing the offset as this call does. (As plan scalars they
    // would differ between traces, and the step would never replay.)
    Tensor seed = tensor(seed_bits(r.seed), TensorOptions(kFloat64));
    Tensor offset = tensor(static_cast<double>(r.offset), TensorOptions(kFloat64));
    jit_host_value(seed, [] { return seed_bits(rng().seed); });
    jit_host_value(offset, [n] {
      RngState& g = rng();
      const double at = static_cast<double>(g.offset);
      g.offset += n;
      return at;
    });
    t = call_op(op, {seed, offset}, a);
  } else {
    t = call_op(op, {wrap_scalar(seed_bits(r.seed)), wrap_scalar(static_cast<double>(r.offset))}, a);
  }
  r.offset += n;
  return t;
}

DType float_or(const TensorOptions& o) { return o.has_dtype_ ? o.dtype_ : kDefaultFloat; }

// The dtype a factory gives a lone number (torch.full): bool, int64 or the default float.
DType default_dtype(const Scalar& v) {
  return v.is_boolean() ? DType::kBool : v.is_integral() ? DType::kInt64 : kDefaultFloat;
}

}  // namespace

bool cuda_is_available() { return lazy::has_backend(DeviceType::kCUDA); }

Tensor tensor(std::vector<double> values, Shape shape, TensorOptions o) {
  const int64_t n = static_cast<int64_t>(values.size());
  Shape s = resolve_shape("tensor", std::move(shape), n);
  return finish(host_tensor(values.data(), n, s, float_or(o)), o);
}

Tensor tensor(double scalar, TensorOptions o) {
  return finish(host_tensor(&scalar, 1, {}, float_or(o)), o);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, TensorOptions o) {
  const int64_t n = static_cast<int64_t>(values.size());
  Shape s = resolve_shape("from_vector", std::move(shape), n);
  DType d = o.has_dtype_ ? o.dtype_ : DTypeOf<T>::value;
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> tmp(values.begin(), values.end());
    return finish(host_tensor(tmp.data(), n, s, d), o);
  } else {
    return finish(host_tensor(values.data(), n, s, d), o);
  }
}
template Tensor from_vector<float>(const std::vector<float>&, Shape, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, Shape, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, Shape, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape, TensorOptions);
template Tensor from_vector<bool>(const std::vector<bool>&, Shape, TensorOptions);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, Shape, TensorOptions);

Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter) {
  for (int64_t d : shape)
    if (d < 0) fail("from_blob: negative size in shape %s", shape_str(shape));
  // The memory is shared, with LibTorch's results: recorded ops that still read it when the
  // tensor (and its views) go get a copy, and writes reach it at syncs and when the tensor
  // goes (lazy/borrowed_memory.h). So `from_blob(p, ...).clone()` and the custom-dataset
  // idiom (image bytes viewed by from_blob, concatenated, the buffer freed on return) work.
  lazy::DeviceData d;
  size_t bytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  StoragePtr memory = make_ref<Storage>(data, bytes, Device::cpu(), std::move(deleter));
  d.storage = memory;
  d.layout = {shape, contiguous_strides(shape), 0};
  d.dtype = dtype;
  auto impl = lazy::TensorImpl::make(lazy::Node::data_leaf(std::move(d)), Device::cpu());
  lazy::borrow_memory(*impl->group, std::move(memory));
  return Tensor(std::move(impl));
}

Tensor full(Shape shape, const Scalar& value, TensorOptions o) {
  const DType d = o.has_dtype_ ? o.dtype_ : default_dtype(value);
  check_fits("full", value, d);
  const Scalar v = value.converted_to(d);
  // Lazy operands travel as doubles; an int64 beyond 2^53 is written on the host instead (a
  // data leaf rather than a full op: exact, at the price of an eager allocation).
  if (!v.exact_in_double()) {
    for (int64_t s : shape)
      if (s < 0) fail("full: negative size %d in shape %s", s, shape_str(shape));
    std::vector<int64_t> values(static_cast<size_t>(numel(shape)), v.to<int64_t>());
    return finish(host_tensor(values.data(), numel(shape), shape, d), o);
  }
  return finish(call_op(OpId::kFull, {wrap_scalar(v)}, shape_attrs(shape, d)), o);
}
// Unlike full(), these are floating unless told otherwise (torch.zeros): the 0 and 1 below
// are written as doubles so their kind does not pick the dtype.
Tensor empty(Shape shape, TensorOptions o) { return full(std::move(shape), 0.0, o.dtype(float_or(o))); }
Tensor zeros(Shape shape, TensorOptions o) { return full(std::move(shape), 0.0, o.dtype(float_or(o))); }
Tensor ones(Shape shape, TensorOptions o) { return full(std::move(shape), 1.0, o.dtype(float_or(o))); }

Tensor arange(const Scalar& end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions o) {
  return arange(start, end, 1, o);
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  auto spec = range_rule(start, end, step, o.has_dtype_ ? std::optional<DType>(o.dtype_) : std::nullopt);
  throw_if_error(spec.status());
  const RangeSpec& r = *spec;
  if (!r.exact_in_double()) {
    // The lazy op's operands are doubles; integers beyond 2^52 are computed here, exactly.
    std::vector<int64_t> values(static_cast<size_t>(r.n));
    for (int64_t i = 0; i < r.n; ++i) values[i] = r.start_i + i * r.step_i;
    return finish(host_tensor(values.data(), r.n, {r.n}, r.dtype), o);
  }
  const Scalar first = r.integral() ? Scalar(r.start_i) : Scalar(r.start_d);
  const Scalar step_v = r.integral() ? Scalar(r.step_i) : Scalar(r.step_d);
  return finish(call_op(OpId::kArange, {wrap_scalar(first), wrap_scalar(step_v)},
                        shape_attrs({r.n}, r.dtype)),
                o);
}
Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  if (steps < 0) fail("linspace: number of steps must be non-negative, got %d", steps);
  return finish(call_op(OpId::kLinspace, {wrap_scalar(start), wrap_scalar(end)},
                        shape_attrs({steps}, float_or(o))),
                o);
}
Tensor eye(int64_t n, TensorOptions o) {
  if (n < 0) fail("eye: n must be non-negative, got %d", n);
  return finish(call_op(OpId::kEye, {}, shape_attrs({n, n}, float_or(o))), o);
}

void manual_seed(uint64_t seed) { rng() = {seed, 0}; }

Tensor rand(Shape shape, TensorOptions o) {
  return finish(random_op(OpId::kRand, shape, float_or(o), {}), o);
}
Tensor randn(Shape shape, TensorOptions o) {
  return finish(random_op(OpId::kRandn, shape, float_or(o), {}), o);
}
Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions o) {
  return finish(random_op(OpId::kRandint, shape, o.has_dtype_ ? o.dtype_ : DType::kInt64,
                          RandintAttrs{.low = low, .high = high}),
                o);
}

Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())); }
Tensor full_like(const Tensor& x, const Scalar& v) { return full(x.shape(), v, TensorOptions().dtype(x.dtype()).device(x.device())); }
Tensor empty_like(const Tensor& x) { return zeros_like(x); }
Tensor rand_like(const Tensor& x) { return rand(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())); }
Tensor randn_like(const Tensor& x) { return randn(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())); }

namespace {

// The copy itself: the result is a fresh data leaf on `target`.
Tensor copy_to_device(const Tensor& x, Device target) {
  lazy::Backend* dst = lazy::backend_for(target);
  lazy::Backend* src = lazy::backend_for(x.device());
  Tensor c = x.contiguous();
  internal::sync_tensor(c);
  lazy::DeviceData in = *c.impl()->value()->data;
  lazy::DeviceData out = lazy::allocate_data(dst->allocator(), in.layout.shape, in.dtype);
  size_t bytes = static_cast<size_t>(in.numel()) * dtype_size(in.dtype);
  if (x.device().is_cpu()) {
    dst->copy_from_host(in.raw(), out.raw(), bytes);
  } else if (target.is_cpu()) {
    src->copy_to_host(in.raw(), out.raw(), bytes);
  } else {
    std::vector<char> host(bytes);
    src->copy_to_host(in.raw(), host.data(), bytes);
    dst->copy_from_host(host.data(), out.raw(), bytes);
  }
  return Tensor(lazy::TensorImpl::make(lazy::Node::data_leaf(std::move(out)), target));
}

// A device move is differentiable (as PyTorch's): the gradient moves back to the source.
struct ToDevice : autograd::Function<ToDevice> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, Device target) {
    ctx->saved_data["type"] = static_cast<int64_t>(x.device().type);
    ctx->saved_data["index"] = static_cast<int64_t>(x.device().index);
    return copy_to_device(x, target);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    const Device source{static_cast<DeviceType>(ctx->saved_data["type"].toInt()),
                        static_cast<int>(ctx->saved_data["index"].toInt())};
    return {g[0].to(source)};
  }
};

}  // namespace

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  if (lazy::backend_for(target) == nullptr)
    fail("to(%s): no backend for that device; %s", target.str(),
         target.is_cuda() ? "build with --config=cuda and run on a machine with a GPU" : "link //backends/cpu");
  if (requires_grad() && autograd::is_grad_enabled()) return ToDevice::apply(*this, target);
  return copy_to_device(*this, target);
}

}  // namespace sloth
