// kUInt8 (kByte) end to end with PyTorch 1.13's semantics: wrapping arithmetic, the promotion
// table, casts, reductions, comparisons, indexing/cat/views, the image normalize path, and the
// errors PyTorch gives (each leaves the tensors unchanged). Every expected value below was
// printed by torch 1.13 (e.g. torch.tensor([250, 3, 128, 0], dtype=torch.uint8) + 10); the
// same programs run through the tile interpreter, the run-time compiled kernels and the
// float64 reference kernels.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/jit.h"
#include "core/settings.h"
#include "gtest/gtest.h"
#include "sloth/sloth.h"
#include "testing/reference/reference.h"
#include "tests/support/errors.h"

namespace sloth {
namespace {

using U = std::vector<uint8_t>;

Tensor A() { return from_vector(U{250, 3, 128, 0}, {4}); }
Tensor B() { return from_vector(U{10, 5, 128, 1}, {4}); }
U bytes(const Tensor& t) {
  EXPECT_EQ(t.dtype(), kUInt8);
  return t.to_vector<uint8_t>();
}

TEST(UInt8, DTypeBasics) {
  EXPECT_EQ(kByte, kUInt8);
  EXPECT_EQ(dtype_size(kUInt8), 1u);
  EXPECT_STREQ(dtype_name(kUInt8), "uint8");
  EXPECT_TRUE(is_integral(kUInt8));
  EXPECT_FALSE(is_floating(kUInt8));
  EXPECT_EQ(A().dtype(), kUInt8);
  EXPECT_EQ(A()[0].item<uint8_t>(), 250);
  EXPECT_EQ(zeros({3}, kByte).dtype(), kUInt8);
  EXPECT_EQ(zeros(3, kByte).to_vector<uint8_t>(), (U{0, 0, 0}));
  EXPECT_EQ(ones({2}, TensorOptions().dtype(kUInt8)).to_vector<uint8_t>(), (U{1, 1}));
  EXPECT_EQ(bytes(tensor({1, 2, 255}, kUInt8)), (U{1, 2, 255}));
  EXPECT_EQ(A().to_string(), "tensor([250,   3, 128,   0], dtype=torch.uint8)");  // PyTorch's repr
}

// torch.promote_types over sloth's dtypes, and the three tiers of result_type.
TEST(UInt8, PromotionTable) {
  EXPECT_EQ(promote_types(kUInt8, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kUInt8, kBool), kUInt8);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt64, kUInt8), kInt64);
  EXPECT_EQ(promote_types(kUInt8, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat64, kUInt8), kFloat64);
  Tensor a = A();
  EXPECT_EQ((a + B().to(kInt32)).dtype(), kInt32);
  EXPECT_EQ((a + B().to(kLong)).dtype(), kInt64);
  EXPECT_EQ((a + B().to(kFloat)).dtype(), kFloat32);
  EXPECT_EQ((a + B().to(kDouble)).dtype(), kFloat64);
  // A number keeps uint8 (int) or gives the default float (double).
  EXPECT_EQ((a * 2).dtype(), kUInt8);
  EXPECT_EQ((a + 1.5).dtype(), kFloat32);
  // A 0-dim int64 tensor is a lower tier: uint8 stays; a 0-dim uint8 with int32 gives int32.
  EXPECT_EQ((a + tensor(300.0, kLong)).dtype(), kUInt8);
  EXPECT_EQ((from_vector(std::vector<int32_t>{1, 2}, {2}) + full({}, 3, kUInt8)).dtype(), kInt32);
  // bool + uint8 -> uint8.
  Tensor m = from_vector(std::vector<bool>{true, false, true, true}, {4});
  EXPECT_EQ(bytes(a + m), (U{251, 3, 129, 1}));
  EXPECT_EQ(bytes(a + true), (U{251, 4, 129, 1}));
}

TEST(UInt8, ArithmeticWraps) {
  Tensor a = A(), b = B();
  EXPECT_EQ(bytes(a + b), (U{4, 8, 0, 1}));
  EXPECT_EQ(bytes(a - b), (U{240, 254, 0, 255}));
  EXPECT_EQ(bytes(a * b), (U{196, 15, 0, 0}));
  EXPECT_EQ(bytes(-a), (U{6, 253, 128, 0}));
  EXPECT_EQ(bytes(a + 10), (U{4, 13, 138, 10}));
  EXPECT_EQ(bytes(a + 300), (U{38, 47, 172, 44}));   // 300 wraps to 44 first
  EXPECT_EQ(bytes(a + tensor(300.0, kLong)), (U{38, 47, 172, 44}));
  EXPECT_EQ(bytes(a + (-1)), (U{249, 2, 127, 255}));
  EXPECT_EQ(bytes(a.pow(2)), (U{36, 9, 0, 0}));
  EXPECT_EQ(bytes(a.square()), (U{36, 9, 0, 0}));
  EXPECT_EQ(bytes(a.abs()), (U{250, 3, 128, 0}));
  EXPECT_EQ(bytes(a.sign()), (U{1, 1, 1, 0}));
  EXPECT_EQ(bytes(a.relu()), (U{250, 3, 128, 0}));
  EXPECT_EQ(bytes(maximum(a, b)), (U{250, 5, 128, 1}));
  EXPECT_EQ(bytes(a.clamp(5, 200)), (U{200, 5, 128, 5}));
  EXPECT_EQ(bytes(where(a > b, a, b)), (U{250, 5, 128, 1}));
  EXPECT_EQ(bytes(a.view({2, 2}).matmul(b.view({2, 2}))), (U{68, 229, 0, 128}));
  // True division and float functions give float32.
  Tensor q = a / b;
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{25.0f, 0.6f, 1.0f, 0.0f}));
  EXPECT_EQ((a / 2).to_vector<float>(), (std::vector<float>{125.0f, 1.5f, 64.0f, 0.0f}));
  EXPECT_EQ(a.sqrt().dtype(), kFloat32);
  EXPECT_EQ(a.exp().dtype(), kFloat32);
  EXPECT_EQ((a + 1.5).to_vector<float>(), (std::vector<float>{251.5f, 4.5f, 129.5f, 1.5f}));
  // In place keeps uint8 and wraps.
  Tensor c = A();
  c += B();
  EXPECT_EQ(bytes(c), (U{4, 8, 0, 1}));
  c.mul_(3);
  EXPECT_EQ(bytes(c), (U{12, 24, 0, 3}));
}

TEST(UInt8, Comparisons) {
  Tensor a = A(), b = B();
  Tensor gt = a > b;
  EXPECT_EQ(gt.dtype(), kBool);
  EXPECT_EQ(gt.to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ((a == 250).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  // Numbers are converted to uint8 first (as PyTorch): -1 is 255, 256 is 0.
  EXPECT_EQ((from_vector(U{200}, {1}) > -1).to_vector<bool>(), (std::vector<bool>{false}));
  EXPECT_EQ((from_vector(U{0}, {1}) == 256).to_vector<bool>(), (std::vector<bool>{true}));
  // Against an int32 tensor both sides are int32: 200 > -1.
  EXPECT_EQ((from_vector(U{200}, {1}) > from_vector(std::vector<int32_t>{-1}, {1})).to_vector<bool>(),
            (std::vector<bool>{true}));
  EXPECT_EQ(a.logical_not().to_vector<bool>(), (std::vector<bool>{false, false, false, true}));
}

TEST(UInt8, Casts) {
  Tensor f = tensor({0.0, 1.9, 254.6, 255.0, -0.0}, kFloat);
  EXPECT_EQ(bytes(f.to(kByte)), (U{0, 1, 254, 255, 0}));
  EXPECT_EQ(bytes(f.to(kDouble).to(kUInt8)), (U{0, 1, 254, 255, 0}));
  EXPECT_EQ(bytes(from_vector(std::vector<int64_t>{256, -1, 300, 7}, {4}).to(kUInt8)), (U{0, 255, 44, 7}));
  EXPECT_EQ(bytes(from_vector(std::vector<int32_t>{256, -1, 300, 7}, {4}).to(kUInt8)), (U{0, 255, 44, 7}));
  EXPECT_EQ(bytes(from_vector(std::vector<bool>{true, false}, {2}).to(kUInt8)), (U{1, 0}));
  Tensor a = A();
  EXPECT_EQ(a.to(kFloat).to_vector<float>(), (std::vector<float>{250, 3, 128, 0}));
  EXPECT_EQ(a.to(kDouble).to_vector<double>(), (std::vector<double>{250, 3, 128, 0}));
  EXPECT_EQ(a.to(kLong).to_vector<int64_t>(), (std::vector<int64_t>{250, 3, 128, 0}));
  EXPECT_EQ(a.to(kInt).to_vector<int32_t>(), (std::vector<int32_t>{250, 3, 128, 0}));
  EXPECT_EQ(a.to(kBool).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  // full() checks the value as c10 does: ints down to -255 wrap, floats must be in [0, 255].
  EXPECT_EQ(bytes(full({1}, -1, kUInt8)), (U{255}));
  EXPECT_EQ(bytes(full({1}, 254.9, kUInt8)), (U{254}));
  EXPECT_ERROR_HAS(full({1}, 256, kUInt8), "cannot be converted to uint8");
  EXPECT_ERROR_HAS(full({1}, -0.5, kUInt8), "cannot be converted to uint8");
  EXPECT_ERROR_HAS(full({1}, 255.5, kUInt8), "cannot be converted to uint8");
}

TEST(UInt8, Reductions) {
  Tensor a = A();
  EXPECT_EQ(a.sum().dtype(), kInt64);
  EXPECT_EQ(a.sum().item<int64_t>(), 381);
  EXPECT_EQ(a.sum(0).dtype(), kInt64);
  EXPECT_EQ(a.prod().dtype(), kInt64);
  EXPECT_EQ(a.prod().item<int64_t>(), 0);
  EXPECT_EQ(from_vector(U{200, 3}, {2}).prod().item<int64_t>(), 600);
  EXPECT_EQ(a.max().dtype(), kUInt8);
  EXPECT_EQ(a.max().item<int64_t>(), 250);
  EXPECT_EQ(a.min().item<int64_t>(), 0);
  EXPECT_EQ(a.amax().item<int64_t>(), 250);
  EXPECT_EQ(a.argmax(0).item<int64_t>(), 0);
  auto [v, i] = a.view({2, 2}).max(1);
  EXPECT_EQ(bytes(v), (U{250, 128}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  Tensor cs = a.cumsum(0);
  EXPECT_EQ(cs.dtype(), kInt64);
  EXPECT_EQ(cs.to_vector<int64_t>(), (std::vector<int64_t>{250, 253, 381, 381}));
  auto [sv, si] = a.sort();
  EXPECT_EQ(bytes(sv), (U{0, 3, 128, 250}));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2, 0}));
  auto [tv, ti] = a.topk(2);
  EXPECT_EQ(bytes(tv), (U{250, 128}));
  EXPECT_EQ(ti.to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
}

TEST(UInt8, IndexingCatViews) {
  Tensor a = A(), b = B();
  Tensor idx = from_vector(std::vector<int64_t>{2, 0}, {2});
  EXPECT_EQ(bytes(a.index_select(0, idx)), (U{128, 250}));
  EXPECT_EQ(bytes(cat({a, b})), (U{250, 3, 128, 0, 10, 5, 128, 1}));
  EXPECT_EQ(bytes(stack({a, b}).transpose(0, 1).contiguous().view({-1})),
            (U{250, 10, 3, 5, 128, 128, 0, 1}));
  Tensor m = cat({a, b}).view({2, 4});
  EXPECT_EQ(bytes(m.select(1, 2)), (U{128, 128}));
  EXPECT_EQ(bytes(m.slice(1, 1, 4, 2).reshape({-1})), (U{3, 0, 5, 1}));
  EXPECT_EQ(bytes(m.narrow(0, 1, 1).reshape({-1})), (U{10, 5, 128, 1}));
  EXPECT_EQ(bytes(m.t().reshape({-1})), (U{250, 10, 3, 5, 128, 128, 0, 1}));
  EXPECT_EQ(bytes(a.gather(0, idx)), (U{128, 250}));
  EXPECT_EQ(bytes(zeros({4}, kUInt8).index_add(0, idx, from_vector(U{200, 100}, {2}))),
            (U{100, 0, 200, 0}));
  EXPECT_EQ(bytes(a.masked_fill(a > 100, 7)), (U{7, 3, 7, 0}));
  // Writes through a view of a uint8 tensor.
  Tensor w = A();
  w.slice(0, 0, 2).add_(10);
  EXPECT_EQ(bytes(w), (U{4, 13, 128, 0}));
}

// The custom-dataset idiom: image bytes -> float in [0, 1].
TEST(UInt8, ImageNormalize) {
  std::vector<uint8_t> px = {0, 128, 255};
  Tensor img = from_blob(px.data(), {1, 3}, kUInt8);
  EXPECT_EQ(img.dtype(), kUInt8);
  Tensor f = img.to(kFloat).div(255);
  EXPECT_EQ(f.dtype(), kFloat32);
  auto v = f.to_vector<float>();
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], 0.50196081f);
  EXPECT_EQ(v[2], 1.0f);
}

// PyTorch's errors, each naming the op, the dtype and the fix; the tensors stay as they were.
TEST(UInt8, ErrorsChangeNothing) {
  Tensor a = A();
  EXPECT_ERROR_HAS(a.requires_grad_(), "only Tensors of floating point dtype can require gradients");
  EXPECT_FALSE(a.requires_grad());
  EXPECT_ERROR_HAS(zeros({2}, TensorOptions().dtype(kByte).requires_grad(true)),
                   "can require gradients");
  EXPECT_ERROR_HAS(a.mean(), "uint8");
  EXPECT_ERROR_HAS(a.var({0}), "uint8");
  EXPECT_ERROR_HAS(a.index_select(0, from_vector(U{0}, {1})), "got uint8");
  EXPECT_ERROR_HAS(a.add_(1.5), "uint8");
  EXPECT_ERROR_HAS(a.fill_(256), "cannot be converted to uint8");
  EXPECT_EQ(bytes(a), (U{250, 3, 128, 0}));
}

// The same chain through the run-time compiled kernel (bit for bit with the interpreter above).
TEST(UInt8, CompiledKernelAgrees) {
  const char* t = std::getenv("TEST_TMPDIR");
  settings_for_test().jit_dir = std::string(t ? t : "/tmp") + "/u8_jit_cache";
  auto build = [] {
    Tensor a = A(), b = B();
    return std::vector<Tensor>{(a + b) * 3 - 7, (a.to(kFloat) / 255.0) * (b > 4), -a + 300};
  };
  cpu::jit::set_mode(cpu::jit::Mode::kOff);
  auto want = build();
  sync(want);
  cpu::jit::set_mode(cpu::jit::Mode::kSync);
  const int64_t runs0 = cpu::jit::stats().compiled_runs;
  auto got = build();
  sync(got);
  cpu::jit::set_mode(cpu::jit::Mode::kOff);
  EXPECT_GT(cpu::jit::stats().compiled_runs, runs0) << "no compiled kernel ran";
  EXPECT_EQ(bytes(want[0]), (U{5, 17, 249, 252}));  // ((a + b) * 3 - 7) mod 256
  EXPECT_EQ(bytes(got[0]), bytes(want[0]));
  EXPECT_EQ(got[1].to_vector<float>(), want[1].to_vector<float>());
  EXPECT_EQ(bytes(want[2]), (U{50, 41, 172, 44}));
  EXPECT_EQ(bytes(got[2]), bytes(want[2]));
}

// The float64 reference kernels (the op-table tests' oracle) agree on uint8.
TEST(UInt8, ReferenceKernels) {
  RefTensor a = ref_tensor({4}, kUInt8, {250, 3, 128, 0}), b = ref_tensor({4}, kUInt8, {10, 5, 128, 1});
  auto add = ref_eval(OpId::kAdd, {a, b}, {});
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ(add->dtype, kUInt8);
  EXPECT_EQ(add->v, (std::vector<double>{4, 8, 0, 1}));
  auto neg = ref_eval(OpId::kNeg, {a}, {});
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(neg->v, (std::vector<double>{6, 253, 128, 0}));
  auto sum = ref_eval(OpId::kSum, {a}, {});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->dtype, kInt64);
  EXPECT_EQ(sum->v, (std::vector<double>{381}));
  EXPECT_EQ(ref_cast(-1, kUInt8), 255);
  EXPECT_EQ(ref_cast(254.6, kUInt8), 254);
}

}  // namespace
}  // namespace sloth
