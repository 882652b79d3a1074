// Shape-polymorphic plans (DESIGN I6, issue 15 part 2): a plan is keyed with sizes as
// symbols, so a new batch size or sequence length instantiates the cached plan instead of
// planning again. Every test compares values against a run whose plans are all built fresh
// (the plan cache cleared before each step), so an instance that differs from the plan the
// graph would get fails here; coincidences (a batch equal to a hidden size), size-1 dims and
// the last partial batch of an epoch must make extra plans, never wrong hits.
#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/settings.h"
#include "lazy/scheduler.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

// Deterministic host data for a batch: x [b, in] and labels in [0, classes).
Tensor batch_x(int64_t b, int64_t in, int step) {
  std::vector<float> v(static_cast<size_t>(b * in));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step));
  return from_vector(v, {b, in});
}
Tensor batch_y(int64_t b, int64_t classes, int step) {
  std::vector<int64_t> v(static_cast<size_t>(b));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7 + step) % classes);
  return from_vector(v, {b});
}

struct MlpRun {
  std::vector<double> losses;
  std::vector<float> params;  // every parameter after the last step, flattened
  Metrics metrics;
};

// Trains MLP(sizes) with SGD (momentum when asked) on one batch per entry of `batches`.
// fresh: clear the plan cache before every step, so every plan is built from scratch.
MlpRun train_mlp(const std::vector<int64_t>& sizes, const std::vector<int64_t>& batches,
                 bool fresh, double momentum = 0) {
  manual_seed(7);
  auto model = std::make_shared<nn::MLP>(sizes);
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = momentum});
  mark_step();
  lazy::clear_plan_cache();
  reset_metrics();
  MlpRun r;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (fresh) lazy::clear_plan_cache();
    Tensor x = batch_x(batches[i], sizes.front(), static_cast<int>(i));
    Tensor y = batch_y(batches[i], sizes.back(), static_cast<int>(i));
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    mark_step();
    r.losses.push_back(loss.item());
  }
  r.metrics = metrics();
  for (const Tensor& p : model->parameters()) {
    std::vector<float> v = p.to_vector<float>();
    r.params.insert(r.params.end(), v.begin(), v.end());
  }
  return r;
}

void expect_same_values(const MlpRun& a, const MlpRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-6 * (1 + std::abs(b.losses[i]))) << "step " << i;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    ASSERT_NEAR(a.params[i], b.params[i], 1e-6f * (1 + std::abs(b.params[i]))) << "parameter element " << i;
}

TEST(DynamicShapes, MlpOnHundredBatchSizesPlansOnce) {
  const std::vector<int64_t> sizes = {20, 32, 10};
  std::vector<int64_t> batches;
  for (int64_t b = 33; b < 133; ++b) batches.push_back(b);  // none equals 20, 32 or 10
  const MlpRun dyn = train_mlp(sizes, batches, false, /*momentum=*/0.9);
  // The first step (no momentum buffers yet) and the steady step: two structures.
  EXPECT_LE(dyn.metrics.plan_cache_misses, 2) << dyn.metrics.last_miss_reason;
  EXPECT_GE(dyn.metrics.plan_instantiations, 97);
  const MlpRun ref = train_mlp(sizes, batches, true, /*momentum=*/0.9);
  EXPECT_EQ(ref.metrics.plan_cache_misses, 100);
  expect_same_values(dyn, ref);
}

// More sizes than a plan keeps executables for (128): evicted instances are made again, with
// the same values.
TEST(DynamicShapes, MlpCyclingSizesPastTheInstanceCache) {
  const std::vector<int64_t> sizes = {30, 24, 10};
  std::vector<int64_t> batches;
  for (int rep = 0; rep < 2; ++rep)
    for (int64_t b = 31; b < 171; ++b) batches.push_back(b);
  const MlpRun dyn = train_mlp(sizes, batches, false, /*momentum=*/0.9);
  EXPECT_LE(dyn.metrics.plan_cache_misses, 2) << dyn.metrics.last_miss_reason;
  EXPECT_GE(dyn.metrics.plan_instantiations, 270);  // 140 sizes, twice (128 kept: all evicted)
  expect_same_values(dyn, train_mlp(sizes, batches, true, /*momentum=*/0.9));
}

// A batch equal to a hidden size (or the input size, or the class count) is a coincidence.
// The general plan (made where all sizes differ) serves it, mapped: equal sizes stay valid in
// a plan that treats them as distinct. A plan made at the coincidence must not serve the
// general case: that is a new plan, never a wrong hit.
TEST(DynamicShapes, BatchEqualToAHiddenSizeUsesTheGeneralPlan) {
  const std::vector<int64_t> sizes = {12, 16, 5};
  const std::vector<int64_t> batches = {8, 16, 24, 16, 8, 5, 12, 9};
  const MlpRun dyn = train_mlp(sizes, batches, false);
  EXPECT_EQ(dyn.metrics.plan_cache_misses, 1) << dyn.metrics.last_miss_reason;
  // 16, 24, 5, 12, 9: each new sizes once; 16 and 8 again reuse their executables.
  EXPECT_EQ(dyn.metrics.plan_instantiations, 5);
  expect_same_values(dyn, train_mlp(sizes, batches, true));

  // Made at the coincidence first, then the general case: the sizes that coincide (batch
  // 16 == hidden 16) are not forced equal by any op, so the first plan is already the
  // general one (made at stand-in sizes, lazy/size_provenance.h) and the rest take it.
  const std::vector<int64_t> reversed = {16, 8, 16, 8, 12};
  const MlpRun rev = train_mlp(sizes, reversed, false);
  EXPECT_EQ(rev.metrics.plan_cache_misses, 1) << rev.metrics.last_miss_reason;
  EXPECT_EQ(rev.metrics.plans_generalized, 1);
  EXPECT_EQ(rev.metrics.plan_instantiations, 2);  // 8, then 12 (coincides with the input size)
  expect_same_values(rev, train_mlp(sizes, reversed, true));
}

// A coincidence the pass does not split (a reshape that regroups dims on both sides, [6, 6]
// -> [4, 9]: which sizes make up which is not followed) is planned at the sizes as before;
// the general case is then a miss that names the coincidence, never a wrong hit.
TEST(DynamicShapes, MissReasonNamesTheCoincidence) {
  auto regroup = [](int64_t n, int64_t m, int64_t a, int64_t b) {
    return randn({n, m}).reshape({a, b}) * 2.0;
  };
  mark_step();
  lazy::clear_plan_cache();
  reset_metrics();
  Tensor a = regroup(6, 6, 4, 9);
  mark_step();
  EXPECT_EQ(metrics().plans_generalized, 0);
  reset_metrics();
  Tensor b = regroup(6, 4, 3, 8);
  mark_step();
  EXPECT_EQ(metrics().plan_cache_misses, 1);
  const std::string& r = metrics().last_miss_reason;
  EXPECT_NE(r.find("a size forced a new plan"), std::string::npos) << r;
  EXPECT_NE(r.find("is 4 here (6 in the cached plan)"), std::string::npos) << r;
  EXPECT_NE(r.find("coincided"), std::string::npos) << r;
  Tensor c = regroup(6, 6, 4, 9);  // the coincidence again: its own plan, cached
  mark_step();
  EXPECT_EQ(metrics().plan_cache_misses, 1);
}

// A size-1 dim broadcasts (fusion differs), so a batch of one gets its own plan.
TEST(DynamicShapes, BatchOfOneGetsItsOwnPlan) {
  const std::vector<int64_t> sizes = {6, 7, 3};
  const std::vector<int64_t> batches = {4, 1, 5, 1};
  const MlpRun dyn = train_mlp(sizes, batches, false);
  EXPECT_EQ(dyn.metrics.plan_cache_misses, 2) << dyn.metrics.last_miss_reason;
  EXPECT_EQ(dyn.metrics.plan_instantiations, 1);
  expect_same_values(dyn, train_mlp(sizes, batches, true));
}

// An epoch's last partial batch instantiates once; the next epoch reuses both instances.
TEST(DynamicShapes, LastPartialBatchOfAnEpoch) {
  std::vector<float> xs(100 * 9);
  std::vector<int64_t> ys(100);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(std::cos(0.11 * i));
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>(i % 5);
  data::TensorDataset ds(xs, {9}, ys);
  auto run = [&](bool fresh) {
    manual_seed(3);
    auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{9, 11, 5});
    optim::SGD opt(model->parameters(), 0.1);
    mark_step();
    lazy::clear_plan_cache();
    reset_metrics();
    data::DataLoader loader(ds, 32);  // 32, 32, 32, 4 (no size of the model is 4)
    std::vector<double> losses;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& b : loader) {
        if (fresh) lazy::clear_plan_cache();
        opt.zero_grad();
        Tensor loss = cross_entropy(model->forward(b.x), b.y);
        loss.backward();
        opt.step();
        mark_step();
        losses.push_back(loss.item());
      }
    return std::make_pair(losses, metrics());
  };
  const auto [dyn, m] = run(false);
  EXPECT_EQ(m.plan_cache_misses, 1) << m.last_miss_reason;
  EXPECT_EQ(m.plan_instantiations, 1);
  EXPECT_EQ(m.plan_cache_hits, 7);
  const auto [ref, mref] = run(true);
  ASSERT_EQ(dyn.size(), 8u);
  for (size_t i = 0; i < dyn.size(); ++i) EXPECT_NEAR(dyn[i], ref[i], 1e-6) << "step " << i;
}

// Alternating sizes: each instance is compiled once, then reused.
TEST(DynamicShapes, AlternatingSizesInstantiateOnce) {
  const MlpRun r = train_mlp({5, 8, 3}, {40, 50, 40, 50, 40, 50}, false);
  EXPECT_EQ(r.metrics.plan_cache_misses, 1);
  EXPECT_EQ(r.metrics.plan_instantiations, 1);
  EXPECT_EQ(r.metrics.plan_cache_hits, 5);
}

// Slices up to a sequence length and reshapes through products of sizes ([B, S, D] ->
// [B*S, D]) are symbolic too: one plan for every length, exact values.
TEST(DynamicShapes, SliceAndReshapeFollowTheSequenceLength) {
  const int64_t B = 3, D = 4, kMax = 40;
  Tensor pe = randn({kMax, D});
  Tensor w = randn({D, 6});
  mark_step();
  const std::vector<float> pev = pe.to_vector<float>(), wv = w.to_vector<float>();
  lazy::clear_plan_cache();
  reset_metrics();
  for (int64_t S : {10, 17, 25, 33, 17}) {
    std::vector<float> xv(static_cast<size_t>(B * S * D));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(std::sin(0.3 * i + S));
    Tensor x = from_vector(xv, {B, S, D});
    Tensor h = (x + pe.slice(0, 0, S)).reshape({B * S, D});
    Tensor y = matmul(h, w).reshape({B, S, 6}).sum(1);
    const std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), static_cast<size_t>(B * 6));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < 6; ++j) {
        double want = 0;
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            want += (double(xv[(b * S + s) * D + d]) + pev[s * D + d]) * wv[d * 6 + j];
        EXPECT_NEAR(got[b * 6 + j], want, 1e-4 * (1 + std::abs(want))) << "S=" << S;
      }
  }
  EXPECT_EQ(metrics().plan_cache_misses, 1) << metrics().last_miss_reason;
  EXPECT_EQ(metrics().plan_instantiations, 3);
}

// Large rows: the CPU backend runs softmax's steps row block by row block (row groups, which
// depend on sizes) and fuses prologues into reductions; instances made from another size's
// executable must compute the same values.
TEST(DynamicShapes, RowGroupsAndFusedReductionsAtNewSizes) {
  const int64_t C = 1024;
  lazy::clear_plan_cache();
  reset_metrics();
  for (int64_t B : {70, 130, 96, 130}) {
    std::vector<float> xv(static_cast<size_t>(B * C));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(std::sin(0.013 * i + B));
    Tensor x = from_vector(xv, {B, C});
    Tensor sm = softmax(x * 3.0, 1);
    Tensor ss = ((x - x.mean({1}, true)) * (x - x.mean({1}, true))).sum({1});
    sync({sm, ss});
    const std::vector<float> smv = sm.to_vector<float>(), ssv = ss.to_vector<float>();
    for (int64_t r = 0; r < B; r += 7) {
      double mx = -1e30, z = 0, mean = 0, sq = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, 3.0 * xv[r * C + c]), mean += xv[r * C + c];
      mean /= C;
      for (int64_t c = 0; c < C; ++c) {
        z += std::exp(3.0 * xv[r * C + c] - mx);
        sq += (xv[r * C + c] - mean) * (xv[r * C + c] - mean);
      }
      for (int64_t c = 0; c < C; c += 97)
        ASSERT_NEAR(smv[r * C + c], std::exp(3.0 * xv[r * C + c] - mx) / z, 1e-6) << "B=" << B;
      ASSERT_NEAR(ssv[r], sq, 1e-3 * (1 + sq)) << "B=" << B;
    }
  }
  EXPECT_EQ(metrics().plan_cache_misses, 1) << metrics().last_miss_reason;
  EXPECT_EQ(metrics().plan_instantiations, 2);
}

// The instances of one plan share its slot table and its programs' size-independent parts
// (only the sizes, the bound layouts and the row groups are an instance's own): sizes taking
// turns, with row groups at some sizes (B * C >= 2^16) and not at others, and inputs donated
// to outputs in place, must give each size's values whatever ran before it.
TEST(DynamicShapes, InstancesOfOnePlanTakingTurns) {
  const int64_t C = 1024;
  Tensor w = randn({C});
  mark_step();
  const std::vector<float> wv = w.to_vector<float>();
  lazy::clear_plan_cache();
  reset_metrics();
  const std::vector<int64_t> order = {40, 130, 40, 96, 130, 17, 96, 40, 17, 130};
  for (size_t step = 0; step < order.size(); ++step) {
    const int64_t B = order[step];
    std::vector<float> xv(static_cast<size_t>(B * C));
    for (size_t i = 0; i < xv.size(); ++i)
      xv[i] = static_cast<float>(std::sin(0.011 * i + 0.7 * step));
    // x is dead after the step (only this graph holds it): its buffer may be donated.
    Tensor y = softmax(from_vector(xv, {B, C}) * w, 1) * 2.0 + 1.0;
    const std::vector<float> yv = y.to_vector<float>();
    ASSERT_EQ(yv.size(), static_cast<size_t>(B * C));
    for (int64_t r = 0; r < B; r += 5) {
      double mx = -1e30, z = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(xv[r * C + c]) * wv[c]);
      for (int64_t c = 0; c < C; ++c) z += std::exp(double(xv[r * C + c]) * wv[c] - mx);
      for (int64_t c = 0; c < C; c += 31)
        ASSERT_NEAR(yv[r * C + c], 2.0 * std::exp(double(xv[r * C + c]) * wv[c] - mx) / z + 1.0,
                    1e-5)
            << "B=" << B << " step " << step << " row " << r << " col " << c;
    }
  }
  EXPECT_EQ(metrics().plan_cache_misses, 1) << metrics().last_miss_reason;
  EXPECT_EQ(metrics().plan_instantiations, 3);  // 130, 96, 17 (40 made the plan)
}

// Shape errors are still found when the op is recorded, with a cached symbolic plan around.
TEST(DynamicShapes, ShapeErrorsStillAtRecordTime) {
  Tensor w = randn({12, 16});
  Tensor ok = matmul(randn({8, 12}), w);
  mark_step();
  Tensor x = randn({9, 13});
  EXPECT_THROW(matmul(x, w), Error);
  Tensor again = matmul(randn({9, 12}), w);  // nothing was lost
  EXPECT_EQ(again.shape(), (Shape{9, 16}));
}

// A small pre-norm encoder layer (d 16, 2 heads, GELU MLP 32, causal use) seeded with `seed`,
// and its AdamW; its initial state flushed, then the plan cache and metrics cleared.
struct BlockAndAdamW {
  std::shared_ptr<nn::TransformerEncoderLayer> block;
  std::unique_ptr<optim::AdamW> opt;
};
BlockAndAdamW small_block_with_adamw(uint64_t seed) {
  manual_seed(seed);
  auto block = std::make_shared<nn::TransformerEncoderLayer>(16, 2, 32, /*dropout=*/0.0, "gelu",
                                                             1e-5, /*batch_first=*/true,
                                                             /*norm_first=*/true);
  auto opt = std::make_unique<optim::AdamW>(block->parameters(), optim::AdamWOptions{.lr = 1e-3});
  mark_step();
  lazy::clear_plan_cache();
  reset_metrics();
  return {std::move(block), std::move(opt)};
}

// A transformer encoder layer on sequence lengths 8..64: few plans, values of fresh plans.
TEST(DynamicShapes, TransformerOnVaryingSequenceLengths) {
  const std::vector<int64_t> lens = {8, 13, 21, 34, 55, 64, 9, 40};
  int64_t after_two = 0;
  auto run = [&](bool fresh) {
    auto [block, opt] = small_block_with_adamw(21);
    std::vector<double> losses;
    for (size_t i = 0; i < lens.size(); ++i) {
      if (fresh) lazy::clear_plan_cache();
      const int64_t S = lens[i];
      std::vector<float> xv(static_cast<size_t>(2 * S * 16)), tv(xv.size());
      for (size_t k = 0; k < xv.size(); ++k) {
        xv[k] = static_cast<float>(std::sin(0.21 * k + i));
        tv[k] = static_cast<float>(std::cos(0.13 * k));
      }
      opt->zero_grad();
      Tensor loss = mse_loss(block->forward(from_vector(xv, {2, S, 16}), {}, {}, /*is_causal=*/true),
                             from_vector(tv, {2, S, 16}));
      loss.backward();
      opt->step();
      mark_step();
      losses.push_back(loss.item());
      if (i == 1) after_two = metrics().plan_cache_misses;
    }
    return std::make_pair(losses, metrics());
  };
  // Plans: AdamW's state (made on its first step) and the step. The first length, 8, equals
  // the head dim (16 / 2), and the batch 2 the head count: no op forces these equal, so the
  // step's plan is made at stand-in sizes that keep them apart and serves every later length.
  // (The first and later steps are one structure: roots are ordered by structure.)
  const auto [dyn, m] = run(false);
  EXPECT_EQ(m.plan_cache_misses, 2) << m.last_miss_reason;
  EXPECT_GE(m.plans_generalized, 1);
  EXPECT_EQ(m.plan_cache_misses, after_two) << m.last_miss_reason;
  EXPECT_EQ(m.plan_instantiations, static_cast<int64_t>(lens.size()) - 1);
  const auto [ref, mref] = run(true);
  for (size_t i = 0; i < dyn.size(); ++i)
    EXPECT_NEAR(dyn[i], ref[i], 1e-6 * (1 + std::abs(ref[i]))) << "step " << i;
}

// ---- root order (issue 15 part 2: one plan per step) ----
// The roots of a flush come in the order their tensors were created; the plan is keyed on the
// order its values are numbered in. A step that creates the same tensors in another order (as
// AdamW's moments are the newest tensors on its first step and older ones later) must take the
// same plan, and each tensor must get its own value.
TEST(DynamicShapes, RootsInAnotherCreationOrderReuseThePlan) {
  auto x_of = [](int64_t n, int step) {
    std::vector<float> v(static_cast<size_t>(n * 4));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.7 * i + step));
    return from_vector(v, {n, 4});
  };
  const std::vector<int64_t> ns = {5, 5, 9, 9, 6, 7};
  auto run = [&](bool fresh) {
    mark_step();
    lazy::clear_plan_cache();
    reset_metrics();
    std::vector<std::vector<float>> out;
    for (size_t k = 0; k < ns.size(); ++k) {
      if (fresh) lazy::clear_plan_cache();
      Tensor x = x_of(ns[k], static_cast<int>(k));
      mark_step();
      Tensor a, b, c;
      if (k % 2 == 0) {  // created a, b, c
        a = sin(x) + 1.0;
        b = x * x;
        c = sum(exp(x), Shape{1});
      } else {  // created c, b, a
        c = sum(exp(x), Shape{1});
        b = x * x;
        a = sin(x) + 1.0;
      }
      if (k == 4) sync({b, c, a});  // an explicit sync in yet another order
      else mark_step();
      for (const Tensor& t : {a, b, c}) out.push_back(t.to_vector<float>());
      // The right value in the right tensor.
      const std::vector<float> xv = x.to_vector<float>(), av = a.to_vector<float>(),
                               bv = b.to_vector<float>(), cv = c.to_vector<float>();
      for (size_t i = 0; i < xv.size(); ++i) {
        EXPECT_NEAR(av[i], std::sin(xv[i]) + 1.0f, 1e-6f) << "a, step " << k;
        EXPECT_NEAR(bv[i], xv[i] * xv[i], 1e-6f) << "b, step " << k;
      }
      for (int64_t r = 0; r < ns[k]; ++r) {
        double e = 0;
        for (int j = 0; j < 4; ++j) e += std::exp(static_cast<double>(xv[r * 4 + j]));
        EXPECT_NEAR(cv[r], e, 1e-5 * e) << "c, step " << k;
      }
    }
    return std::make_pair(out, metrics());
  };
  const auto [dyn, m] = run(false);
  // One plan for the step (the inputs' own flush is a copy of host data: no plan).
  EXPECT_EQ(m.plan_cache_misses, 1) << m.last_miss_reason;
  EXPECT_EQ(m.plan_instantiations, 3);  // 9, 6, 7
  const auto [ref, mref] = run(true);
  ASSERT_EQ(dyn.size(), ref.size());
  for (size_t i = 0; i < dyn.size(); ++i) EXPECT_EQ(dyn[i], ref[i]) << "tensor " << i;
}

// AdamW's first step (its moments the newest tensors) and later steps (the moments older than
// the step's gradients) are one plan: with a first length that coincides with no other size,
// AdamW's state and the step are the only plans.
TEST(DynamicShapes, TransformerFirstAndLaterStepsShareAPlan) {
  const std::vector<int64_t> lens = {13, 21, 34, 9, 55, 64, 8, 40};
  auto [block, opt] = small_block_with_adamw(22);
  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t S = lens[i];
    opt->zero_grad();
    Tensor loss = mse_loss(block->forward(randn({3, S, 16}), {}, {}, /*is_causal=*/true),
                           randn({3, S, 16}));
    loss.backward();
    opt->step();
    mark_step();
    (void)loss.item();
  }
  const Metrics m = metrics();
  EXPECT_EQ(m.plan_cache_misses, 2) << m.last_miss_reason;
  EXPECT_EQ(m.plan_instantiations, static_cast<int64_t>(lens.size()) - 1);
}

// The order of a flush's roots decides the order of a fused kernel's instructions; whatever
// it is, an output written in place over an operand's buffer must not clobber a later load
// of that buffer (here `a` is loaded as uint8 for -a + 300 and as float for a / 255, and
// -a + 300 may take a's buffer, dead after the kernel). In the structural root order the
// kernel computes -a + 300 before a / 255.
TEST(DynamicShapes, InPlaceOutputBeforeAnotherLoadOfItsBuffer) {
  using U = std::vector<uint8_t>;
  std::vector<Tensor> out;
  {
    Tensor a = from_vector(U{250, 3, 128, 0}, {4}), b = from_vector(U{10, 5, 128, 1}, {4});
    out = {(a + b) * 3 - 7, (a.to(kFloat) / 255.0) * (b > 4), -a + 300};
  }  // only the graph holds a and b: their buffers may be donated
  sync(out);
  const std::vector<float> scaled = out[1].to_vector<float>();
  const std::vector<float> want = {250 / 255.f, 3 / 255.f, 128 / 255.f, 0.f};  // b > 4: 1, 1, 1, 0
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(scaled[i], want[i]) << i;
  EXPECT_EQ(out[2].to(kFloat).to_vector<float>(), (std::vector<float>{50, 41, 172, 44}));
  EXPECT_EQ(out[0].to(kFloat).to_vector<float>(), (std::vector<float>{5, 17, 249, 252}));
}

}  // namespace

// ---- size provenance: coincidences that ops do not force (lazy/size_provenance.h) ----
namespace provenance {

Tensor data_of(const Shape& shape, int seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + 0.9 * seed));
  return from_vector(v, shape);
}

struct SizesRun {
  std::vector<std::vector<float>> outs;
  Metrics m;
};

// Runs f(sizes, step) for each entry of `configs`; fresh: the plan cache cleared before each.
template <class F>
SizesRun run_sizes(const std::vector<std::vector<int64_t>>& configs, bool fresh, F&& f) {
  mark_step();
  lazy::clear_plan_cache();
  reset_metrics();
  SizesRun r;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (fresh) lazy::clear_plan_cache();
    Tensor y = f(configs[i], static_cast<int>(i));
    r.outs.push_back(y.to(kFloat).to_vector<float>());
  }
  r.m = metrics();
  return r;
}

// One plan for all the configs (made at the first, a coincidence, as the general plan), and
// the values of fresh plans.
template <class F>
void expect_one_general_plan(const std::vector<std::vector<int64_t>>& configs, F f) {
  const SizesRun dyn = run_sizes(configs, false, f);
  EXPECT_EQ(dyn.m.plan_cache_misses, 1) << dyn.m.last_miss_reason;
  EXPECT_EQ(dyn.m.plans_generalized, 1);
  const SizesRun ref = run_sizes(configs, true, f);
  ASSERT_EQ(dyn.outs.size(), ref.outs.size());
  for (size_t i = 0; i < dyn.outs.size(); ++i) {
    ASSERT_EQ(dyn.outs[i].size(), ref.outs[i].size()) << "config " << i;
    for (size_t k = 0; k < dyn.outs[i].size(); ++k)
      ASSERT_NEAR(dyn.outs[i][k], ref.outs[i][k], 1e-5 * (1 + std::abs(ref.outs[i][k])))
          << "config " << i << " element " << k;
  }
}

// x @ x.T: the inner dims are forced equal, rows and columns are not.
TEST(SizeProvenance, MatmulWithItsTranspose) {
  expect_one_general_plan({{8, 8}, {8, 5}, {3, 8}, {6, 6}}, [](const std::vector<int64_t>& c, int s) {
    Tensor x = data_of({c[0], c[1]}, s);
    return relu(matmul(x, x.t()) - 0.5);
  });
}

// Elementwise ops of two inputs of equal shape join their dims; a reduction keeps the rest.
TEST(SizeProvenance, ElementwiseOfTwoInputs) {
  expect_one_general_plan({{7, 7}, {7, 4}, {4, 9}, {5, 5}}, [](const std::vector<int64_t>& c, int s) {
    Tensor a = data_of({c[0], c[1]}, s), b = data_of({c[0], c[1]}, s + 7);
    return (a * b + sin(a)).sum({1});
  });
}

// Broadcasting and permutes take each result size from an operand (their shape rules are not
// run at the stand-ins, lazy/size_provenance.h): the outer sum of a column and a row of equal
// lengths, transposed, against a matrix of the transposed shape, through a three-way where.
TEST(SizeProvenance, BroadcastAndPermuteFollowTheirOperands) {
  expect_one_general_plan({{6, 6}, {6, 3}, {2, 6}, {4, 4}}, [](const std::vector<int64_t>& c, int s) {
    Tensor col = data_of({c[0], 1}, s), row = data_of({1, c[1]}, s + 1);
    Tensor m = data_of({c[1], c[0]}, s + 2);
    Tensor outer = col + row;  // [n, m]
    return (outer.t() * m + where(m > 0.0, m, outer.permute({1, 0}))).sum({0});
  });
}

// Reshape through products of sizes ([n, m] -> [n * m] -> [m, n]), against an input of the
// product's size: the product is a derived size, made of the stand-ins of its factors.
TEST(SizeProvenance, ReshapeProducts) {
  expect_one_general_plan({{4, 4}, {4, 6}, {6, 4}, {3, 3}}, [](const std::vector<int64_t>& c, int s) {
    Tensor x = data_of({c[0], c[1]}, s), w = data_of({c[0] * c[1]}, s + 3);
    return (x.reshape({c[0] * c[1]}) * w).reshape({c[1], c[0]}).sum({0});
  });
}

// In-place writes through views of 8 row blocks (slice + transpose + add_), 48 of them:
// each slice's bounds reject the first stand-ins, and pinning one slice per attempt gave up
// after 16 attempts (a plan per column count). Pinning at every rejected slice settles: the
// row blocks keep their size, the column count is general.
TEST(SizeProvenance, ManyViewWritesSettle) {
  expect_one_general_plan({{8, 8}, {8, 5}, {8, 12}}, [](const std::vector<int64_t>& c, int s) {
    const int64_t r = c[0], cols = c[1];
    Tensor base = zeros({8 * r, cols});
    Tensor bt = data_of({cols, r}, s);
    for (int i = 0; i < 48; ++i) {
      const int64_t j = i % 8;
      base.slice(0, r * j, r * j + r).t().add_(bt * double(i + 1));
    }
    return base.sum({1});
  });
}

// A slice up to the sequence length (its bound is the length's size) of a longer table,
// batch equal to the length first.
TEST(SizeProvenance, SliceToTheLength) {
  Tensor pe = data_of({40, 4}, 99), w = data_of({4, 6}, 98);
  mark_step();
  expect_one_general_plan({{5, 5}, {5, 10}, {3, 17}, {9, 9}}, [&](const std::vector<int64_t>& c, int s) {
    const int64_t B = c[0], S = c[1];
    Tensor h = (data_of({B, S, 4}, s) + pe.slice(0, 0, S)).reshape({B * S, 4});
    return matmul(h, w).reshape({B, S, 6}).sum(1);
  });
}

// A causal mask from the length (tril of ones: arange of the length, compared), batch equal
// to the length first.
TEST(SizeProvenance, CausalMaskOfTheLength) {
  expect_one_general_plan({{4, 4, 3}, {4, 7, 3}, {2, 5, 3}, {3, 3, 3}}, [](const std::vector<int64_t>& c, int s) {
    const int64_t B = c[0], L = c[1], D = c[2];
    Tensor x = data_of({B, L, D}, s);
    Tensor scores = matmul(x, x.transpose(1, 2));
    Tensor keep = tril(ones({L, L}, TensorOptions().dtype(DType::kBool)));
    return softmax(masked_fill(scores, logical_not(keep), -1e9), -1);
  });
}

// SLOTH_LOG=plans says why each new plan was made, and whether it was made general or why not.
TEST(SizeProvenance, LogExplainsGeneralAndFallbackPlans) {
  const std::string saved = settings_for_test().log;
  settings_for_test().log = "plans";
  mark_step();
  lazy::clear_plan_cache();
  testing::internal::CaptureStderr();
  {
    Tensor x = randn({8, 8});
    Tensor y = matmul(x, x.t());
    mark_step();
    Tensor z = randn({6, 6}).reshape({4, 9}) * 2.0;
    mark_step();
  }
  const std::string log = testing::internal::GetCapturedStderr();
  settings_for_test().log = saved;
  EXPECT_NE(log.find("general plan: sizes that coincide here are not forced equal"), std::string::npos) << log;
  EXPECT_NE(log.find("(8 -> 9)"), std::string::npos) << log;
  EXPECT_NE(log.find("sizes were not followed through the ops (a reshape that regroups dims on both sides"),
            std::string::npos) << log;
}

// cat has no size rule of its own (its result's cat dim is the sum of its operands', which
// stand-ins break): its shape rule rejects the stand-ins, the sizes it touches keep their
// values, and here that keeps every coincidence, so the first plan is made for its sizes as
// before (and the log says why); later sizes take a general plan. Values are exact throughout.
TEST(SizeProvenance, OpWithoutARuleFallsBack) {
  const std::vector<std::vector<int64_t>> configs = {{6, 6}, {6, 4}, {4, 6}, {5, 5}};
  auto f = [](const std::vector<int64_t>& c, int s) {
    return cat({data_of({c[0], c[1]}, s), data_of({c[0], c[1]}, s + 5)}, 0) * 3.0;
  };
  const std::string saved = settings_for_test().log;
  settings_for_test().log = "plans";
  testing::internal::CaptureStderr();
  const SizesRun dyn = run_sizes(configs, false, f);
  const std::string log = testing::internal::GetCapturedStderr();
  settings_for_test().log = saved;
  EXPECT_EQ(dyn.m.plan_cache_misses, 2) << dyn.m.last_miss_reason;
  EXPECT_EQ(dyn.m.plans_generalized, 0);
  EXPECT_NE(log.find("sizes were not followed through the ops (cat's shape rule does not accept the stand-in sizes"),
            std::string::npos) << log;
  const SizesRun ref = run_sizes(configs, true, f);
  ASSERT_EQ(dyn.outs.size(), ref.outs.size());
  for (size_t i = 0; i < dyn.outs.size(); ++i) EXPECT_EQ(dyn.outs[i], ref.outs[i]) << "config " << i;
}

// A graph without coincidences is planned as before (nothing to split).
TEST(SizeProvenance, NoCoincidenceNoStandIns) {
  const SizesRun r = run_sizes({{3, 5}, {4, 6}}, false, [](const std::vector<int64_t>& c, int s) {
    return matmul(data_of({c[0], c[1]}, s), data_of({c[1], 7}, s + 1));
  });
  EXPECT_EQ(r.m.plan_cache_misses, 1);
  EXPECT_EQ(r.m.plans_generalized, 0);
}

}  // namespace provenance
