// nn::DistributedDataParallel. Run as a plain test (a 1-process world) and under
// `mpirun -np 2` / `-np 3` (tests/dist_mpi_test.sh). Each rank trains the DDP model on its
// shard (batch B) of a global batch of world*B rows and, in the same process, a plain copy of
// the starting model on the whole global batch; after 20 steps both must hold the same
// parameters to 1e-5 (the mean loss over equal shards averages to the global mean loss).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "dist/dist.h"
#include "gtest/gtest.h"
#include "nn/distributed.h"
#include "nn/nn.h"
#include "sloth/sloth.h"
#include "tests/support/errors.h"

namespace sloth {
namespace {

struct Net : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  Net() : Module("Net") {
    fc1 = register_module("fc1", nn::Linear(5, 8));
    fc2 = register_module("fc2", nn::Linear(8, 3));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(tanh(fc1->forward(x))); }
};

constexpr int64_t kB = 4;  // rows per rank

// Row i of the global batch (the same on every rank, whatever the world size), step s.
std::vector<double> rows(int64_t first, int64_t n, int64_t width, int step, double phase) {
  std::vector<double> v;
  for (int64_t i = first; i < first + n; ++i)
    for (int64_t j = 0; j < width; ++j) v.push_back(std::sin(0.37 * i + 0.71 * j + 0.13 * step + phase));
  return v;
}
Tensor inputs(int64_t first, int64_t n, int step) { return tensor(rows(first, n, 5, step, 0), {n, 5}); }
Tensor targets(int64_t first, int64_t n, int step) { return tensor(rows(first, n, 3, step, 1), {n, 3}); }

// A model whose parameters start as `from`'s.
std::shared_ptr<Net> copy_of(nn::Module& from) {
  auto net = std::make_shared<Net>();
  NoGradGuard no_grad;
  auto src = from.parameters();
  auto dst = net->parameters();
  for (size_t k = 0; k < dst.size(); ++k) dst[k].copy_(src[k]);
  return net;
}

void expect_same_parameters(nn::Module& a, nn::Module& b, double tol) {
  auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) {
    auto va = pa[k].to_vector<float>(), vb = pb[k].to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], tol) << "parameter " << k << " element " << i;
  }
}

template <class MakeOpt>
void train_matches_one_process(double bucket_cap_mb, MakeOpt make_opt) {
  const int p = dist::world_size(), r = dist::rank();
  manual_seed(100 + r);  // different on every rank: DDP must broadcast rank 0's model
  auto model = std::make_shared<Net>();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(model, bucket_cap_mb);
  auto ref = copy_of(*model);
  auto opt = make_opt(ddp->parameters());
  auto ref_opt = make_opt(ref->parameters());
  for (int step = 0; step < 20; ++step) {
    opt->zero_grad();
    mse_loss(ddp->forward(inputs(r * kB, kB, step)), targets(r * kB, kB, step)).backward();
    opt->step();
    ref_opt->zero_grad();
    mse_loss(ref->forward(inputs(0, p * kB, step)), targets(0, p * kB, step)).backward();
    ref_opt->step();
    mark_step();
  }
  expect_same_parameters(*model, *ref, 1e-5);
}

TEST(DistributedDataParallel, SgdMomentumMatchesOneProcessAtTheGlobalBatch) {
  train_matches_one_process(25, [](std::vector<Tensor> ps) {
    return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  });
}

// A tiny bucket cap: one bucket per parameter, reduced as soon as its gradient is ready.
TEST(DistributedDataParallel, AdamWWithSmallBucketsMatchesOneProcess) {
  train_matches_one_process(1e-9, [](std::vector<Tensor> ps) {
    return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
  });
}

// The collectives are ops of the step graph: a DDP training step (forward, backward with the
// buckets' all-reduces, optimizer) is one graph per mark_step and, in steady state, a plan
// cache hit (I6, I10).
TEST(DistributedDataParallel, AStepWithCommunicationIsOneGraphAndAPlanCacheHit) {
  const int r = dist::rank();
  auto model = std::make_shared<Net>();
  nn::DistributedDataParallel ddp(model, 1e-9);
  optim::SGD opt(ddp.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  auto step = [&](int s) {
    opt.zero_grad();
    mse_loss(ddp.forward(inputs(r * kB, kB, s)), targets(r * kB, kB, s)).backward();
    opt.step();
    mark_step();
  };
  for (int s = 0; s < 3; ++s) step(s);
  reset_metrics();
  for (int s = 3; s < 6; ++s) step(s);
  const Metrics m = metrics();
  EXPECT_EQ(m.graphs_executed, 3);
  EXPECT_EQ(m.plan_cache_misses, 0) << m.last_miss_reason;
  EXPECT_EQ(m.plan_cache_hits, 3);
}

TEST(DistributedDataParallel, BucketsCoverEveryParameterInReverseOrder) {
  auto ddp = std::make_shared<nn::DistributedDataParallel>(std::make_shared<Net>(), 1e-9);
  EXPECT_EQ(ddp->bucket_indices(), (std::vector<std::vector<size_t>>{{3}, {2}, {1}, {0}}));
  // 105 bytes: fc2.bias (12 B) + fc2.weight (96 B) close the first bucket.
  auto two = std::make_shared<nn::DistributedDataParallel>(std::make_shared<Net>(), 1e-4);
  EXPECT_EQ(two->bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  auto one = std::make_shared<nn::DistributedDataParallel>(std::make_shared<Net>());
  ASSERT_EQ(one->bucket_indices().size(), 1u);
  // PyTorch's names: the wrapped module is "module".
  EXPECT_EQ(one->named_parameters()[0].first, "module.fc1.weight");
}

// no_sync(): the first micro-batch's gradients stay local, the second backward averages the
// accumulated sum; the result is one process's accumulation over both global micro-batches.
TEST(DistributedDataParallel, NoSyncAccumulatesThenAverages) {
  const int p = dist::world_size(), r = dist::rank();
  auto model = std::make_shared<Net>();
  nn::DistributedDataParallel ddp(model);
  auto ref = copy_of(*model);
  {
    auto guard = ddp.no_sync();
    mse_loss(ddp.forward(inputs(r * kB, kB, 0)), targets(r * kB, kB, 0)).backward();
  }
  mse_loss(ddp.forward(inputs(r * kB, kB, 1)), targets(r * kB, kB, 1)).backward();
  mse_loss(ref->forward(inputs(0, p * kB, 0)), targets(0, p * kB, 0)).backward();
  mse_loss(ref->forward(inputs(0, p * kB, 1)), targets(0, p * kB, 1)).backward();
  auto a = model->parameters(), b = ref->parameters();
  for (size_t k = 0; k < a.size(); ++k) {
    auto ga = a[k].grad().to_vector<float>(), gb = b[k].grad().to_vector<float>();
    for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], 1e-5) << "grad " << k << " element " << i;
  }
}

TEST(DistributedDataParallel, AParameterWithoutGradientIsReportedAtTheNextForward) {
  auto model = std::make_shared<Net>();
  nn::DistributedDataParallel ddp(model, 1e-9);
  // Only fc2.bias takes part: fc2.weight, fc1.* get no gradient.
  (model->fc2->bias * 2).sum().backward();
  // fc2.bias's bucket (alone) was reduced; the others never started: nothing to report.
  ddp.forward(inputs(0, 1, 0));
  auto one = std::make_shared<Net>();
  nn::DistributedDataParallel whole(one);  // one bucket: fc2.bias ready, the rest missing
  (one->fc2->bias * 2).sum().backward();
  EXPECT_ERROR_HAS(whole.forward(inputs(0, 1, 0)), "module.fc1.weight");
  // The error resets the bucket: the next step works.
  mse_loss(whole.forward(inputs(0, 2, 0)), targets(0, 2, 0)).backward();
  EXPECT_TRUE(one->fc1->weight.grad().defined());
}

TEST(DistributedDataParallel, NeedsAnInitializedWorldAndAModule) {
  EXPECT_ERROR_HAS(nn::DistributedDataParallel(nullptr), "the module is null");
}

// ---- data::DistributedSampler (explicit ranks: a pure function of its arguments) ----
TEST(DistributedSampler, EqualShardsPaddedByRepeatingTheStart) {
  // 10 samples over 3 ranks, no shuffle: ceil(10/3) = 4 each, padded with samples 0 and 1.
  std::vector<std::vector<int64_t>> got;
  for (int r = 0; r < 3; ++r) got.push_back(data::DistributedSampler(10, 3, r, false).indices());
  EXPECT_EQ(got[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(got[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(got[2], (std::vector<int64_t>{2, 5, 8, 1}));
  EXPECT_EQ(data::DistributedSampler(10, 3, 2, false, 0, /*drop_last=*/true).indices(),
            (std::vector<int64_t>{2, 5, 8}));
}

TEST(DistributedSampler, ShuffleIsSharedByTheRanksAndChangesWithTheEpoch) {
  std::vector<int64_t> seen;
  std::vector<std::vector<int64_t>> epoch0;
  for (int r = 0; r < 4; ++r) {
    data::DistributedSampler s(12, 4, r, true, /*seed=*/7);
    auto idx = s.indices();
    EXPECT_EQ(s.size(), 3);
    seen.insert(seen.end(), idx.begin(), idx.end());
    epoch0.push_back(idx);
    s.set_epoch(1);
    EXPECT_NE(s.indices(), idx);
    EXPECT_EQ(data::DistributedSampler(12, 4, r, true, 7).indices(), idx);  // reproducible
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(12);
  for (int64_t i = 0; i < 12; ++i) all[i] = i;
  EXPECT_EQ(seen, all);  // disjoint shards covering every sample
  EXPECT_ERROR_HAS(data::DistributedSampler(5, 2, 2), "rank 2 is outside [0, 2)");
}

}  // namespace
}  // namespace sloth
