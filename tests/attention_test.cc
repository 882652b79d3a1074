// Attention and sequence ops against PyTorch 1.13 (values committed in
// attention_expected.inc by tools/attention_expected.py; inputs come from gen() on both
// sides): scaled_dot_product_attention (values, gradients, masks, causal, the fused path's
// memory), tril/triu, cumsum, sort, topk (tie order), multinomial, MultiheadAttention and
// TransformerEncoderLayer with committed weights.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"
#include "tests/support/pytorch_values.h"

namespace {
using namespace sloth;
using sloth::testing::values;

#include "tests/attention_expected.inc"

// sin(0.61 i + 1.7 seed), rounded to float32 (tools/attention_expected.py's gen).
Tensor gen(Shape shape, int seed, DType dtype = kFloat32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<double>(static_cast<float>(std::sin(0.61 * static_cast<double>(i) + 1.7 * seed)));
  return tensor(v, shape, TensorOptions().dtype(dtype));
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 2e-5) {
  const std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}
void expect_eq(const Tensor& t, const std::vector<double>& want) {
  EXPECT_EQ(values(t), want);
}

struct SdpaCase {
  Shape qs, ks, vs;
  Tensor mask;
  bool causal = false;
};
void check_sdpa(const SdpaCase& c, const std::vector<double>& out, const std::vector<double>& dq,
                const std::vector<double>& dk, const std::vector<double>& dv,
                const std::vector<double>* dmask = nullptr) {
  Tensor q = gen(c.qs, 1).requires_grad_(), k = gen(c.ks, 2).requires_grad_(),
         v = gen(c.vs, 3).requires_grad_();
  Tensor mask = c.mask;
  if (dmask) mask = mask.detach().requires_grad_();
  Tensor o = scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal);
  expect_near(o, out);
  (o * gen(o.shape(), 4)).sum().backward();
  expect_near(q.grad(), dq, 1e-4);
  expect_near(k.grad(), dk, 1e-4);
  expect_near(v.grad(), dv, 1e-4);
  if (dmask) expect_near(mask.grad(), *dmask, 1e-4);
}

Tensor bool_mask_3x5() {
  std::vector<double> m;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) m.push_back((i + 2 * j) % 3 != 0);
  return tensor(m, {3, 5}, TensorOptions().dtype(kBool));
}

TEST(Sdpa, MatchesPyTorchWithoutMask) {
  check_sdpa({{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}}, kPlain_out, kPlain_dq, kPlain_dk, kPlain_dv);
}
TEST(Sdpa, BoolMaskBroadcastsAndKeepsWhereTrue) {
  check_sdpa({{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, bool_mask_3x5()}, kBoolMask_out,
             kBoolMask_dq, kBoolMask_dk, kBoolMask_dv);
}
TEST(Sdpa, FloatMaskIsAddedAndGetsAGradient) {
  check_sdpa({{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, gen({2, 1, 3, 5}, 5)}, kFloatMask_out,
             kFloatMask_dq, kFloatMask_dk, kFloatMask_dv, &kFloatMask_dmask);
}
TEST(Sdpa, CausalSquareAndWide) {
  check_sdpa({{2, 2, 4, 4}, {2, 2, 4, 4}, {2, 2, 4, 3}, {}, true}, kCausal_out, kCausal_dq,
             kCausal_dk, kCausal_dv);
  check_sdpa({{1, 3, 4}, {1, 5, 4}, {1, 5, 2}, {}, true}, kCausalWide_out, kCausalWide_dq,
             kCausalWide_dk, kCausalWide_dv);
}

TEST(Sdpa, FusedPathMatchesCompositeOnPermutedHeads) {
  // Heads as MultiheadAttention makes them: [N, L, H, D] permuted to [N, H, L, D] (strided).
  Tensor q = gen({2, 70, 3, 8}, 6).permute({0, 2, 1, 3}), k = gen({2, 90, 3, 8}, 7).permute({0, 2, 1, 3}),
         v = gen({2, 90, 3, 5}, 8).permute({0, 2, 1, 3});
  for (bool causal : {false, true}) {
    Tensor fused = scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
    Tensor s = matmul(q, k.transpose(-1, -2)) * (1 / std::sqrt(8.0));
    if (causal) s = masked_fill(s, logical_not(tril(ones({70, 90}, TensorOptions().dtype(kBool)))),
                                -std::numeric_limits<double>::infinity());
    expect_near(fused, values(matmul(softmax(s, -1), v)), 1e-5);
  }
}

TEST(Sdpa, LongKeysUseShortRowBlocks) {
  // S = 3000: a block holds 5 query rows; float64 takes the dgemm path; a float mask.
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor q = gen({2, 13, 4}, 1, dt), k = gen({2, 3000, 4}, 2, dt), v = gen({2, 3000, 3}, 3, dt);
    Tensor m = gen({13, 3000}, 4, dt);
    Tensor want = matmul(softmax(matmul(q, k.transpose(-1, -2)) * 0.5 + m, -1), v);
    expect_near(scaled_dot_product_attention(q, k, v, m), values(want), 1e-5);
    Tensor wc = matmul(softmax(masked_fill(matmul(q, k.transpose(-1, -2)) * 0.5,
                                           logical_not(tril(ones({13, 3000}, TensorOptions().dtype(kBool)))),
                                           -std::numeric_limits<double>::infinity()), -1), v);
    expect_near(scaled_dot_product_attention(q, k, v, {}, 0, true), values(wc), 1e-5);
  }
}

TEST(Sdpa, EmptySequences) {
  Tensor q = gen({2, 0, 4}, 1), k = gen({2, 3, 4}, 2), v = gen({2, 3, 5}, 3);
  EXPECT_EQ(scaled_dot_product_attention(q, k, v).shape(), (Shape{2, 0, 5}));
  // No keys: softmax over nothing times an empty V is 0 (PyTorch's math path).
  Tensor o = scaled_dot_product_attention(gen({2, 3, 4}, 1), gen({2, 0, 4}, 2), gen({2, 0, 5}, 3));
  EXPECT_EQ(values(o), std::vector<double>(30, 0.0));
}

TEST(Sdpa, FusedForwardAllocatesNoScoresPerHead) {
  const int64_t B = 2, H = 4, L = 128, S = 128, E = 16;
  Tensor q = gen({B, H, L, E}, 1), k = gen({B, H, S, E}, 2), v = gen({B, H, S, E}, 3);
  sync({q, k, v});
  reset_metrics();
  Tensor o = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  sync({o});
  const Metrics m = metrics();
  // One kernel; the output [B, H, L, E] is all it allocates: less than one [L, S] float
  // buffer per head (which the composite's scores alone would be).
  EXPECT_EQ(m.kernels_launched, 1);
  EXPECT_EQ(m.bytes_allocated, B * H * L * E * 4);
  EXPECT_LT(m.bytes_allocated, B * H * L * S * 4);
  // The composite path allocates the scores (at least B * H * L * S floats).
  reset_metrics();
  Tensor c = matmul(softmax(matmul(q, k.transpose(-1, -2)) * 0.25, -1), v);
  sync({c});
  EXPECT_GE(metrics().bytes_allocated, B * H * L * S * 4);
}

TEST(Sdpa, DropoutPathIsSeededAndScales) {
  Tensor q = gen({1, 4, 6}, 1), k = gen({1, 5, 6}, 2), v = ones({1, 5, 3});
  manual_seed(3);
  Tensor a = scaled_dot_product_attention(q, k, v, {}, 0.5);
  manual_seed(3);
  Tensor b = scaled_dot_product_attention(q, k, v, {}, 0.5);
  EXPECT_EQ(values(a), values(b));
  // With V = 1 each output is (kept probabilities) / 0.5: a multiple of nothing simple, but
  // dropout 0 gives exactly 1.
  expect_near(scaled_dot_product_attention(q, k, v, {}, 0.0), std::vector<double>(12, 1.0));
  // Dropout zeroes: some output differs from 1.
  bool differs = false;
  for (double x : values(a)) differs |= std::fabs(x - 1) > 1e-3;
  EXPECT_TRUE(differs);
}

TEST(Sdpa, Errors) {
  Tensor q = gen({2, 3, 4}, 1), k = gen({2, 5, 4}, 2), v = gen({2, 5, 3}, 3);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, bool_mask_3x5(), 0.0, true), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, gen({2, 5, 3}, 2), v), Error);     // E differs
  EXPECT_THROW(scaled_dot_product_attention(q, k, gen({2, 4, 3}, 3)), Error);     // S differs
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, ones({3, 4})), Error);       // mask shape
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, {}, 1.5), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, ones({3, 5}, TensorOptions().dtype(kInt64))), Error);
  try {
    scaled_dot_product_attention(q, k, v, bool_mask_3x5(), 0.0, true);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is_causal"), std::string::npos) << e.what();
  }
}

TEST(Sdpa, FullyMaskedRowIsNanAsInPyTorch) {
  Tensor q = gen({2, 3}, 1), k = gen({2, 3}, 2), v = gen({2, 3}, 3);
  Tensor m = tensor({1, 1, 0, 0}, {2, 2}, TensorOptions().dtype(kBool));
  std::vector<double> o = values(scaled_dot_product_attention(q, k, v, m));
  for (int j = 0; j < 3; ++j) {
    EXPECT_FALSE(std::isnan(o[j]));
    EXPECT_TRUE(std::isnan(o[3 + j]));
  }
}

// ---- tril, triu, cumsum, sort, topk ----------------------------------------------------------

TEST(Sequence, TrilTriu) {
  Tensor x = gen({2, 3, 4}, 6);
  expect_eq(tril(x), kTril0);
  expect_eq(tril(x, -1), kTrilM1);
  expect_eq(triu(x, 1), kTriu1);
  EXPECT_THROW(tril(gen({4}, 1)), Error);
  Tensor g = gen({3, 3}, 2).requires_grad_();
  tril(g).sum().backward();
  expect_eq(g.grad(), {1, 0, 0, 1, 1, 0, 1, 1, 1});
}

TEST(Sequence, Cumsum) {
  Tensor c = gen({3, 4}, 7);
  expect_near(cumsum(c, 1), kCumsum1);
  expect_near(c.cumsum(0), kCumsum0);
  Tensor ci = tensor({1, -2, 3, 4, 5, -6}, {2, 3}, TensorOptions().dtype(kInt32));
  Tensor r = cumsum(ci, -1);
  EXPECT_EQ(r.dtype(), kInt64);
  expect_eq(r, kCumsumInt);
  EXPECT_THROW(cumsum(c, 2), Error);
  Tensor g = gen({4}, 1).requires_grad_();
  (cumsum(g, 0) * tensor({1, 2, 3, 4})).sum().backward();
  expect_eq(g.grad(), {10, 9, 7, 4});
}

TEST(Sequence, SortIsStableAndMatchesPyTorch) {
  Tensor s = floor(gen({2, 6}, 8) * 2.0);
  auto [va, ia] = s.sort();
  expect_eq(va, kSortAsc_values);
  expect_eq(ia, kSortAsc_indices);
  auto [vd, id] = sort(s, -1, true);
  expect_eq(vd, kSortDesc_values);
  expect_eq(id, kSortDesc_indices);
  expect_eq(std::get<1>(sort(s, 0)), kSortDim0_indices);
  EXPECT_EQ(ia.dtype(), kInt64);
  // Values are differentiable (through gather).
  Tensor x = tensor({3, 1, 2}).requires_grad_();
  (std::get<0>(sort(x)) * tensor({1, 10, 100})).sum().backward();
  expect_eq(x.grad(), {100, 1, 10});
}

TEST(Sequence, NanSortsAsTheLargestValue) {
  Tensor x = tensor({2, std::nan(""), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::infinity(), 0, std::nan("")});
  expect_eq(std::get<1>(sort(x)), {2, 4, 0, 3, 1, 5});
  expect_eq(std::get<1>(sort(x, 0, true)), {1, 5, 3, 0, 4, 2});
  expect_eq(std::get<1>(topk(x, 3)), {1, 5, 3});
  expect_eq(std::get<1>(topk(x, 3, 0, false)), {2, 4, 0});
}

TEST(Sequence, TopkMatchesPyTorchTieOrder) {
  std::vector<double> t;
  for (int i = 0; i < 40; ++i) t.push_back(i % 3);
  Tensor x = tensor(t);
  expect_eq(std::get<1>(topk(x, 5)), kTopkTies_largest);
  expect_eq(std::get<1>(topk(x, 5, -1, false)), kTopkTies_smallest);
  Tensor t2 = floor(gen({2, 130}, 9) * 2.0);  // k * 64 <= n: PyTorch's partial_sort path
  auto [v2, i2] = topk(t2, 2, 1);
  expect_eq(v2, kTopkPartial_values);
  expect_eq(i2, kTopkPartial_indices);
  Tensor t3 = floor(gen({3, 7}, 10) * 2.0);
  expect_eq(std::get<1>(t3.topk(2, 0)), kTopkDim0_indices);
  expect_eq(std::get<1>(topk(t3, 3, 0, false)), kTopkDim0_smallest_indices);
  EXPECT_THROW(topk(x, 41), Error);
  Tensor g = tensor({0.5, 3, 2, -1}).requires_grad_();
  std::get<0>(topk(g, 2)).sum().backward();
  expect_eq(g.grad(), {0, 1, 1, 0});
}

// ---- multinomial -----------------------------------------------------------------------------

TEST(Multinomial, DeterministicUnderSeed) {
  Tensor p = tensor({0.1, 0.2, 0.3, 0.4, 1, 0, 0, 1}, {2, 4});
  manual_seed(11);
  std::vector<int64_t> a = multinomial(p, 3, true).to_vector<int64_t>();
  manual_seed(11);
  std::vector<int64_t> b = multinomial(p, 3, true).to_vector<int64_t>();
  EXPECT_EQ(a, b);
  manual_seed(11);
  Tensor w = multinomial(p, 2);
  EXPECT_EQ(w.shape(), (Shape{2, 2}));
  EXPECT_EQ(w.dtype(), kInt64);
  // Row 1 has two possible categories, both drawn once without replacement.
  std::vector<int64_t> r1 = w.to_vector<int64_t>();
  EXPECT_EQ(std::min(r1[2], r1[3]), 0);
  EXPECT_EQ(std::max(r1[2], r1[3]), 3);
  // Zero-probability categories never come with replacement.
  for (int64_t i : multinomial(tensor({0, 1, 0, 3}), 200, true).to_vector<int64_t>())
    EXPECT_TRUE(i == 1 || i == 3);
}

// Frequencies of 20000 draws with a fixed seed: the chi-square statistic against the
// probabilities stays under the 99.9% quantile for 3 degrees of freedom (16.27).
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& p) {
  std::vector<double> count(p.size(), 0);
  for (int64_t d : draws) count[static_cast<size_t>(d)] += 1;
  double chi = 0, n = static_cast<double>(draws.size());
  for (size_t i = 0; i < p.size(); ++i) chi += (count[i] - n * p[i]) * (count[i] - n * p[i]) / (n * p[i]);
  return chi;
}

TEST(Multinomial, DistributionWithAndWithoutReplacement) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  manual_seed(5);
  EXPECT_LT(chi_square(multinomial(tensor({1, 2, 3, 4}), 20000, true).to_vector<int64_t>(), p), 16.27);
  // Without replacement, one draw per row of 20000 identical rows has the same law.
  std::vector<double> rows;
  for (int i = 0; i < 20000; ++i) rows.insert(rows.end(), {1, 2, 3, 4});
  manual_seed(6);
  EXPECT_LT(chi_square(multinomial(tensor(rows, {20000, 4}), 1).to_vector<int64_t>(), p), 16.27);
  // The first of two draws without replacement: category 3 first with p 0.4.
  manual_seed(7);
  std::vector<int64_t> two = multinomial(tensor(rows, {20000, 4}), 2).to_vector<int64_t>();
  int64_t firsts = 0;
  for (size_t i = 0; i < two.size(); i += 2) {
    EXPECT_NE(two[i], two[i + 1]);
    firsts += two[i] == 3;
  }
  EXPECT_NEAR(firsts / 20000.0, 0.4, 0.015);
}

TEST(Multinomial, Errors) {
  EXPECT_THROW(multinomial(tensor({0.5, -0.1, 0.6}), 1), Error);
  EXPECT_THROW(multinomial(tensor({0.5, std::numeric_limits<double>::infinity()}), 1), Error);
  EXPECT_THROW(multinomial(tensor({0.5, std::nan("")}), 1), Error);
  EXPECT_THROW(multinomial(tensor({0, 0}, {1, 2}), 1), Error);
  EXPECT_THROW(multinomial(tensor({0.5, 0.5}), 3), Error);       // > categories, no replacement
  EXPECT_THROW(multinomial(tensor({0.0, 0.5, 0.0}), 2), Error);  // one nonzero category for 2
  EXPECT_THROW(multinomial(tensor({0.5, 0.5}), 0), Error);
  EXPECT_THROW(multinomial(ones({2, 2, 2}), 1), Error);
  EXPECT_THROW(multinomial(tensor({1, 1}, {2}, TensorOptions().dtype(kInt64)), 1), Error);
  try {
    multinomial(tensor({0.5, -0.1}), 1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element < 0"), std::string::npos) << e.what();
  }
}

// ---- modules ---------------------------------------------------------------------------------

void set(Tensor& p, const Tensor& v) {
  NoGradGuard g;
  p.copy_(v);
}
void mha_params(const nn::MultiheadAttention& m, int base) {
  set(m->in_proj_weight, gen({24, 8}, base) * 0.3);
  set(m->in_proj_bias, gen({24}, base + 1) * 0.1);
  set(m->out_proj->weight, gen({8, 8}, base + 2) * 0.3);
  set(m->out_proj->bias, gen({8}, base + 3) * 0.1);
}

TEST(MultiheadAttention, NamesShapesAndInit) {
  nn::MultiheadAttention m(8, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  EXPECT_EQ(m->in_proj_weight.shape(), (Shape{24, 8}));
  EXPECT_EQ(values(m->in_proj_bias), std::vector<double>(24, 0.0));
  EXPECT_EQ(values(m->out_proj->bias), std::vector<double>(8, 0.0));
  const double bound = std::sqrt(6.0 / 32);  // xavier_uniform_ of [24, 8]
  for (double w : values(m->in_proj_weight)) EXPECT_LE(std::fabs(w), bound);
  EXPECT_THROW(nn::MultiheadAttention(10, 3), Error);
  // bias = false: no bias parameters (PyTorch's names), and forward still runs.
  nn::MultiheadAttention nb(8, 2, 0.0, false);
  names.clear();
  for (auto& [n, p] : nb.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
  Tensor x = gen({3, 2, 8}, 14);
  auto [o, w] = nb.forward(x, x, x);
  EXPECT_EQ(o.shape(), (Shape{3, 2, 8}));
  EXPECT_EQ(w.shape(), (Shape{2, 3, 3}));
  expect_near(std::get<0>(nb.forward(x, x, x, {}, false)), values(o), 1e-5);
  // Unbatched [L, E] input.
  EXPECT_EQ(nb.forward(gen({3, 8}, 1)).shape(), (Shape{3, 8}));
  EXPECT_THROW(nb.forward(gen({3, 2, 7}, 1)), Error);
}

TEST(MultiheadAttention, SelfAttentionMatchesPyTorch) {
  nn::MultiheadAttention m(8, 2);
  mha_params(m, 20);
  Tensor x = gen({3, 2, 8}, 14);
  auto [o, w] = m.forward(x, x, x);
  expect_near(o, kMhaSelf_out);
  expect_near(w, kMhaSelf_weights);
  // need_weights = false: the fused path, same output.
  auto [o2, w2] = m.forward(x, x, x, {}, false);
  EXPECT_FALSE(w2.defined());
  expect_near(o2, kMhaSelf_out);
  // key_padding_mask (bool) with a float attn_mask.
  Tensor kpm = tensor({0, 0, 0, 0, 0, 1}, {2, 3}, TensorOptions().dtype(kBool));
  auto [o3, w3] = m.forward(x, x, x, kpm, false, gen({3, 3}, 15) * 0.5);
  expect_near(o3, kMhaMasked_out);
}

TEST(MultiheadAttention, CrossAttentionBatchFirstPerHeadWeights) {
  nn::MultiheadAttention m(8, 2, 0.0, true, true);
  mha_params(m, 30);
  std::vector<double> am;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) am.push_back((i + j) % 4 == 3);
  auto [o, w] = m.forward(gen({2, 3, 8}, 16), gen({2, 4, 8}, 17), gen({2, 4, 8}, 18), {}, true,
                          tensor(am, {3, 4}, TensorOptions().dtype(kBool)), false);
  expect_near(o, kMhaCross_out);
  EXPECT_EQ(w.shape(), (Shape{2, 2, 3, 4}));
  expect_near(w, kMhaCross_weights);
}

void tel_params(nn::TransformerEncoderLayer& l, int base) {
  mha_params(l->self_attn, base);
  set(l->linear1->weight, gen({16, 8}, base + 4) * 0.3);
  set(l->linear1->bias, gen({16}, base + 5) * 0.1);
  set(l->linear2->weight, gen({8, 16}, base + 6) * 0.3);
  set(l->linear2->bias, gen({8}, base + 7) * 0.1);
  set(l->norm1->weight, gen({8}, base + 8) * 0.1 + 1.0);
  set(l->norm1->bias, gen({8}, base + 9) * 0.1);
  set(l->norm2->weight, gen({8}, base + 10) * 0.1 + 1.0);
  set(l->norm2->bias, gen({8}, base + 11) * 0.1);
}

TEST(TransformerEncoderLayer, NamesMatchPyTorch) {
  nn::TransformerEncoderLayer l(8, 2, 16);
  std::vector<std::string> names;
  for (auto& [n, p] : l.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "self_attn.in_proj_weight", "self_attn.in_proj_bias",
                       "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                       "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
                       "norm1.bias", "norm2.weight", "norm2.bias"}));
  EXPECT_THROW(nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"), Error);
}

TEST(TransformerEncoderLayer, PostAndPreNormMatchPyTorch) {
  const std::map<std::string, std::pair<const std::vector<double>*, const std::vector<double>*>> want = {
      {"PostRelu", {&kTelPostRelu, &kTelPostReluCausal}},
      {"PostGelu", {&kTelPostGelu, &kTelPostGeluCausal}},
      {"PreRelu", {&kTelPreRelu, &kTelPreReluCausal}},
      {"PreGelu", {&kTelPreGelu, &kTelPreGeluCausal}}};
  Tensor src = gen({4, 2, 8}, 19);
  for (bool norm_first : {false, true})
    for (std::string act : {"relu", "gelu"}) {
      const std::string name = std::string(norm_first ? "Pre" : "Post") + (act == "relu" ? "Relu" : "Gelu");
      SCOPED_TRACE(name);
      nn::TransformerEncoderLayer l(8, 2, 16, 0.0, act, 1e-5, false, norm_first);
      tel_params(l, 40);
      l.eval();
      expect_near(l.forward(src), *want.at(name).first, 5e-5);
      expect_near(l.forward(src, {}, {}, true), *want.at(name).second, 5e-5);
      // The causal mask given as PyTorch's float square-subsequent mask.
      Tensor causal = triu(full({4, 4}, -std::numeric_limits<double>::infinity()), 1);
      expect_near(l.forward(src, causal), *want.at(name).second, 5e-5);
    }
}

TEST(TransformerEncoderLayer, TrainsWithDropout) {
  manual_seed(1);
  nn::TransformerEncoderLayer l(8, 2, 16, 0.1, "gelu", 1e-5, true, true);
  Tensor x = gen({2, 5, 8}, 3);
  Tensor y = l.forward(x, {}, {}, true);
  (y * y).mean().backward();
  for (auto& [n, p] : l.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    double s = 0;
    for (double g : values(p.grad())) s += std::fabs(g);
    EXPECT_GT(s, 0) << n;
  }
}

}  // namespace
