// Reference kernels: factories and elementwise ops (unary, binary, ternary).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/op_attrs.h"
#include "testing/reference/ref_internal.h"
#include "core/philox.h"

namespace sloth::ref {
namespace {

uint64_t as_u64(double x) { return static_cast<uint64_t>(static_cast<int64_t>(x)); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

absl::StatusOr<double> unary(OpId op, double x, DType in) {
  switch (op) {
    case OpId::kNeg: return -x;
    case OpId::kAbs: return std::fabs(x);
    case OpId::kExp: return std::exp(x);
    case OpId::kLog: return std::log(x);
    case OpId::kLog1p: return std::log1p(x);
    case OpId::kSqrt: return std::sqrt(x);
    case OpId::kRsqrt: return 1.0 / std::sqrt(x);
    case OpId::kSin: return std::sin(x);
    case OpId::kCos: return std::cos(x);
    case OpId::kTanh: return std::tanh(x);
    case OpId::kSigmoid: return sigmoid(x);
    case OpId::kRelu: return x > 0 ? x : (std::isnan(x) ? x : 0.0);
    case OpId::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case OpId::kSilu: return x * sigmoid(x);
    case OpId::kErf: return std::erf(x);
    case OpId::kSquare: return x * x;
    case OpId::kReciprocal: return 1.0 / x;
    case OpId::kSign:
      if (std::isnan(x)) return x;
      return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case OpId::kFloor: return std::floor(x);
    case OpId::kCeil: return std::ceil(x);
    case OpId::kRound: return std::nearbyint(x);  // default rounding mode: half to even
    case OpId::kTrunc: return std::trunc(x);
    case OpId::kLogicalNot: return x == 0 ? 1.0 : 0.0;
    case OpId::kCast: return x;
    default: break;
  }
  (void)in;
  return invalid("%s: not a unary op", op_name(op));
}

absl::StatusOr<double> binary(OpId op, double x, double y, DType t) {
  switch (op) {
    case OpId::kAdd: return x + y;
    case OpId::kSub: return x - y;
    case OpId::kMul: return x * y;
    case OpId::kDiv: return x / y;
    case OpId::kPow:
      if (!is_floating(t) && y < 0)  // at::native powi: 1, -1 or (truncated) 0
        return x == 1 ? 1.0 : x == -1 ? (std::fmod(y, 2.0) == 0 ? 1.0 : -1.0) : 0.0;
      return std::pow(x, y);
    case OpId::kMaximum:
      if (std::isnan(x) || std::isnan(y)) return std::nan("");
      return x > y ? x : y;
    case OpId::kMinimum:
      if (std::isnan(x) || std::isnan(y)) return std::nan("");
      return x < y ? x : y;
    case OpId::kRemainder: case OpId::kFmod: case OpId::kFloorDivide: {
      if (!is_floating(t) && y == 0) return 0.0;  // sloth's integer division by zero
      const double q = x / y;
      if (op == OpId::kFloorDivide) return std::floor(q);
      if (op == OpId::kFmod) return x - std::trunc(q) * y;
      return x - std::floor(q) * y;
    }
    case OpId::kEq: return x == y;
    case OpId::kNe: return x != y;
    case OpId::kLt: return x < y;
    case OpId::kLe: return x <= y;
    case OpId::kGt: return x > y;
    case OpId::kGe: return x >= y;
    case OpId::kLogicalAnd: return (x != 0) && (y != 0);
    case OpId::kLogicalOr: return (x != 0) || (y != 0);
    default: break;
  }
  return invalid("%s: not a binary op", op_name(op));
}

}  // namespace

absl::StatusOr<Values> eval_factory(const Ctx& c) {
  const int64_t n = numel(c.out.shape);
  const DType dt = c.out.dtype;
  Values v(n);
  switch (c.op) {
    case OpId::kFull:
      for (auto& x : v) x = c.in[0].v[0];
      return v;
    case OpId::kArange: {
      double start = c.in[0].v[0], step = c.in[1].v[0];
      for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
      return v;
    }
    case OpId::kLinspace: {
      double start = c.in[0].v[0], end = c.in[1].v[0];
      if (n == 1) { v[0] = start; return v; }
      double step = (end - start) / static_cast<double>(n - 1);
      for (int64_t i = 0; i < n; ++i)
        v[i] = i < n / 2 ? start + static_cast<double>(i) * step
                         : end - static_cast<double>(n - 1 - i) * step;
      return v;
    }
    case OpId::kEye: {
      if (c.out.shape.size() != 2)
        return invalid("eye: dims must be {n, m}, got %s", shape_str(c.out.shape));
      for (int64_t i = 0; i < n; ++i) {
        Index idx = unravel(i, c.out.shape);
        v[i] = idx[0] == idx[1] ? 1.0 : 0.0;
      }
      return v;
    }
    case OpId::kRand: case OpId::kRandn: case OpId::kRandint: {
      uint64_t seed = as_u64(c.in[0].v[0]), offset = as_u64(c.in[1].v[0]);
      const RandintAttrs r = RandintAttrs::of(c.a);
      for (int64_t i = 0; i < n; ++i) {
        uint64_t k = offset + static_cast<uint64_t>(i);
        v[i] = c.op == OpId::kRand    ? philox::uniform(seed, k, dt == DType::kFloat64)
             : c.op == OpId::kRandn   ? philox::normal(seed, k)
                                      : static_cast<double>(philox::integer(seed, k, r.low, r.high));
      }
      return v;
    }
    default:
      return invalid("%s: not a factory", op_name(c.op));
  }
}

absl::StatusOr<Values> eval_elementwise(const Ctx& c) {
  const Shape& os = c.out.shape;
  const int64_t n = numel(os);
  Values v(n);
  const auto cat = op_info(c.op).category;
  if (cat == OpCategory::Unary) {
    const RefTensor& x = c.in[0];
    for (int64_t i = 0; i < n; ++i) {
      auto r = unary(c.op, x.v[i], x.dtype);
      if (!r.ok()) return r.status();
      v[i] = *r;
    }
    return v;
  }
  if (cat == OpCategory::Binary) {
    // Both sides are converted to the computation type first: the result type, or for
    // comparisons and logical ops the type the rule compares in (attrs.dtype).
    const bool logical = c.op == OpId::kLogicalAnd || c.op == OpId::kLogicalOr;
    const DType t = op_info(c.op).facts.compare || logical ? c.a.dtype : c.out.dtype;
    for (int64_t i = 0; i < n; ++i) {
      Index idx = unravel(i, os);
      double x = ref_cast(bget(c.in[0], idx), t), y = ref_cast(bget(c.in[1], idx), t);
      auto r = binary(c.op, x, y, t);
      if (!r.ok()) return r.status();
      v[i] = *r;
    }
    return v;
  }
  // Ternary.
  const DType t = c.out.dtype;
  for (int64_t i = 0; i < n; ++i) {
    Index idx = unravel(i, os);
    if (c.op == OpId::kWhere) {
      v[i] = bget(c.in[0], idx) != 0 ? ref_cast(bget(c.in[1], idx), t)
                                     : ref_cast(bget(c.in[2], idx), t);
    } else if (c.op == OpId::kClamp) {
      double x = ref_cast(bget(c.in[0], idx), t), lo = ref_cast(bget(c.in[1], idx), t),
             hi = ref_cast(bget(c.in[2], idx), t);
      if (std::isnan(x) || std::isnan(lo) || std::isnan(hi)) {
        v[i] = std::nan("");
      } else {
        v[i] = std::min(std::max(x, lo), hi);  // lo > hi gives hi, as torch.clamp
      }
    } else {
      return invalid("%s: not a ternary op", op_name(c.op));
    }
  }
  return v;
}

}  // namespace sloth::ref
