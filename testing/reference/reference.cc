// ref_eval: runs the rule, dispatches to the per-category kernels, casts the result.
#include "testing/reference/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "testing/reference/ref_internal.h"

namespace sloth {

double ref_cast(double x, DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return x != 0 ? 1.0 : 0.0;  // NaN is true, as bool(nan) in PyTorch
    case DType::kInt32:
      // Out of range (and NaN) is undefined for static_cast; x86 yields the "indefinite" value.
      if (!(x > -2147483649.0 && x < 2147483648.0)) return std::numeric_limits<int32_t>::min();
      return static_cast<double>(static_cast<int32_t>(x));
    case DType::kInt64:
      if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
        return static_cast<double>(std::numeric_limits<int64_t>::min());
      return static_cast<double>(static_cast<int64_t>(x));
    case DType::kFloat32:
      return static_cast<double>(static_cast<float>(x));
    case DType::kFloat64:
      return x;
    case DType::kUInt8:
      // Integers wrap mod 256 (int64 -> uint8 in PyTorch); in-range floats truncate.
      if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return 0.0;
      return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(x)));
  }
  return x;
}

RefTensor ref_tensor(Shape shape, DType dtype, std::vector<double> v) {
  for (double& x : v) x = ref_cast(x, dtype);
  return RefTensor{std::move(shape), dtype, std::move(v)};
}

RefTensor ref_scalar(double v, DType dtype) { return ref_tensor({}, dtype, {v}); }

absl::StatusOr<OutputMeta> ref_infer(OpId op, const std::vector<RefTensor>& inputs, Attrs* attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const auto& t : inputs) metas.push_back(TensorMeta{&t.shape, t.dtype, false});
  OutputMeta out;
  SLOTH_RETURN_IF_ERROR(infer(op, metas, *attrs, &out));
  return out;
}

namespace ref {

Index unravel(int64_t flat, const Shape& shape) {
  Index idx(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    int64_t n = shape[i];
    idx[i] = n > 0 ? flat % n : 0;
    flat = n > 0 ? flat / n : 0;
  }
  return idx;
}

int64_t ravel(const Index& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}

double bget(const RefTensor& t, const Index& idx) {
  size_t off = idx.size() - t.shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < t.shape.size(); ++i)
    flat = flat * t.shape[i] + (t.shape[i] == 1 ? 0 : idx[off + i]);
  return t.v[flat];
}

RefTensor broadcast_to(const RefTensor& t, const Shape& shape) {
  RefTensor r{shape, t.dtype, Values(numel(shape))};
  for (int64_t i = 0; i < static_cast<int64_t>(r.v.size()); ++i) r.v[i] = bget(t, unravel(i, shape));
  return r;
}

RefTensor cast_to(const RefTensor& t, DType dtype) { return ref_tensor(t.shape, dtype, t.v); }

namespace {

// The functional op whose result an in-place op writes into operand 0.
absl::StatusOr<Values> eval_inplace(const Ctx& c) {
  const RefTensor& self = c.in[0];
  switch (c.op) {
    case OpId::kCopy_:
      return cast_to(broadcast_to(c.in[1], self.shape), self.dtype).v;
    case OpId::kFill_:
      return Values(self.v.size(), c.in[1].v[0]);
    case OpId::kZero_:
      return Values(self.v.size(), 0.0);
    default: {
      const std::optional<OpId> fn = op_info(c.op).facts.functional;
      if (!fn) return invalid("%s: the op table names no out-of-place op for it", op_name(c.op));
      auto r = ref_eval(*fn, c.in, c.a);
      if (!r.ok()) return r.status();
      return std::move(r->v);  // cast to self's dtype by the caller
    }
  }
}

}  // namespace
}  // namespace ref

namespace {

absl::StatusOr<ref::Values> dispatch(const ref::Ctx& c) {
  switch (op_info(c.op).category) {
    case OpCategory::Leaf:
      return invalid("%s: leaves have no reference kernel", op_name(c.op));
    case OpCategory::Factory:
      return ref::eval_factory(c);
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
      return ref::eval_elementwise(c);
    case OpCategory::Reduce:
      return ref::eval_reduce(c);
    case OpCategory::Matmul:
      return ref::eval_linalg(c);
    case OpCategory::View:
    case OpCategory::Scatter:
      return ref::eval_view(c);
    case OpCategory::Index:
    case OpCategory::Shape:
      return ref::eval_index(c);
    case OpCategory::Kernel:
      return ref::eval_kernel(c);
    case OpCategory::Inplace:
      return ref::eval_inplace(c);
    case OpCategory::Composite:
      switch (c.op) {
        case OpId::kMean: case OpId::kVar: case OpId::kStd: case OpId::kLogsumexp:
          return ref::eval_reduce(c);
        case OpId::kLinear: case OpId::kMm: case OpId::kBmm:
          return ref::eval_linalg(c);
        case OpId::kStack: case OpId::kEmbedding: case OpId::kMaskedFill: case OpId::kContiguous:
          return ref::eval_index(c);
        // ---- convolution and pooling ----
        case OpId::kConv1d: case OpId::kConv2d: case OpId::kConvTranspose2d:
        case OpId::kMaxPool2d: case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d:
          return ref::eval_conv(c);
        case OpId::kTril: case OpId::kTriu:  // attention and sequence ops
          return ref::eval_kernel(c);
        default:
          return ref::eval_nn(c);
      }
  }
  return invalid("%s: no reference kernel", op_name(c.op));
}

// Operands as their dtypes hold them.
std::vector<RefTensor> normalized(const std::vector<RefTensor>& inputs) {
  std::vector<RefTensor> in = inputs;
  for (auto& t : in) for (double& x : t.v) x = ref_cast(x, t.dtype);
  return in;
}

absl::Status check_sizes(OpId op, const std::vector<RefTensor>& in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int64_t>(in[i].v.size()) != numel(in[i].shape))
      return invalid("%s (reference): operand %d has %d values for shape %s", op_name(op),
                     static_cast<int64_t>(i), static_cast<int64_t>(in[i].v.size()),
                     shape_str(in[i].shape));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RefTensor> ref_eval(OpId op, const std::vector<RefTensor>& inputs, Attrs attrs) {
  SLOTH_RETURN_IF_ERROR(check_sizes(op, inputs));
  auto out = ref_infer(op, inputs, &attrs);
  if (!out.ok()) return out.status();
  if (op == OpId::kSplit || op == OpId::kChunk)
    return invalid("%s returns a list; use ref_eval_list", op_name(op));
  std::vector<RefTensor> in = normalized(inputs);
  ref::Ctx c{op, in, attrs, *out};
  auto v = dispatch(c);
  if (!v.ok()) return v.status();
  if (static_cast<int64_t>(v->size()) != numel(out->shape))
    return absl::InternalError(absl::StrFormat("%s (reference): produced %d values for shape %s",
                                               op_name(op), static_cast<int64_t>(v->size()),
                                               shape_str(out->shape)));
  return ref_tensor(out->shape, out->dtype, *std::move(v));
}

absl::StatusOr<std::vector<RefTensor>> ref_eval_list(OpId op, const std::vector<RefTensor>& inputs,
                                                     Attrs attrs) {
  SLOTH_RETURN_IF_ERROR(check_sizes(op, inputs));
  if (op != OpId::kSplit && op != OpId::kChunk)
    return invalid("%s does not return a list; use ref_eval", op_name(op));
  auto out = ref_infer(op, inputs, &attrs);
  if (!out.ok()) return out.status();
  std::vector<RefTensor> in = normalized(inputs);
  ref::Ctx c{op, in, attrs, *out};
  return ref::eval_split(c);
}

}  // namespace sloth
