// op_samples: the dispatcher, factories, elementwise and in-place ops.
#include "tests/support/op_samples.h"

#include "tests/support/op_samples_util.h"

namespace sloth {
namespace samples {

void factory_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kFull:
      b.add("f32_2x3", {S(1.5)}, Attrs{.dims = {2, 3}, .dtype = f32});
      b.add("f64_empty", {S(-2, i64)}, Attrs{.dims = {0, 3}, .dtype = f64});
      b.add("i64_0dim", {S(3.7)}, Attrs{.dims = {}, .dtype = i64});
      b.add("bool", {S(1, b8)}, Attrs{.dims = {2, 2}, .dtype = b8});
      return;
    case OpId::kArange:
      b.add("f32", {S(0.5), S(0.25)}, Attrs{.dims = {5}, .dtype = f32});
      b.add("i64", {S(-3, i64), S(2, i64)}, Attrs{.dims = {4}, .dtype = i64});
      b.add("f64_negative_step", {S(1.0), S(-0.3)}, Attrs{.dims = {7}, .dtype = f64});
      b.add("empty", {S(0), S(1)}, Attrs{.dims = {0}, .dtype = f32});
      return;
    case OpId::kLinspace:
      b.add("f32_5", {S(0), S(1)}, Attrs{.dims = {5}, .dtype = f32});
      b.add("f64_6", {S(-1), S(2.5)}, Attrs{.dims = {6}, .dtype = f64});
      b.add("one", {S(2), S(3)}, Attrs{.dims = {1}, .dtype = f32});
      b.add("empty", {S(0), S(1)}, Attrs{.dims = {0}, .dtype = f32});
      return;
    case OpId::kEye:
      b.add("3x3", {}, Attrs{.dims = {3, 3}, .dtype = f32});
      b.add("2x4_f64", {}, Attrs{.dims = {2, 4}, .dtype = f64});
      b.add("4x2_i64", {}, Attrs{.dims = {4, 2}, .dtype = i64});
      b.add("empty", {}, Attrs{.dims = {0, 2}, .dtype = f32});
      return;
    case OpId::kRand: case OpId::kRandn:
      b.add("f32", {S(42, i64), S(0, i64)}, Attrs{.dims = {2, 3}, .dtype = f32});
      b.add("f64_offset", {S(7, i64), S(100, i64)}, Attrs{.dims = {4}, .dtype = f64});
      b.add("0dim", {S(1, i64), S(5, i64)}, Attrs{.dims = {}, .dtype = f32});
      b.add("empty", {S(1, i64), S(0, i64)}, Attrs{.dims = {0, 3}, .dtype = f32});
      return;
    case OpId::kRandint:
      b.add("i64", {S(3, i64), S(0, i64)}, RandintAttrs{.shape = {2, 4}, .low = -3, .high = 5, .dtype = i64});
      b.add("f32_binary", {S(9, i64), S(17, i64)}, RandintAttrs{.shape = {6}, .low = 0, .high = 2, .dtype = f32});
      b.add("0dim", {S(2, i64), S(0, i64)}, RandintAttrs{.shape = {}, .low = 10, .high = 20, .dtype = i64});
      return;
    default:
      return;
  }
}

namespace {

bool is_compare(OpId op) { return op_info(op).facts.compare; }

void unary(Builder& b, OpId op) {
  // Domains: positive for log/sqrt/rsqrt/log1p; off the 0.5-grid for floor/ceil/round.
  const bool positive = op == OpId::kLog || op == OpId::kLog1p || op == OpId::kSqrt ||
                        op == OpId::kRsqrt;
  const bool grid = op == OpId::kFloor || op == OpId::kCeil || op == OpId::kRound ||
                    op == OpId::kTrunc;
  auto gen = [&](Shape s, DType d) {
    RefTensor t = positive ? b.P(std::move(s), d) : b.T(std::move(s), d);
    if (grid && is_floating(d)) t = off_grid(b.R(t.shape, -2.4, 2.4, d));
    return t;
  };
  if (op == OpId::kLogicalNot) {
    b.add("bool_noncontig", {b.T({3, 4}, b8)}, {}, {0});
    b.add("f32_with_zeros", {V({2, 3}, {0, 1.5, -2, 0, 0.25, 3})});
    b.add("i64_0dim", {S(0, i64)});
    b.add("empty", {b.T({0, 3}, b8)});
    return;
  }
  if (op == OpId::kCast) {
    b.add("f32_to_f64_noncontig", {b.T({3, 4})}, Attrs{.dtype = f64}, {0});
    b.add("f64_to_i64", {b.R({2, 3}, -3.9, 3.9, f64)}, Attrs{.dtype = i64});
    b.add("i64_to_f32", {b.T({4}, i64)}, Attrs{.dtype = f32});
    b.add("bool_to_f32", {b.T({2, 2}, b8)}, Attrs{.dtype = f32});
    b.add("f32_to_bool", {V({4}, {0, 1.5, -0.25, 0})}, Attrs{.dtype = b8});
    b.add("f64_to_f32_0dim", {S(1.0 / 3.0)}, Attrs{.dtype = f32});
    b.add("empty", {b.T({0, 2})}, Attrs{.dtype = f64});
    return;
  }
  b.add("f32_noncontig", {gen({3, 4}, f32)}, {}, {0});
  b.add("f64", {gen({2, 3}, f64)});
  b.add("f64_0dim", {gen({}, f64)});
  b.add("empty", {gen({0, 3}, f32)});
  b.add("i64", {gen({5}, i64)});  // the float ops compute in float32
}

void binary(Builder& b, OpId op) {
  // Right-hand side: non-zero for div, small non-negative ints as exponents for pow.
  const bool pow = op == OpId::kPow;
  auto lhs = [&](Shape s, DType d) { return pow ? b.P(std::move(s), d) : b.T(std::move(s), d); };
  auto rhs = [&](Shape s, DType d) {
    if (pow && !is_floating(d)) return b.Idx(std::move(s), 4);
    return b.T(std::move(s), d);
  };
  if (op == OpId::kLogicalAnd || op == OpId::kLogicalOr) {
    b.add("bool_broadcast", {b.T({2, 3}, b8), b.T({3}, b8)});
    b.add("bool_noncontig", {b.T({3, 4}, b8), b.T({3, 4}, b8)}, {}, {0, 1});
    b.add("f32_i64_zeros", {V({2, 2}, {0, 1.5, -2, 0}), V({2}, {3, 0}, i64)});
    b.add("0dim", {S(1, b8), b.T({4}, b8)});
    b.add("empty", {b.T({0, 3}, b8), b.T({3}, b8)});
    return;
  }
  if (is_compare(op)) {
    RefTensor a = b.T({2, 3});
    RefTensor c = b.T({2, 3});
    c.v[0] = a.v[0];  // some equal pairs
    c.v[4] = a.v[4];
    b.add("f32_some_equal", {a, c});
    b.add("broadcast_noncontig", {b.T({3, 4}), b.T({4})}, {}, {0});
    b.add("i64_vs_f32", {V({2, 2}, {1, 2, 3, 4}, i64), V({2}, {2, 3.5})});
    b.add("f64_0dim", {b.T({3}, f64), S(0.5)});
    b.add("bool", {V({4}, {0, 1, 0, 1}, b8), V({4}, {0, 0, 1, 1}, b8)});
    b.add("empty", {b.T({0, 3}), b.T({3})});
    return;
  }
  if (op == OpId::kRemainder || op == OpId::kFmod || op == OpId::kFloorDivide) {
    // Divisors away from 0 and quotients away from integers (the results jump there), both
    // signs of each operand; integers with every sign pair and a zero divisor.
    b.add("f32_signs_broadcast",
          {V({2, 3}, {3.3, -2.2, 0.45, -4.1, 1.05, 5.2}), V({3}, {1.3, -0.7, 2.1})});
    b.add("f64_noncontig", {V({3, 2}, {7.25, -7.25, 2.6, -0.3, 4.4, -9.1}, f64),
                            V({3, 2}, {2.0, 2.0, -1.1, 0.8, -3.0, -4.0}, f64)}, {}, {0, 1});
    b.add("f32_by_0dim_f64", {V({4}, {5.5, -5.5, 0.3, -2.75}), S(-2.0)});
    b.add("i64_signs", {V({2, 4}, {7, -7, 7, -7, 0, 9, -9, 6}, i64),
                        V({4}, {3, 3, -3, -3}, i64)});
    b.add("i64_by_zero", {V({3}, {5, -5, 0}, i64), V({3}, {0, 0, 0}, i64)});
    b.add("i32", {V({4}, {9, -9, 9, -9}, DType::kInt32), V({4}, {4, 4, -4, -4}, DType::kInt32)});
    b.add("empty", {b.T({0, 3}), V({3}, {1.5, -2, 3})});
    return;
  }
  b.add("broadcast", {lhs({2, 3}, f32), rhs({3}, f32)});
  b.add("broadcast_both_f64", {lhs({3, 1}, f64), rhs({1, 4}, f64)});
  b.add("noncontig", {lhs({3, 4}, f32), rhs({3, 4}, f32)}, {}, {0, 1});
  b.add("mixed_f32_f64", {lhs({2, 3}, f32), rhs({2, 3}, f64)});
  b.add("f64_0dim_keeps_f32", {lhs({2, 2}, f32), rhs({}, f64)});
  b.add("0dim_0dim", {lhs({}, f64), rhs({}, f64)});
  b.add("empty", {lhs({0, 3}, f32), rhs({3}, f32)});
  b.add("i64", {lhs({2, 3}, i64), rhs({3}, i64)});
  b.add("i64_f32", {lhs({2, 3}, i64), rhs({3}, f32)});
  if (op == OpId::kAdd || op == OpId::kMul || op == OpId::kMaximum || op == OpId::kMinimum)
    b.add("bool", {b.T({2, 3}, b8), b.T({3}, b8)});
}

}  // namespace

void elementwise_samples(Builder& b, OpId op) {
  switch (op_info(op).category) {
    case OpCategory::Unary: unary(b, op); return;
    case OpCategory::Binary: binary(b, op); return;
    default: break;
  }
  if (op == OpId::kWhere) {
    b.add("promote_f32_f64", {b.T({2, 3}, b8), b.T({2, 3}), b.T({3}, f64)});
    b.add("noncontig_0dim", {b.T({3, 4}, b8), b.T({3, 4}), S(0.5)}, {}, {0, 1});
    b.add("cond_broadcast", {b.T({3, 1}, b8), b.T({1, 4}, f64), b.T({3, 4}, f64)});
    b.add("i64", {b.T({4}, b8), b.T({4}, i64), b.T({4}, i64)});
    b.add("empty", {b.T({0, 3}, b8), b.T({3}), b.T({0, 3})});
    return;
  }
  if (op == OpId::kClamp) {
    b.add("scalar_bounds_noncontig", {away(b.T({3, 4}), {-0.5, 0.7}), S(-0.5), S(0.7)}, {}, {0});
    RefTensor lo = V({3}, {-1.0, -0.3, -2.5}, f64), hi = V({3}, {1.1, 0.4, 2.5}, f64);
    b.add("tensor_bounds_f64", {away(b.T({2, 3}, f64), {-1.0, -0.3, 1.1, 0.4}), lo, hi});
    b.add("i64", {b.T({2, 3}, i64), S(-1, i64), S(2, i64)});
    b.add("0dim", {S(1.3), S(-1), S(1)});
    b.add("empty", {b.T({0, 3}), S(-1), S(1)});
    return;
  }
}

void inplace_samples(Builder& b, OpId op) {
  switch (op) {
    case OpId::kCopy_:
      b.add("broadcast_cast_noncontig", {b.T({3, 4}), b.T({4}, f64)}, {}, {0});
      b.add("f32_into_i64", {b.T({2, 3}, i64), b.R({2, 3}, -3.9, 3.9)});
      b.add("0dim_src", {b.T({2, 2}, f64), S(2.5)});
      b.add("empty", {b.T({0, 3}), b.T({0, 3})});
      return;
    case OpId::kFill_:
      b.add("f32_noncontig", {b.T({3, 4}), S(2.5)}, {}, {0});
      b.add("i64_truncates", {b.T({2, 3}, i64), S(3.7)});
      b.add("bool", {b.T({4}, b8), S(1, b8)});
      b.add("0dim", {S(1.0), S(-4)});
      return;
    case OpId::kZero_:
      b.add("f32_noncontig", {b.T({3, 4})}, {}, {0});
      b.add("i64", {b.T({2, 3}, i64)});
      b.add("0dim_f64", {S(2.0)});
      b.add("empty", {b.T({0, 3})});
      return;
    case OpId::kAdd_: case OpId::kSub_: case OpId::kMul_: case OpId::kDiv_:
      b.add("broadcast_noncontig", {b.T({3, 4}), b.T({4})}, {}, {0});
      b.add("f32_self_f64_other", {b.T({2, 3}), b.T({2, 3}, f64)});
      b.add("0dim", {S(1.5), S(-0.75)});
      b.add("empty", {b.T({0, 3}, f64), b.T({3}, f64)});
      if (op != OpId::kDiv_) b.add("i64", {b.T({2, 3}, i64), b.T({3}, i64)});
      return;
    case OpId::kClamp_:
      b.add("noncontig", {away(b.T({3, 4}), {-0.5, 0.7}), S(-0.5), S(0.7)}, {}, {0});
      b.add("f64_tensor_bounds", {away(b.T({2, 3}, f64), {-1.0, -0.3, 1.0}), V({3}, {-1.0, -0.3, -2.5}, f64), S(1)});
      b.add("i64", {b.T({2, 3}, i64), S(-1, i64), S(2, i64)});
      return;
    case OpId::kRelu_:
      b.add("noncontig", {b.T({3, 4})}, {}, {0});
      b.add("i64", {b.T({5}, i64)});
      b.add("0dim_f64", {S(-1.5)});
      return;
    default:
      return;
  }
}

}  // namespace samples

std::vector<OpSample> op_samples(OpId op) {
  samples::Builder b(op);
  switch (op_info(op).category) {
    case OpCategory::Leaf: break;
    case OpCategory::Factory: samples::factory_samples(b, op); break;
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
      samples::elementwise_samples(b, op);
      break;
    case OpCategory::Reduce: samples::reduce_samples(b, op); break;
    case OpCategory::View: case OpCategory::Scatter: samples::view_samples(b, op); break;
    case OpCategory::Kernel: samples::kernel_samples(b, op); break;
    case OpCategory::Inplace:
      if (op == OpId::kMaskedFill_ || op == OpId::kIndexPut_) samples::index_samples(b, op);
      else samples::inplace_samples(b, op);
      break;
    case OpCategory::Composite:
      switch (op) {
        case OpId::kMean: case OpId::kVar: case OpId::kStd: case OpId::kLogsumexp:
          samples::reduce_samples(b, op);
          break;
        // ---- convolution and pooling ----
        case OpId::kConv1d: case OpId::kConv2d: case OpId::kConvTranspose2d:
        case OpId::kMaxPool2d: case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d:
          samples::conv_samples(b, op);
          break;
        case OpId::kTril: case OpId::kTriu:  // attention and sequence ops
          samples::kernel_samples(b, op);
          break;
        default: samples::index_samples(b, op);
      }
      break;
    default: samples::index_samples(b, op); break;  // Matmul, Index, Shape
  }
  return std::move(b.out);
}

}  // namespace sloth
