// The reference kernels and the op samples: (a) every op of the table has samples and a
// reference kernel whose result agrees with the op's rule; (b) hand-computed values.
#include "testing/reference/reference.h"

#include <cmath>
#include <set>

#include "core/op_attrs.h"
#include "core/philox.h"
#include "gtest/gtest.h"
#include "tests/support/op_samples.h"

namespace sloth {
namespace {

bool is_leaf(OpId op) { return op == OpId::kData || op == OpId::kScalar; }
bool is_list(OpId op) { return op == OpId::kSplit || op == OpId::kChunk; }

// ---- (a) the whole op table --------------------------------------------------------------------

TEST(ReferenceTable, EveryOpHasSamplesAndAKernelThatMatchesItsRule) {
  int checked = 0;
  for (int k = 0; k < kNumOps; ++k) {
    const OpId op = static_cast<OpId>(k);
    const std::string name(op_name(op));
    auto samples = op_samples(op);
    if (is_leaf(op)) {
      EXPECT_TRUE(samples.empty()) << name;
      continue;
    }
    EXPECT_GE(samples.size(), 2u) << name << ": needs at least 2 samples";
    std::set<std::string> names;
    for (const OpSample& s : samples) {
      SCOPED_TRACE(name + " / " + s.name);
      EXPECT_TRUE(names.insert(s.name).second) << "duplicate sample name";
      ASSERT_EQ(s.transposed.size(), s.inputs.size());
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const RefTensor& t = s.inputs[i];
        EXPECT_EQ(static_cast<int64_t>(t.v.size()), numel(t.shape)) << "input " << i;
        EXPECT_LE(numel(t.shape), 64) << "input " << i;
        if (s.transposed[i]) {
          EXPECT_EQ(t.shape.size(), 2u) << "transposed input " << i;
        }
        for (double x : t.v) EXPECT_EQ(x, ref_cast(x, t.dtype)) << "input " << i;
      }
      Attrs attrs = s.attrs;
      auto rule = ref_infer(op, s.inputs, &attrs);
      ASSERT_TRUE(rule.ok()) << rule.status();
      if (is_list(op)) {
        auto parts = ref_eval_list(op, s.inputs, s.attrs);
        ASSERT_TRUE(parts.ok()) << parts.status();
        ASSERT_FALSE(parts->empty());
        const int64_t d = SplitAttrs::of(attrs).dim;
        int64_t total = 0;
        for (const RefTensor& p : *parts) {
          ASSERT_EQ(p.shape.size(), rule->shape.size());
          for (size_t j = 0; j < p.shape.size(); ++j)
            if (static_cast<int64_t>(j) != d) {
              EXPECT_EQ(p.shape[j], rule->shape[j]);
            }
          EXPECT_EQ(p.dtype, rule->dtype);
          total += p.shape[d];
        }
        EXPECT_EQ(total, rule->shape[d]);
        ++checked;
        continue;
      }
      auto r = ref_eval(op, s.inputs, s.attrs);
      if (const auto dr = DropoutAttrs::of(s.attrs); op == OpId::kDropout && dr.train && dr.p > 0 && dr.p < 1) {
        EXPECT_FALSE(r.ok());
        continue;
      }
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->shape, rule->shape);
      EXPECT_EQ(r->dtype, rule->dtype);
      ASSERT_EQ(static_cast<int64_t>(r->v.size()), numel(r->shape));
      for (double x : r->v) {
        EXPECT_EQ(x, ref_cast(x, r->dtype));
        EXPECT_TRUE(std::isfinite(x)) << "samples stay where the op is defined";
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(ReferenceTable, SamplesCoverTheRequestedCases) {
  // Across the table: each kind of case appears for many ops.
  int noncontig = 0, empty = 0, zero_dim = 0, f64 = 0, i64 = 0, boolean = 0;
  for (int k = 0; k < kNumOps; ++k) {
    bool has[6] = {};
    for (const OpSample& s : op_samples(static_cast<OpId>(k)))
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const RefTensor& t = s.inputs[i];
        has[0] |= s.transposed[i];
        has[1] |= numel(t.shape) == 0;
        has[2] |= t.shape.empty();
        has[3] |= t.dtype == DType::kFloat64;
        has[4] |= t.dtype == DType::kInt64;
        has[5] |= t.dtype == DType::kBool;
      }
    noncontig += has[0], empty += has[1], zero_dim += has[2], f64 += has[3], i64 += has[4],
        boolean += has[5];
  }
  EXPECT_GT(noncontig, 70);
  EXPECT_GT(empty, 70);
  EXPECT_GT(zero_dim, 70);
  EXPECT_GT(f64, 80);
  EXPECT_GT(i64, 50);
  EXPECT_GT(boolean, 20);
}

TEST(ReferenceTable, ErrorsAreTheRulesErrors) {
  RefTensor a = ref_tensor({2, 3}, kFloat32, std::vector<double>(6, 1.0));
  RefTensor b = ref_tensor({2, 3}, kFloat32, std::vector<double>(6, 1.0));
  auto r = ref_eval(OpId::kMatmul, {a, b}, {});
  ASSERT_FALSE(r.ok());
  Attrs attrs;
  auto rule = ref_infer(OpId::kMatmul, {a, b}, &attrs);
  ASSERT_FALSE(rule.ok());
  EXPECT_EQ(r.status().message(), rule.status().message());
  EXPECT_FALSE(ref_eval(OpId::kData, {}, {}).ok());
  EXPECT_FALSE(ref_eval(OpId::kSplit, {a}, SplitAttrs{.size_or_n = 1}).ok());  // a list: ref_eval_list
}

// ---- (b) hand-computed values --------------------------------------------------------------------

RefTensor T(Shape s, std::vector<double> v, DType d = kFloat64) { return ref_tensor(s, d, v); }
RefTensor S(double v, DType d = kFloat64) { return ref_scalar(v, d); }
RefTensor arange(Shape s, DType d = kFloat64) {
  std::vector<double> v(numel(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return ref_tensor(s, d, v);
}

RefTensor run(OpId op, std::vector<RefTensor> in, Attrs a = {}) {
  auto r = ref_eval(op, in, a);
  EXPECT_TRUE(r.ok()) << op_name(op) << ": " << r.status();
  return r.ok() ? *r : RefTensor{};
}

void expect(const RefTensor& t, Shape shape, DType dtype, std::vector<double> v, double tol = 1e-12) {
  EXPECT_EQ(t.shape, shape);
  EXPECT_EQ(t.dtype, dtype);
  ASSERT_EQ(t.v.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(t.v[i], v[i], tol) << "element " << i;
}

TEST(ReferenceValues, Softmax) {
  expect(run(OpId::kSoftmax, {T({3}, {1, 2, 3})}, DimAttrs{.dim = 0}), {3}, kFloat64,
         {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  expect(run(OpId::kLogSoftmax, {T({1, 3}, {1, 2, 3})}, DimAttrs{.dim = -1}), {1, 3}, kFloat64,
         {1 - 3.40760596444438, 2 - 3.40760596444438, 3 - 3.40760596444438});
  expect(run(OpId::kLogsumexp, {T({3}, {1, 2, 3})}, Attrs{.dims = {}}), {}, kFloat64,
         {3.40760596444438});
}

TEST(ReferenceValues, MatmulMmBmmLinear) {
  RefTensor a = T({2, 3}, {1, 2, 3, 4, 5, 6}), b = T({3, 2}, {7, 8, 9, 10, 11, 12});
  expect(run(OpId::kMatmul, {a, b}), {2, 2}, kFloat64, {58, 64, 139, 154});
  expect(run(OpId::kMm, {a, b}), {2, 2}, kFloat64, {58, 64, 139, 154});
  expect(run(OpId::kMatmul, {T({3}, {1, 2, 3}), T({3}, {4, 5, 6})}), {}, kFloat64, {32});
  expect(run(OpId::kMatmul, {T({3}, {1, 2, 3}), b}), {2}, kFloat64, {58, 64});
  expect(run(OpId::kMatmul, {a, T({3}, {1, 0, -1})}), {2}, kFloat64, {-2, -2});
  // batch broadcast: [2,1,2,3] x [3,3,2] -> [2,3,2,2]
  RefTensor r = run(OpId::kMatmul, {arange({2, 1, 2, 3}), arange({3, 3, 2})});
  EXPECT_EQ(r.shape, (Shape{2, 3, 2, 2}));
  // element [1, 2, 1, 0]: a[1,0,1,:] = {9,10,11}, b[2,:,0] = {12,14,16}
  EXPECT_EQ(r.v[((1 * 3 + 2) * 2 + 1) * 2 + 0], 9 * 12 + 10 * 14 + 11 * 16);
  expect(run(OpId::kBmm, {T({1, 1, 2}, {1, 2}), T({1, 2, 1}, {3, 4})}), {1, 1, 1}, kFloat64, {11});
  expect(run(OpId::kMatmul, {T({2, 0}, {}, kInt64), T({0, 2}, {}, kInt64)}), {2, 2}, kInt64,
         {0, 0, 0, 0});
  expect(run(OpId::kLinear, {T({2}, {1, 2}), T({3, 2}, {1, 0, 0, 1, 1, 1}), T({3}, {.5, .5, .5})}),
         {3}, kFloat64, {1.5, 2.5, 3.5});
}

TEST(ReferenceValues, Losses) {
  expect(run(OpId::kCrossEntropy, {T({2, 3}, {1, 2, 3, 1, 1, 1}), T({2}, {2, 0}, kInt64)}), {},
         kFloat64, {0.7531091265562451});
  expect(run(OpId::kCrossEntropy, {T({3}, {1, 1, 1}), S(2, kInt64)}), {}, kFloat64, {std::log(3.0)});
  expect(run(OpId::kNllLoss, {T({2, 2}, {-1, -2, -3, -4}), T({2}, {1, 0}, kInt64)}), {}, kFloat64,
         {2.5});
  expect(run(OpId::kMseLoss, {T({2}, {1, 2}, kFloat32), T({2}, {3, 5})}), {}, kFloat64, {6.5});
  expect(run(OpId::kBceWithLogits, {T({2}, {0, 2}), T({2}, {1, 0})}), {}, kFloat64,
         {(std::log(2.0) + 2 + std::log1p(std::exp(-2.0))) / 2});
  EXPECT_FALSE(ref_eval(OpId::kNllLoss, {T({1, 2}, {0, 0}), T({1}, {2}, kInt64)}, {}).ok());
}

TEST(ReferenceValues, LayerNormVarStdMean) {
  RefTensor x = T({1, 4}, {1, 2, 3, 4});
  const double s = std::sqrt(1.25 + 1e-5);
  expect(run(OpId::kLayerNorm, {x}, LayerNormAttrs{.normalized_shape = {4}, .eps = 1e-5}), {1, 4}, kFloat64,
         {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
  expect(run(OpId::kLayerNorm, {x, T({4}, {1, 2, 1, 2}), T({4}, {0, 0, 1, 1})},
             LayerNormAttrs{.normalized_shape = {4}, .eps = 1e-5}),
         {1, 4}, kFloat64, {-1.5 / s, -1.0 / s, 1 + 0.5 / s, 1 + 3.0 / s});
  expect(run(OpId::kVar, {x}, VarAttrs{.dims = {1}, .unbiased = true}), {1}, kFloat64, {5.0 / 3.0});
  expect(run(OpId::kVar, {x}, VarAttrs{.dims = {}, .keepdim = true, .unbiased = false}), {1, 1}, kFloat64, {1.25});
  expect(run(OpId::kStd, {x}, VarAttrs{.dims = {-1}, .unbiased = true}), {1}, kFloat64, {std::sqrt(5.0 / 3.0)});
  expect(run(OpId::kMean, {T({2, 2}, {1, 2, 3, 5}, kFloat32)}, Attrs{.dims = {0}}), {2}, kFloat32,
         {2, 3.5});
}

TEST(ReferenceValues, ReductionsAndArg) {
  RefTensor x = T({2, 3}, {1, 5, 2, 4, 0, 6});
  expect(run(OpId::kSum, {x}, ReduceAttrs{.dims = {1}, .keepdim = true}), {2, 1}, kFloat64, {8, 10});
  expect(run(OpId::kProd, {x}, Attrs{.dims = {0}}), {3}, kFloat64, {4, 0, 12});
  expect(run(OpId::kAmax, {x}, Attrs{.dims = {}}), {}, kFloat64, {6});
  expect(run(OpId::kAmin, {x}, Attrs{.dims = {1}}), {2}, kFloat64, {1, 0});
  expect(run(OpId::kSum, {T({4}, {1, 0, 1, 1}, kBool)}, Attrs{.dims = {}}), {}, kInt64, {3});
  expect(run(OpId::kSum, {T({0, 2}, {})}, Attrs{.dims = {0}}), {2}, kFloat64, {0, 0});
  expect(run(OpId::kProd, {T({0}, {}, kInt32)}, Attrs{.dims = {}}), {}, kInt64, {1});
  RefTensor ties = T({4}, {1, 3, 3, 2}, kInt64);
  expect(run(OpId::kArgmax, {ties}, ArgReduceAttrs{.dim = 0}), {}, kInt64, {1});
  expect(run(OpId::kArgmin, {x}, ArgReduceAttrs{.dim = 1, .keepdim = true}), {2, 1}, kInt64, {0, 1});
  expect(run(OpId::kArgmax, {x}, ArgReduceAttrs{.dim = 0}), {3}, kInt64, {1, 0, 1});
}

TEST(ReferenceValues, ElementwiseAndPromotion) {
  expect(run(OpId::kRound, {T({6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.6})}), {6}, kFloat64,
         {0, 2, 2, 0, -2, 3});
  expect(run(OpId::kGelu, {T({2}, {1, -1})}), {2}, kFloat64,
         {0.8413447460685429, -1 + 0.8413447460685429});
  expect(run(OpId::kSign, {T({3}, {-2, 0, 3}, kInt64)}), {3}, kInt64, {-1, 0, 1});
  expect(run(OpId::kExp, {T({1}, {1}, kInt64)}), {1}, kFloat32, {static_cast<float>(std::exp(1.0))});
  expect(run(OpId::kDiv, {T({2}, {7, -7}, kInt64), S(2, kInt64)}), {2}, kFloat32, {3.5, -3.5});
  expect(run(OpId::kPow, {T({2}, {2, 3}, kInt64), T({2}, {3, 2}, kInt64)}), {2}, kInt64, {8, 9});
  EXPECT_EQ(run(OpId::kPow, {T({1}, {1}, kBool), T({1}, {1}, kBool)}).dtype, kInt64);
  // float32 results are rounded through float
  RefTensor sum = run(OpId::kAdd, {T({1}, {0.1}, kFloat32), T({1}, {0.2}, kFloat32)});
  EXPECT_EQ(sum.v[0], static_cast<double>(static_cast<float>(static_cast<double>(0.1f) + 0.2f)));
  // a 0-dim float64 does not lift a float32 tensor; an int64 tensor with float32 gives float32
  EXPECT_EQ(run(OpId::kMul, {T({2}, {1, 2}, kFloat32), S(0.5)}).dtype, kFloat32);
  // comparisons happen in the promoted type: int64 2^24+1 vs float32 2^24 is equal in float32
  expect(run(OpId::kEq, {T({1}, {16777217}, kInt64), T({1}, {16777216}, kFloat32)}), {1}, kBool, {1});
  expect(run(OpId::kLt, {T({2, 1}, {1, 3}), T({2}, {2, 3})}), {2, 2}, kBool, {1, 1, 0, 0});
  expect(run(OpId::kLogicalAnd, {T({3}, {0, 2, -1}), T({3}, {1, 1, 0}, kBool)}), {3}, kBool, {0, 1, 0});
  // a 0-dim tensor of a higher category takes part with its own dtype (float64 here)
  expect(run(OpId::kWhere, {T({2}, {1, 0}, kBool), T({2}, {1, 2}, kInt64), S(0.5)}), {2}, kFloat64,
         {1, 0.5});
  // clamp with lo > hi gives hi, as torch.clamp
  expect(run(OpId::kClamp, {T({3}, {-2, 0.5, 3}), S(-1), S(1)}), {3}, kFloat64, {-1, 0.5, 1});
  expect(run(OpId::kClamp, {T({1}, {0}), S(2), S(1)}), {1}, kFloat64, {1});
  expect(run(OpId::kCast, {T({3}, {-2.7, 2.7, 0.1})}, Attrs{.dtype = kInt64}), {3}, kInt64,
         {-2, 2, 0});
  expect(run(OpId::kCast, {T({2}, {0, -0.1})}, Attrs{.dtype = kBool}), {2}, kBool, {0, 1});
}

TEST(ReferenceValues, Factories) {
  expect(run(OpId::kLinspace, {S(0), S(1)}, Attrs{.dims = {5}, .dtype = kFloat64}), {5}, kFloat64,
         {0, 0.25, 0.5, 0.75, 1});
  expect(run(OpId::kLinspace, {S(3), S(9)}, Attrs{.dims = {1}, .dtype = kFloat64}), {1}, kFloat64,
         {3});
  expect(run(OpId::kArange, {S(1), S(0.5)}, Attrs{.dims = {4}, .dtype = kFloat32}), {4}, kFloat32,
         {1, 1.5, 2, 2.5});
  expect(run(OpId::kArange, {S(-3, kInt64), S(2, kInt64)}, Attrs{.dims = {3}, .dtype = kInt64}), {3},
         kInt64, {-3, -1, 1});
  expect(run(OpId::kEye, {}, Attrs{.dims = {2, 3}, .dtype = kInt64}), {2, 3}, kInt64,
         {1, 0, 0, 0, 1, 0});
  expect(run(OpId::kFull, {S(3.7)}, Attrs{.dims = {2}, .dtype = kInt64}), {2}, kInt64, {3, 3});
  Attrs ri = RandintAttrs{.shape = {64}, .low = -3, .high = 5, .dtype = kInt64};
  RefTensor r = run(OpId::kRandint, {S(11, kInt64), S(3, kInt64)}, ri);
  std::set<double> seen(r.v.begin(), r.v.end());
  EXPECT_GE(seen.size(), 6u);  // 64 draws from 8 values
  for (double x : r.v) {
    EXPECT_GE(x, -3);
    EXPECT_LT(x, 5);
  }
  EXPECT_EQ(r.v[5], static_cast<double>(philox::integer(11, 8, -3, 5)));
  EXPECT_EQ(run(OpId::kRandint, {S(11, kInt64), S(3, kInt64)}, ri).v, r.v);
  RefTensor u = run(OpId::kRand, {S(1, kInt64), S(0, kInt64)}, Attrs{.dims = {2, 3}, .dtype = kFloat32});
  for (size_t i = 0; i < u.v.size(); ++i) EXPECT_EQ(u.v[i], philox::uniform(1, i, false));
  RefTensor n = run(OpId::kRandn, {S(1, kInt64), S(4, kInt64)}, Attrs{.dims = {3}, .dtype = kFloat64});
  EXPECT_EQ(n.v[2], philox::normal(1, 6));
}

TEST(ReferenceValues, Views) {
  RefTensor x = arange({3, 4});
  expect(run(OpId::kDiagonal, {x}, DiagonalAttrs{.offset = 1, .dim1 = 0, .dim2 = 1}), {3}, kFloat64, {1, 6, 11});
  expect(run(OpId::kDiagonal, {x}, DiagonalAttrs{.offset = -1, .dim1 = 0, .dim2 = 1}), {2}, kFloat64, {4, 9});
  expect(run(OpId::kAsStrided, {x}, AsStridedAttrs{.size = {2, 2}, .stride = {1, 4}, .offset = 1}), {2, 2},
         kFloat64, {1, 5, 2, 6});
  expect(run(OpId::kSlice, {arange({6})}, SliceAttrs{.dim = 0, .start = 1, .end = 6, .step = 2}), {3}, kFloat64,
         {1, 3, 5});
  expect(run(OpId::kSlice, {x}, SliceAttrs{.dim = 1, .start = -3, .end = 100, .step = 2}), {3, 2}, kFloat64,
         {1, 3, 5, 7, 9, 11});
  expect(run(OpId::kSelect, {x}, SelectAttrs{.dim = 1, .index = -1}), {3}, kFloat64, {3, 7, 11});
  expect(run(OpId::kTranspose, {x}, TransposeAttrs{.dim0 = 0, .dim1 = 1}), {4, 3}, kFloat64,
         {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  expect(run(OpId::kPermute, {arange({1, 2, 3})}, Attrs{.dims = {2, 0, 1}}), {3, 1, 2}, kFloat64,
         {0, 3, 1, 4, 2, 5});
  expect(run(OpId::kExpand, {T({2, 1}, {1, 2})}, Attrs{.dims = {2, 2, 3}}), {2, 2, 3}, kFloat64,
         {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  expect(run(OpId::kNarrow, {x}, NarrowAttrs{.dim = 0, .start = -1, .length = 1}), {1, 4}, kFloat64, {8, 9, 10, 11});
  expect(run(OpId::kReshape, {x}, Attrs{.dims = {-1, 6}}), {2, 6}, kFloat64, x.v);
  expect(run(OpId::kSqueeze, {arange({1, 3, 1})}, Attrs{.dims = {0}}), {3, 1}, kFloat64, {0, 1, 2});
  auto parts = ref_eval_list(OpId::kSplit, {arange({5})}, SplitAttrs{.size_or_n = 2});
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  expect((*parts)[2], {1}, kFloat64, {4});
  auto chunks = ref_eval_list(OpId::kChunk, {arange({6})}, SplitAttrs{.size_or_n = 4});
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 3u);  // torch.chunk(6 elements, 4) gives 3 chunks of 2
  expect((*chunks)[1], {2}, kFloat64, {2, 3});
}

TEST(ReferenceValues, Scatters) {
  RefTensor base = ref_tensor({3, 3}, kFloat64, std::vector<double>(9, 0));
  expect(run(OpId::kDiagonalScatter, {base, T({2}, {1, 2})}, DiagonalAttrs{.offset = 1, .dim1 = 0, .dim2 = 1}),
         {3, 3}, kFloat64, {0, 1, 0, 0, 0, 2, 0, 0, 0});
  expect(run(OpId::kSliceScatter, {base, T({3, 2}, {1, 2, 3, 4, 5, 6})},
             SliceAttrs{.dim = 1, .start = 0, .end = 3, .step = 2}),
         {3, 3}, kFloat64, {1, 0, 2, 3, 0, 4, 5, 0, 6});
  expect(run(OpId::kSelectScatter, {base, T({3}, {7, 8, 9})}, SelectAttrs{.dim = 0, .index = -1}), {3, 3},
         kFloat64, {0, 0, 0, 0, 0, 0, 7, 8, 9});
  expect(run(OpId::kAsStridedScatter, {base, T({2}, {1, 2})}, AsStridedAttrs{.size = {2}, .stride = {4}, .offset = 0}),
         {3, 3}, kFloat64, {1, 0, 0, 0, 2, 0, 0, 0, 0});
}

TEST(ReferenceValues, Indexing) {
  RefTensor x = T({2, 2}, {1, 2, 3, 4});
  expect(run(OpId::kGather, {x, T({2, 2}, {0, 0, 1, 0}, kInt64)}, DimAttrs{.dim = 1}), {2, 2}, kFloat64,
         {1, 1, 4, 3});
  expect(run(OpId::kIndexSelect, {x, T({3}, {1, 1, 0}, kInt64)}, DimAttrs{.dim = 0}), {3, 2}, kFloat64,
         {3, 4, 3, 4, 1, 2});
  expect(run(OpId::kScatterAdd, {T({3}, {0, 0, 0}), T({3}, {0, 2, 0}, kInt64), T({3}, {1, 2, 3})},
             DimAttrs{.dim = 0}),
         {3}, kFloat64, {4, 0, 2});
  expect(run(OpId::kIndexAdd, {x, T({2}, {1, 1}, kInt64), T({2, 2}, {10, 20, 30, 40})},
             DimAttrs{.dim = 1}),
         {2, 2}, kFloat64, {1, 32, 3, 74});
  RefTensor zeros = ref_tensor({4, 2}, kFloat32, std::vector<double>(8, 0));
  expect(run(OpId::kIndexPut, {zeros, T({2}, {1, -1}, kInt64), T({2, 2}, {1, 2, 3, 4}, kFloat32)}),
         {4, 2}, kFloat32, {0, 0, 1, 2, 0, 0, 3, 4});
  expect(run(OpId::kIndexPut_, {zeros, T({1}, {0}, kInt64), T({2}, {5, 6}, kFloat32)}), {4, 2},
         kFloat32, {5, 6, 0, 0, 0, 0, 0, 0});
  EXPECT_FALSE(ref_eval(OpId::kIndexPut, {zeros, T({1}, {4}, kInt64), S(1, kFloat32)}, {}).ok());
  expect(run(OpId::kOneHot, {T({2}, {2, 0}, kInt64)}, OneHotAttrs{.num_classes = 3}), {2, 3}, kInt64,
         {0, 0, 1, 1, 0, 0});
  expect(run(OpId::kEmbedding, {T({3, 2}, {1, 2, 3, 4, 5, 6}), T({2}, {2, 0}, kInt64)}), {2, 2},
         kFloat64, {5, 6, 1, 2});
  expect(run(OpId::kMaskedFill, {T({2, 2}, {1, 2, 3, 4}, kInt64), T({2}, {1, 0}, kBool), S(9.9)}),
         {2, 2}, kInt64, {9, 2, 9, 4});
  expect(run(OpId::kCat, {T({2}, {1, 2}, kFloat32), T({1}, {3}, kFloat64)}, DimAttrs{.dim = 0}), {3},
         kFloat64, {1, 2, 3});
  expect(run(OpId::kCat, {T({1, 1}, {5}, kInt64), T({1, 2}, {1, 0}, kBool)}, DimAttrs{.dim = -1}),
         {1, 3}, kInt64, {5, 1, 0});
  expect(run(OpId::kStack, {T({2}, {1, 2}), T({2}, {3, 4})}, DimAttrs{.dim = 1}), {2, 2}, kFloat64,
         {1, 3, 2, 4});
}

TEST(ReferenceValues, InPlaceAndDropout) {
  expect(run(OpId::kAdd_, {T({2}, {1, 2}, kFloat32), T({2}, {0.1, 0.2}, kFloat64)}), {2}, kFloat32,
         {static_cast<float>(1.1), static_cast<float>(2.2)});
  EXPECT_FALSE(ref_eval(OpId::kDiv_, {T({2}, {1, 2}, kInt64), S(2, kInt64)}, {}).ok());
  expect(run(OpId::kCopy_, {T({2, 2}, {0, 0, 0, 0}, kInt64), T({2}, {-2.7, 3.2})}), {2, 2}, kInt64,
         {-2, 3, -2, 3});
  expect(run(OpId::kFill_, {T({3}, {1, 2, 3}, kInt64), S(4.5)}), {3}, kInt64, {4, 4, 4});
  expect(run(OpId::kZero_, {T({2}, {1, 2})}), {2}, kFloat64, {0, 0});
  expect(run(OpId::kClamp_, {T({3}, {-3, 0, 3}, kInt64), S(-1, kInt64), S(1, kInt64)}), {3}, kInt64,
         {-1, 0, 1});
  expect(run(OpId::kRelu_, {T({2}, {-1, 2})}), {2}, kFloat64, {0, 2});
  expect(run(OpId::kMaskedFill_, {T({2}, {1, 2}), T({2}, {0, 1}, kBool), S(-1)}), {2}, kFloat64,
         {1, -1});
  RefTensor x = T({3}, {1, 2, 3});
  expect(run(OpId::kDropout, {x}, DropoutAttrs{.p = 0.5, .train = false}), {3}, kFloat64, {1, 2, 3});
  expect(run(OpId::kDropout, {x}, DropoutAttrs{.p = 1.0, .train = true}), {3}, kFloat64, {0, 0, 0});
  auto r = ref_eval(OpId::kDropout, {x}, DropoutAttrs{.p = 0.5, .train = true});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nondeterministic"), std::string::npos);
}

}  // namespace
}  // namespace sloth
