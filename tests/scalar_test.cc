// sloth::Scalar: a number keeps the kind the user wrote, and factories and scalar operands
// follow PyTorch's dtype rules for it (expected values checked against torch 1.13).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/errors.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

using testing::error_of;

using I = std::vector<int64_t>;
using F = std::vector<float>;
using D = std::vector<double>;
using B = std::vector<bool>;

constexpr int64_t k2p60 = int64_t{1} << 60;

TEST(Scalar, KeepsTheKindWritten) {
  EXPECT_TRUE(Scalar(2).is_integral());
  EXPECT_TRUE(Scalar(int64_t{2}).is_integral());
  EXPECT_TRUE(Scalar(size_t{2}).is_integral());
  EXPECT_TRUE(Scalar(uint32_t{2}).is_integral());
  EXPECT_TRUE(Scalar(2.0).is_floating());
  EXPECT_TRUE(Scalar(2.5f).is_floating());
  EXPECT_TRUE(Scalar(true).is_boolean());
  EXPECT_FALSE(Scalar(true).is_integral());
  EXPECT_TRUE(Scalar(true).is_integral(/*include_bool=*/true));
  EXPECT_EQ(Scalar(3).type(), kInt64);
  EXPECT_EQ(Scalar(3.0).type(), kFloat64);
  EXPECT_EQ(Scalar(false).type(), kBool);
}

TEST(Scalar, Conversions) {
  EXPECT_EQ(Scalar(2.7).to<int64_t>(), 2);
  EXPECT_EQ(Scalar(-2.7).to<int64_t>(), -2);
  EXPECT_EQ(Scalar(7).to<double>(), 7.0);
  EXPECT_EQ(Scalar(true).to<int64_t>(), 1);
  EXPECT_EQ(Scalar(k2p60 + 1).to<int64_t>(), k2p60 + 1) << "int64 held exactly";
  EXPECT_FALSE(Scalar(k2p60 + 1).exact_in_double());
  EXPECT_TRUE(Scalar(int64_t{1} << 53).exact_in_double());
  EXPECT_TRUE(Scalar(1e300).exact_in_double());
  EXPECT_EQ(Scalar(2.5).converted_to(kInt64).to<int64_t>(), 2);
  EXPECT_TRUE(Scalar(2.5).converted_to(kBool).is_boolean());
  EXPECT_EQ(Scalar(2.5).to_string(), "2.5");
  EXPECT_EQ(Scalar(-3).to_string(), "-3");
  EXPECT_EQ(Scalar(true).to_string(), "true");
  EXPECT_ERROR_HAS(Scalar(std::numeric_limits<uint64_t>::max()), "larger than the largest int64");
}

TEST(Scalar, FitsAsCheckedConvert) {
  EXPECT_TRUE(Scalar(int64_t{1} << 40).fits(kInt64));
  EXPECT_FALSE(Scalar(int64_t{1} << 40).fits(kInt32));
  EXPECT_TRUE(Scalar(-2147483648.9).fits(kInt32)) << "truncates to int32's minimum";
  EXPECT_FALSE(Scalar(2147483648.0).fits(kInt32));
  EXPECT_FALSE(Scalar(1e30).fits(kInt64));
  EXPECT_FALSE(Scalar(std::numeric_limits<double>::quiet_NaN()).fits(kInt64));
  EXPECT_FALSE(Scalar(1e300).fits(kFloat32));
  EXPECT_TRUE(Scalar(std::numeric_limits<double>::infinity()).fits(kFloat32));
  EXPECT_TRUE(Scalar(1e300).fits(kFloat64));
  EXPECT_TRUE(Scalar(2.5).fits(kBool));
}

// ---- arange ------------------------------------------------------------------------------

TEST(ScalarArange, IntegerArgumentsGiveInt64) {
  Tensor a = arange(6);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(arange(0, 10, 3).to_vector<int64_t>(), (I{0, 3, 6, 9}));
  EXPECT_EQ(arange(-5, 5, 3).to_vector<int64_t>(), (I{-5, -2, 1, 4}));
  EXPECT_EQ(arange(5, -5, -3).to_vector<int64_t>(), (I{5, 2, -1, -4}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(true).dtype(), kInt64);
}

TEST(ScalarArange, AnyFloatingArgumentGivesTheDefaultFloat) {
  Tensor a = arange(6.0);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.to_vector<float>(), (F{0, 1, 2, 3, 4, 5}));
  Tensor q = arange(0, 1, 0.25);
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_EQ(q.to_vector<float>(), (F{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0.5, 3).to_vector<float>(), (F{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(arange(0, 3.0).dtype(), kFloat32);
}

TEST(ScalarArange, ExplicitDtypeWins) {
  Tensor d = arange(1, 4, kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(d.to_vector<double>(), (D{1, 2, 3}));
  Tensor i = arange(6.0, TensorOptions().dtype(kInt64));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (I{0, 1, 2, 3, 4, 5}));
  // Integer results: ATen truncates each argument to int64 first.
  EXPECT_EQ(arange(0.5, 3.7, 1, kInt64).to_vector<int64_t>(), (I{0, 1, 2}));
  // ...but sizes an int32 range from the arguments as doubles (torch gives 4 elements).
  Tensor i32 = arange(0, 3.5, 1, kInt32);
  EXPECT_EQ(i32.dtype(), kInt32);
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(ScalarArange, ExactBeyondTwoToThe53) {
  Tensor a = arange(k2p60, k2p60 + 3);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{k2p60, k2p60 + 1, k2p60 + 2}));
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(arange(big - 2, big).to_vector<int64_t>(), (I{big - 2, big - 1}));
  EXPECT_EQ(arange(-k2p60, -k2p60 - 7, -3).to_vector<int64_t>(), (I{-k2p60, -k2p60 - 3, -k2p60 - 6}));
}

TEST(ScalarArange, BadStepsAreClearErrors) {
  EXPECT_ERROR_HAS(arange(0, 10, 0), "arange: step must be nonzero");
  EXPECT_ERROR_HAS(arange(0.0, 1.0, 0.0), "arange: step must be nonzero");
  EXPECT_ERROR_HAS(arange(0, 5, -1),
                   "arange: upper bound and larger bound inconsistent with step sign (start 0, "
                   "end 5, step -1); use a positive step");
  EXPECT_ERROR_HAS(arange(5, 0), "inconsistent with step sign (start 5, end 0, step 1); use a negative step");
  EXPECT_ERROR_HAS(arange(-3), "inconsistent with step sign");
  EXPECT_ERROR_HAS(arange(0.0, std::numeric_limits<double>::infinity()), "arange: unsupported range 0 -> inf");
  EXPECT_ERROR_HAS(arange(0, 1e30, 1, kInt64), "arange: end (1e+30) cannot be converted to int64");
  // A step of 0.25 truncates to 0 for an int64 result (torch: "step must be nonzero").
  EXPECT_ERROR_HAS(arange(0, 1, 0.25, kInt64), "arange: step must be nonzero (got 0.25)");
  EXPECT_ERROR_HAS(arange(3, kBool), "arange: bool results are not supported");
  // Nothing was broken: the next call works.
  EXPECT_EQ(arange(2).to_vector<int64_t>(), (I{0, 1}));
}

// ---- full, full_like, zeros ------------------------------------------------------------------

TEST(ScalarFull, DtypeFromTheValueKind) {
  Tensor i = full({2}, 3);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (I{3, 3}));
  Tensor f = full({2}, 3.0);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (F{3, 3}));
  Tensor b = full({2}, true);
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.to_vector<bool>(), (B{true, true}));
  Tensor u = full({1}, size_t{7});
  EXPECT_EQ(u.dtype(), kInt64);
  // zeros/ones stay floating: their 0 and 1 are not the user's.
  EXPECT_EQ(zeros({2}).dtype(), kFloat32);
  EXPECT_EQ(ones({2}).dtype(), kFloat32);
  EXPECT_EQ(empty({2}).dtype(), kFloat32);
}

TEST(ScalarFull, ExplicitDtypeConvertsTheValue) {
  EXPECT_EQ(full({2}, 2.7, kInt64).to_vector<int64_t>(), (I{2, 2}));
  EXPECT_EQ(full({2}, -1, kBool).to_vector<bool>(), (B{true, true}));
  EXPECT_EQ(full({2}, true, kFloat32).to_vector<float>(), (F{1, 1}));
  EXPECT_EQ(full({2}, 3, kFloat64).dtype(), kFloat64);
  EXPECT_ERROR_HAS(full({2}, int64_t{1} << 40, kInt32),
                   "full: value 1099511627776 cannot be converted to int32 without overflow");
  EXPECT_ERROR_HAS(full({2}, 1e300), "full: value 1e+300 cannot be converted to float32");
}

TEST(ScalarFull, ExactBeyondTwoToThe53) {
  Tensor t = full({2, 2}, k2p60 + 1);
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.to_vector<int64_t>(), (I(4, k2p60 + 1)));
}

TEST(ScalarFull, FullLikeTakesTheTensorsDtype) {
  Tensor x = arange(3);
  Tensor a = full_like(x, 2.5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{2, 2, 2}));
  Tensor b = full_like(ones({2}), 3);
  EXPECT_EQ(b.dtype(), kFloat32);
  EXPECT_EQ(b.to_vector<float>(), (F{3, 3}));
}

// ---- fill_ and masked_fill --------------------------------------------------------------------

TEST(ScalarFill, StoresTheValueAsTheTensorsDtype) {
  Tensor a = zeros({2}, kInt64);
  a.fill_(2.5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{2, 2})) << "truncates toward zero, as torch";
  a.fill_(-2.5);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{-2, -2}));
  a.fill_(true);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{1, 1}));
  Tensor b = zeros({2}, kBool);
  b.fill_(2.5);
  EXPECT_EQ(b.to_vector<bool>(), (B{true, true}));
  Tensor f = zeros({2});
  f.fill_(3);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (F{3, 3}));
}

TEST(ScalarFill, ExactBeyondTwoToThe53AndThroughViews) {
  Tensor a = zeros({2, 2}, kInt64);
  a[1].fill_(k2p60 + 1);
  EXPECT_EQ(a.to_vector<int64_t>(), (I{0, 0, k2p60 + 1, k2p60 + 1}));
  EXPECT_EQ(a.version(), 1);
}

TEST(ScalarFill, OverflowIsAnErrorAndChangesNothing) {
  Tensor a = zeros({2}, kInt32);
  EXPECT_ERROR_HAS(a.fill_(int64_t{1} << 40), "fill_: value 1099511627776 cannot be converted to int32");
  EXPECT_ERROR_HAS(zeros({2}, kInt64).fill_(1e30), "fill_: value 1e+30 cannot be converted to int64");
  EXPECT_EQ(a.version(), 0);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
}

TEST(ScalarMaskedFill, ValueConvertedToTheTensorsDtype) {
  Tensor mask = from_vector<bool>({true, false, true}, {3});
  Tensor x = zeros({3}, kInt64);
  Tensor r = x.masked_fill(mask, 2.5);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.to_vector<int64_t>(), (I{2, 0, 2}));
  EXPECT_EQ(masked_fill(x, mask, true).to_vector<int64_t>(), (I{1, 0, 1}));
  // Exact above float32's 2^24 (no detour through a float32 where()).
  EXPECT_EQ(masked_fill(x, mask, 16777217.0).to_vector<int64_t>(), (I{16777217, 0, 16777217}));
  Tensor f = zeros({3});
  EXPECT_EQ(masked_fill(f, mask, 1).dtype(), kFloat32);
  x.masked_fill_(mask, 7);
  EXPECT_EQ(x.to_vector<int64_t>(), (I{7, 0, 7}));
  EXPECT_ERROR_HAS(zeros({3}, kInt32).masked_fill(mask, int64_t{1} << 40),
                   "masked_fill: value 1099511627776 cannot be converted to int32");
  x.masked_fill_(mask, k2p60 + 1);  // int64 beyond 2^53 (a value held exactly by Scalar)
  EXPECT_EQ(x.to_vector<int64_t>(), (I{k2p60 + 1, 0, k2p60 + 1}));
  EXPECT_EQ(masked_fill(x, mask.logical_not(), k2p60 + 3).to_vector<int64_t>(),
            (I{k2p60 + 1, k2p60 + 3, k2p60 + 1}));
}

// ---- promotion of scalar operands -----------------------------------------------------------

TEST(ScalarPromotion, IntegersKeepIntegerTensorsIntegral) {
  Tensor x = arange(3);
  EXPECT_EQ((x * 2).dtype(), kInt64);
  EXPECT_EQ((x * 2).to_vector<int64_t>(), (I{0, 2, 4}));
  EXPECT_EQ((2 * x).to_vector<int64_t>(), (I{0, 2, 4}));
  EXPECT_EQ((x + size_t{1}).dtype(), kInt64);
  EXPECT_EQ((x - 1).to_vector<int64_t>(), (I{-1, 0, 1}));
  Tensor i32 = arange(3, kInt32);
  EXPECT_EQ((i32 * 2).dtype(), kInt32) << "a number never widens within its category";
  EXPECT_EQ((x / 2).dtype(), kFloat32) << "true division";
  EXPECT_EQ((x / 2).to_vector<float>(), (F{0, 0.5f, 1}));
  EXPECT_EQ(pow(x, 2).dtype(), kInt64);
  EXPECT_EQ(pow(x, 2).to_vector<int64_t>(), (I{0, 1, 4}));
}

TEST(ScalarPromotion, FloatingNumbersMakeIntegerTensorsFloat) {
  Tensor x = arange(3);
  Tensor y = x * 2.5;
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(y.to_vector<float>(), (F{0, 2.5f, 5}));
  // The kind decides, not the value: 1.0 is floating (a learning rate that reaches 1.0 does
  // not turn the result into an integer).
  EXPECT_EQ((x * 1.0).dtype(), kFloat32);
  EXPECT_EQ((2.0 * x).dtype(), kFloat32);
  EXPECT_EQ((x + 0.5f).dtype(), kFloat32);
  EXPECT_EQ(pow(x, 2.0).dtype(), kFloat32);
  EXPECT_EQ(where(x > 0, x, 2.0).dtype(), kFloat32);
  EXPECT_EQ(where(x > 0, x, 2).dtype(), kInt64);
}

// A number exponent's gradient x^(y - 1) takes y - 1 in the result's dtype: wrapped minus
// wrapped promotes to the default float32, which put float64 gradients off by 1e-7.
TEST(ScalarPromotion, NumberExponentGradientIsExactInFloat64) {
  Tensor x = tensor({2.0, 5.0}, {2}, kFloat64).requires_grad_();
  pow(x, 1.0 / 3).sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    const double v = i == 0 ? 2.0 : 5.0, want = std::pow(v, 1.0 / 3 - 1) / 3;
    EXPECT_NEAR(g[i], want, 1e-15 * want) << "x = " << v;
  }
}

TEST(ScalarPromotion, NumbersNeverWidenFloatTensors) {
  Tensor f = ones({2});
  EXPECT_EQ((f * 2.0).dtype(), kFloat32);
  EXPECT_EQ((f + 1).dtype(), kFloat32);
  EXPECT_EQ((f * 1e10).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kFloat64) * 2.0).dtype(), kFloat64);
  EXPECT_EQ((f * 2.0).to_vector<float>(), (F{2, 2}));
}

TEST(ScalarPromotion, Bools) {
  Tensor b = full({2}, true);
  EXPECT_EQ((b * 2).dtype(), kInt64);
  EXPECT_EQ((b * 2).to_vector<int64_t>(), (I{2, 2}));
  EXPECT_EQ((b * true).dtype(), kBool);
  EXPECT_EQ((b * 2.5).dtype(), kFloat32);
  EXPECT_EQ((arange(2) + true).to_vector<int64_t>(), (I{1, 2}));
}

TEST(ScalarPromotion, ComparisonsAndClamp) {
  Tensor x = arange(5);
  EXPECT_EQ((x == 2).to_vector<bool>(), (B{false, false, true, false, false}));
  EXPECT_EQ((x > 2.5).to_vector<bool>(), (B{false, false, false, true, true}));
  EXPECT_EQ((1 < x).to_vector<bool>(), (B{false, false, true, true, true}));
  Tensor c = clamp(x, 1, 3);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(c.to_vector<int64_t>(), (I{1, 1, 2, 3, 3}));
  Tensor cf = x.clamp(1.5, 3);
  EXPECT_EQ(cf.dtype(), kFloat32);
  EXPECT_EQ(cf.to_vector<float>(), (F{1.5f, 1.5f, 2, 3, 3}));
}

TEST(ScalarPromotion, InPlaceKeepsSelfsDtypeOrRefuses) {
  Tensor x = arange(3);
  x.add_(1);
  EXPECT_EQ(x.dtype(), kInt64);
  EXPECT_EQ(x.to_vector<int64_t>(), (I{1, 2, 3}));
  x.mul_(2).sub_(1);
  EXPECT_EQ(x.to_vector<int64_t>(), (I{1, 3, 5}));
  EXPECT_ERROR_HAS(x.add_(1.5), "add_: result type float32 can't be cast to the desired output type int64");
  EXPECT_ERROR_HAS(x.mul_(1.5), "mul_: result type float32 can't be cast");
  EXPECT_ERROR_HAS(x.clamp_(0, 2.5), "clamp_: result type float32 can't be cast");
  EXPECT_EQ(x.to_vector<int64_t>(), (I{1, 3, 5})) << "nothing changed";
  Tensor f = zeros({2});
  f.add_(1).mul_(3).div_(2);
  EXPECT_EQ(f.to_vector<float>(), (F{1.5f, 1.5f}));
}

TEST(ScalarPromotion, Alpha) {
  Tensor x = arange(3);
  Tensor r = add(x, x, 2);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.to_vector<int64_t>(), (I{0, 3, 6}));
  EXPECT_EQ(sub(x, x, 2).to_vector<int64_t>(), (I{0, -1, -2}));
  EXPECT_ERROR_HAS(add(x, x, 2.5),
                   "add: for integral input tensors (int64, int64), alpha must not be a floating point number");
  EXPECT_ERROR_HAS(x.add_(x, 0.5), "add_: for integral input tensors");
  EXPECT_ERROR_HAS(add(x, x, true), "add: a bool alpha (true) is only supported for bool tensors");
  Tensor f = add(ones({3}), x, 2.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (F{1, 3.5f, 6}));
  Tensor g = ones({3});
  g.add_(x, 2);
  EXPECT_EQ(g.to_vector<float>(), (F{1, 3, 5}));
}

// A number beside a tensor that records no history becomes an operand without a tensor of its
// own (call_op_number); beside a view, or a tensor autograd tracks, it is a wrapped tensor as
// before. Both paths give the same values, dtypes, errors, graph and gradients.
TEST(ScalarOperand, EveryPathGivesTheSameResult) {
  Tensor base = tensor({1, 2, 3, 4}, {4});
  Tensor view = tensor({0, 1, 2, 3, 4}, {5}).slice(0, 1, 5);    // a view: the wrapped path
  Tensor tracked = tensor({1, 2, 3, 4}, {4}).requires_grad_();  // autograd: the wrapped path
  for (const Tensor& x : {base, view, tracked}) {
    EXPECT_EQ((x * 2.0).to_vector<float>(), (F{2, 4, 6, 8}));
    EXPECT_EQ((x - 1).to_vector<float>(), (F{0, 1, 2, 3}));
    EXPECT_EQ((10 - x).to_vector<float>(), (F{9, 8, 7, 6})) << "the number first";
    EXPECT_EQ((2.0 / x).to_vector<float>(), (F{2, 1, 2.0f / 3, 0.5f}));
    EXPECT_EQ((x > 2.5).to_vector<bool>(), (B{false, false, true, true}));
    EXPECT_EQ((2 >= x).to_vector<bool>(), (B{true, true, false, false}));
    EXPECT_EQ((x + true).to_vector<float>(), (F{2, 3, 4, 5}));
  }
  {
    NoGradGuard no_grad;  // a tracked tensor records no history here: the direct path
    Tensor y = tracked * 3.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.to_vector<float>(), (F{3, 6, 9, 12}));
  }
  Tensor z = tracked * 3.0;
  EXPECT_TRUE(z.requires_grad());
  (z * 0.5).sum().backward();
  EXPECT_EQ(tracked.grad().to_vector<float>(), (F{1.5f, 1.5f, 1.5f, 1.5f}));
  // Promotion sees the number's kind on both paths.
  Tensor i = arange(4);
  EXPECT_EQ((i * 2).dtype(), kInt64);
  EXPECT_EQ((2 * i.slice(0, 0, 4)).dtype(), kInt64);
  EXPECT_EQ((i * 2.0).dtype(), kFloat32);
  EXPECT_EQ((1 / i.slice(0, 1, 4)).to_vector<float>(), (F{1, 0.5f, 1.0f / 3}));
  EXPECT_EQ((ones({2}, kFloat64) * 0.1).to_vector<double>(), (D{0.1, 0.1}));
  // Errors name the op and change nothing, on both paths.
  Tensor b = full({2}, true);
  EXPECT_ERROR_HAS(b - true, "sub: subtracting two bool tensors is not supported");
  EXPECT_ERROR_HAS(true - b.slice(0, 0, 2), "sub: subtracting two bool tensors is not supported");
  EXPECT_ERROR_HAS(Tensor() * 2.0, "mul: operand 0 is an undefined tensor");
  EXPECT_ERROR_HAS(2.0 * Tensor(), "mul: operand 1 is an undefined tensor");
  // The same graph either way: the number is a float64 scalar leaf (data, never a constant),
  // so only the dumped scalar values differ.
  auto structure = [](const Tensor& t) {
    std::string d = dump_ir({t}), out;
    for (size_t at = 0, end; at < d.size(); at = end + 1) {
      end = d.find('\n', at);
      if (end == std::string::npos) end = d.size();
      const std::string line = d.substr(at, end - at);
      if (line.find(": float64 = ") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  Tensor p = ones({3});
  Tensor q = ones({3}).requires_grad_();
  EXPECT_EQ(structure(p * 2), structure(p * 7.5));
  EXPECT_EQ(structure(p * 2.0), structure((q * 2.0).detach()));
  EXPECT_EQ(structure(3 - p), structure((3 - q).detach()));
  EXPECT_NE(structure(p * 2.0), structure(2.0 * p)) << "the operands' order is kept";
}

// remainder (Python's %), fmod and floor_divide against PyTorch 1.13's values.
TEST(Modulo, MatchesPyTorch) {
  using I = std::vector<int64_t>;
  using D = std::vector<double>;
  const Tensor a = from_vector(I{5, -5}, {2}), three = from_vector(I{3, 3}, {2});
  EXPECT_EQ((a % three).to_vector<int64_t>(), (I{2, 1}));
  EXPECT_EQ(fmod(a, 3).to_vector<int64_t>(), (I{2, -2}));
  EXPECT_EQ(floor_divide(a, 3).to_vector<int64_t>(), (I{1, -2}));
  EXPECT_EQ(remainder(3, from_vector(I{2, -2}, {2})).to_vector<int64_t>(), (I{1, -1}));
  const Tensor f = tensor({5.5, -5.5}, {2}, kFloat64);
  EXPECT_EQ((f % -2).to_vector<double>(), (D{-0.5, -1.5}));
  EXPECT_EQ(fmod(f, -2).to_vector<double>(), (D{1.5, -1.5}));
  EXPECT_EQ((a % 2.5).dtype(), kFloat32) << "a float number makes the result float";
  // floor of the exact quotient: 5.0 // 0.1 is 49 (5.0 / 0.1 rounds to 50).
  EXPECT_EQ(floor_divide(tensor({5.0}, {1}), 0.1).item(), 49);
  const std::vector<float> inf = floor_divide(tensor({5.0, -5.0}, {2}), 0.0).to_vector<float>();
  EXPECT_TRUE(std::isinf(inf[0]) && inf[0] > 0 && std::isinf(inf[1]) && inf[1] < 0);
  // Integer division by zero is 0 here (PyTorch raises); INT64_MIN // -1 wraps (PyTorch's
  // process dies of SIGFPE).
  EXPECT_EQ(remainder(a, 0).to_vector<int64_t>(), (I{0, 0}));
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(floor_divide(from_vector(I{lo}, {1}), -1).to_vector<int64_t>(), (I{lo}));
  EXPECT_EQ(remainder(from_vector(I{lo}, {1}), -1).to_vector<int64_t>(), (I{0}));
  // d/dy remainder = -floor(x / y), d/dy fmod = -trunc(x / y).
  Tensor x = tensor({5.5, -5.5}, {2}, kFloat64).requires_grad_();
  Tensor y = tensor({2.0, 2.0}, {2}, kFloat64).requires_grad_();
  remainder(x, y).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (D{1, 1}));
  EXPECT_EQ(y.grad().to_vector<double>(), (D{-2, 3}));
  Tensor x2 = tensor({5.5, -5.5}, {2}, kFloat64).requires_grad_();
  Tensor y2 = tensor({2.0, 2.0}, {2}, kFloat64).requires_grad_();
  fmod(x2, y2).sum().backward();
  EXPECT_EQ(y2.grad().to_vector<double>(), (D{-2, 2}));
  EXPECT_ERROR_HAS(remainder(ones({2}, kBool), ones({2}, kBool)), "not implemented for bool");
  EXPECT_EQ(trunc(tensor({-2.5, 2.5}, {2})).to_vector<float>(), (std::vector<float>{-2, 2}));
}


// item() reads the one element where it lies: a view at an offset, any dtype, a pending value,
// a number, an exact int64 beyond 2^53; anything else is an error that names the shape.
TEST(ScalarItem, ReadsTheElementOfViewsAndEveryDtype) {
  Tensor x = arange(0, 12, TensorOptions(kFloat32)).reshape({3, 4});
  mark_step();
  EXPECT_EQ(x[2][1].item(), 9.0);
  EXPECT_EQ(x.t()[3][1].item(), 7.0);               // a strided view
  EXPECT_EQ(x.narrow(1, 2, 1)[1].item(), 6.0);      // [1] at offset 6
  EXPECT_EQ((x * 2)[1][3].item(), 14.0);            // pending: synced first
  EXPECT_EQ(full({}, int64_t{9007199254740993}).item<int64_t>(), int64_t{9007199254740993});
  EXPECT_EQ(full({1}, 2.75).item<int>(), 2);  // floating: converted as static_cast does
  EXPECT_EQ(full({1, 1}, int64_t{-5}).item(), -5.0);
  EXPECT_EQ(full({}, true).item(), 1.0);
  EXPECT_EQ(full({1}, 2.5, TensorOptions(kFloat64)).item(), 2.5);
  EXPECT_EQ((x[0][1] > 0).item(), 1.0);             // bool
  EXPECT_EQ(full({1}, uint8_t{200}, TensorOptions(kUInt8)).item(), 200.0);
  const std::string e = error_of([&] { x[0].item(); });
  EXPECT_NE(e.find("item: only a tensor with one element"), std::string::npos) << e;
  EXPECT_NE(e.find("[4]"), std::string::npos) << e;
}

}  // namespace
}  // namespace sloth
