// sloth::jit (sloth/jit.h): a replayed training step gives what tracing gives (parameters,
// gradients, optimizer state, losses), falls back to tracing with a reason on new argument
// shapes, host values that change, syncs inside the step and state that changed hands.
#include <cmath>
#include <string>
#include <vector>

#include "core/storage.h"
#include "gtest/gtest.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

const std::vector<int64_t> kSizes = {6, 16, 16, 3};

struct Data {
  std::vector<Tensor> x, y;
};

Data make_data(int n, int64_t batch, uint64_t seed) {
  manual_seed(seed);
  Data d;
  for (int i = 0; i < n; ++i) {
    d.x.push_back(randn({batch, kSizes.front()}));
    d.y.push_back(randn({batch, kSizes.back()}));
  }
  mark_step();
  return d;
}

void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " " << i;
    if (!a[i].defined()) continue;
    auto va = a[i].to_vector<float>(), vb = b[i].to_vector<float>();
    ASSERT_EQ(va.size(), vb.size()) << what << " " << i;
    for (size_t j = 0; j < va.size(); ++j)
      ASSERT_NEAR(va[j], vb[j], tol) << what << " tensor " << i << " element " << j;
  }
}

std::vector<Tensor> grads(nn::MLP& m) {
  std::vector<Tensor> g;
  for (auto& p : m->parameters()) g.push_back(p.grad());
  return g;
}

// One model, one optimizer, one step function: traced every call, or jitted.
template <class Opt, class Options>
struct TrainRun {
  nn::MLP model;
  Opt opt;
  explicit TrainRun(Options o) : model(init(kSizes)), opt(model->parameters(), o) {}
  static nn::MLP init(const std::vector<int64_t>& sizes) {
    manual_seed(11);
    nn::MLP m(sizes);
    mark_step();
    return m;
  }
  Tensor body(const Tensor& x, const Tensor& y) {
    Tensor loss = mse_loss(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  }
};

template <class Opt, class Options>
void check_matches_traced(Options o, int steps, int64_t expect_replays, bool change_lr) {
  Data d = make_data(steps, 8, 3);
  TrainRun<Opt, Options> ref(o), jr(o);
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  for (int i = 0; i < steps; ++i) {
    if (change_lr && i == steps / 2) {
      ref.opt.set_lr(ref.opt.lr() * 0.5);
      jr.opt.set_lr(jr.opt.lr() * 0.5);
    }
    Tensor l_ref = ref.body(d.x[i], d.y[i]);
    mark_step();
    Tensor l_jit = step(d.x[i], d.y[i]);
    ASSERT_NEAR(l_ref.item(), l_jit.item(), 1e-6) << "step " << i << ": " << step.stats().to_string();
  }
  EXPECT_EQ(step.stats().replays, expect_replays) << step.stats().to_string();
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
  expect_close(grads(ref.model), grads(jr.model), 1e-6, "gradients");
  std::vector<Tensor> sr, sj;
  for (auto& [n, t] : ref.opt.state_tensors()) sr.push_back(t);
  for (auto& [n, t] : jr.opt.state_tensors()) sj.push_back(t);
  expect_close(sr, sj, 1e-6, "optimizer state");
  EXPECT_EQ(ref.opt.step_count(), jr.opt.step_count());
}

TEST(StepJit, SgdMomentumMatchesTraced) {
  // Call 1 makes the momentum buffers (a different graph), calls 2 and 3 agree: replays
  // from call 4.
  check_matches_traced<optim::SGD>(optim::SGDOptions{.lr = 0.05, .momentum = 0.9}, 20, 17,
                                   /*change_lr=*/false);
}

TEST(StepJit, SgdLearningRateChangeIsSeenByReplay) {
  check_matches_traced<optim::SGD>(
      optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true},
      20, 17, /*change_lr=*/true);
}

TEST(StepJit, AdamWMatchesTraced) {
  // Call 1 also syncs the fresh moments (2 graphs); calls 2 and 3 agree: replays from call 4.
  // The bias corrections and the learning rate are recomputed at each replay.
  check_matches_traced<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, 20,
                                     17, /*change_lr=*/true);
}

TEST(StepJit, AdamMatchesTraced) {
  check_matches_traced<optim::Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01}, 12, 9,
                                    /*change_lr=*/false);
}

TEST(StepJit, ShapeChangeFallsBackAndKeepsBothRecordings) {
  Data d8 = make_data(8, 8, 5), d5 = make_data(4, 5, 6);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R ref(optim::SGDOptions{.lr = 0.1}), jr(optim::SGDOptions{.lr = 0.1});
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  auto both = [&](const Tensor& x, const Tensor& y) {
    Tensor a = ref.body(x, y);
    mark_step();
    Tensor b = step(x, y);
    EXPECT_NEAR(a.item(), b.item(), 1e-6);
  };
  for (int i = 0; i < 4; ++i) both(d8.x[i], d8.y[i]);
  EXPECT_EQ(step.stats().replays, 2);
  EXPECT_TRUE(step.stats().last_replayed);
  both(d5.x[0], d5.y[0]);
  EXPECT_FALSE(step.stats().last_replayed);
  EXPECT_NE(step.stats().last_reason.find("argument 0"), std::string::npos)
      << step.stats().last_reason;
  EXPECT_NE(step.stats().last_reason.find("[5, 6]"), std::string::npos) << step.stats().last_reason;
  // Back to batch 8: its recording is still there, but the batch-5 trace made new .grad
  // tensors, so it traces once (and verifies against its recording), then replays.
  both(d8.x[4], d8.y[4]);
  EXPECT_FALSE(step.stats().last_replayed);
  EXPECT_NE(step.stats().last_reason.find("dropped"), std::string::npos) << step.stats().last_reason;
  both(d8.x[5], d8.y[5]);
  EXPECT_TRUE(step.stats().last_replayed) << step.stats().last_reason;
  for (int i = 1; i < 4; ++i) both(d5.x[i], d5.y[i]);
  EXPECT_TRUE(step.stats().last_replayed) << step.stats().last_reason;
  both(d8.x[6], d8.y[6]);
  both(d8.x[7], d8.y[7]);
  EXPECT_TRUE(step.stats().last_replayed);
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
  expect_close(grads(ref.model), grads(jr.model), 1e-6, "gradients");
}

TEST(StepJit, DtypeChangeFallsBack) {
  auto step = jit([](const Tensor& x) { return (x * 2).sum(); });
  Tensor a = tensor({1, 2, 3}), b = tensor({1, 2, 3}, {}, kFloat64);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(a).item(), 12);
  EXPECT_TRUE(step.stats().last_replayed);
  EXPECT_EQ(step(b).item(), 12);
  EXPECT_FALSE(step.stats().last_replayed);
  EXPECT_NE(step.stats().last_reason.find("float64"), std::string::npos) << step.stats().last_reason;
  EXPECT_EQ(step(b).dtype(), kFloat64);
  EXPECT_EQ(step(b).item(), 12);
  EXPECT_TRUE(step.stats().last_replayed);
  EXPECT_EQ(step(a).dtype(), kFloat32);
  EXPECT_TRUE(step.stats().last_replayed);
}

TEST(StepJit, ArgumentsPassedTwiceAreNotConfused) {
  auto step = jit([](const Tensor& a, const Tensor& b) { return (a * 2 + b).sum(); });
  Tensor x = tensor({1, 2, 3}), y = tensor({10, 20, 30});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(x, x).item(), 18);
  EXPECT_TRUE(step.stats().last_replayed);
  EXPECT_EQ(step(x, y).item(), 72);  // traced apart: a new signature
  EXPECT_FALSE(step.stats().last_replayed);
  EXPECT_EQ(step(y, x).item(), 126);
  EXPECT_EQ(step(x, y).item(), 72);
  EXPECT_TRUE(step.stats().last_replayed);
  EXPECT_EQ(step(y, y).item(), 180);  // shares again: the first recording
  EXPECT_TRUE(step.stats().last_replayed);
}

TEST(StepJit, ChangingHostScalarIsDetected) {
  Data d = make_data(6, 4, 7);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.1});
  int k = 0;
  // A number computed on the host from a counter: frozen into the graph as a scalar.
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    Tensor loss = mse_loss(jr.model(x), y) * double(1 + k++);
    jr.opt.zero_grad();
    loss.backward();
    jr.opt.step();
    return loss;
  });
  std::vector<double> got;
  for (int i = 0; i < 6; ++i) got.push_back(step(d.x[i], d.y[i]).item());
  EXPECT_EQ(step.stats().replays, 0);
  EXPECT_EQ(step.stats().traces, 6);
  EXPECT_EQ(k, 6);  // the function ran every call
  EXPECT_NE(step.stats().last_reason.find("host scalar"), std::string::npos)
      << step.stats().last_reason;
  // Each call's value is right: the traced model with the same factors.
  R ref(optim::SGDOptions{.lr = 0.1});
  for (int i = 0; i < 6; ++i) {
    Tensor loss = mse_loss(ref.model(d.x[i]), d.y[i]) * double(1 + i);
    ref.opt.zero_grad();
    loss.backward();
    ref.opt.step();
    EXPECT_NEAR(loss.item(), got[i], 1e-6);
  }
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
}

TEST(StepJit, ChangingHostTensorIsDetected) {
  Data d = make_data(5, 4, 8);
  nn::MLP model = TrainRun<optim::SGD, optim::SGDOptions>::init(kSizes);
  double scale = 1;
  auto step = jit([&](const Tensor& x) {
    NoGradGuard g;
    scale *= 2;
    return (model(x) * tensor(scale)).sum();  // a data tensor made from a host number
  });
  for (int i = 0; i < 5; ++i) {
    NoGradGuard g;
    double want = (model(d.x[i]) * (1 << (i + 1))).sum().item();
    EXPECT_NEAR(step(d.x[i]).item(), want, 1e-4);
  }
  EXPECT_EQ(step.stats().replays, 0);
  EXPECT_NE(step.stats().last_reason.find("holds different values"), std::string::npos)
      << step.stats().last_reason;
}

TEST(StepJit, SyncInsideTheStepFallsBack) {
  Data d = make_data(5, 4, 9);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.1}), ref(optim::SGDOptions{.lr = 0.1});
  double seen = 0;
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    Tensor loss = jr.body(x, y);
    seen = loss.item();  // a sync inside the step
    return loss;
  });
  for (int i = 0; i < 5; ++i) {
    double want = ref.body(d.x[i], d.y[i]).item();
    EXPECT_NEAR(step(d.x[i], d.y[i]).item(), want, 1e-6);
    EXPECT_NEAR(seen, want, 1e-6);
  }
  EXPECT_EQ(step.stats().replays, 0);
  EXPECT_NE(step.stats().last_reason.find("graphs"), std::string::npos) << step.stats().last_reason;
}

TEST(StepJit, GradDroppedOutsideTheStepRetraces) {
  Data d = make_data(8, 4, 10);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.1}), ref(optim::SGDOptions{.lr = 0.1});
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  for (int i = 0; i < 8; ++i) {
    if (i == 5) {
      jr.opt.zero_grad();  // drops the .grad tensors the recording refills
      ref.opt.zero_grad();
    }
    ref.body(d.x[i], d.y[i]);
    mark_step();
    step(d.x[i], d.y[i]);
    if (i == 5) {
      EXPECT_FALSE(step.stats().last_replayed);
      EXPECT_NE(step.stats().last_reason.find("dropped"), std::string::npos)
          << step.stats().last_reason;
    }
    expect_close(grads(ref.model), grads(jr.model), 1e-6, "gradients");
  }
  EXPECT_TRUE(step.stats().last_replayed);
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
}

TEST(StepJit, ReturnedTensorsAreFreshAndHistoryFree) {
  Data d = make_data(6, 4, 12);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.1});
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    Tensor out = jr.model(x);
    Tensor loss = mse_loss(out, y);
    jr.opt.zero_grad();
    loss.backward();
    jr.opt.step();
    return std::make_tuple(loss, out.detach());
  });
  std::vector<Tensor> losses;
  std::vector<double> values;
  for (int i = 0; i < 6; ++i) {
    auto [loss, out] = step(d.x[i], d.y[i]);
    EXPECT_EQ(out.shape(), (Shape{4, 3}));
    losses.push_back(loss);
    values.push_back(loss.item());
  }
  EXPECT_EQ(step.stats().replays, 4);  // no momentum: calls 1 and 2 agree
  for (int i = 0; i < 6; ++i) EXPECT_EQ(losses[i].item(), values[i]);  // not overwritten
  EXPECT_FALSE(losses.back().requires_grad());
}

// ---- replay cost ----
// A replay takes its intermediates from the executable's own buffers and writes each .grad
// into the previous step's .grad buffer: the only buffer it takes from the shared allocator
// is the returned loss's.
TEST(StepJit, ReplayTakesOnlyTheReturnedBufferFromTheAllocator) {
  Data d = make_data(2, 8, 21);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  for (int i = 0; i < 6; ++i) step(d.x[i % 2], d.y[i % 2]).item();
  ASSERT_EQ(step.stats().replays, 3) << step.stats().to_string();
  constexpr int kReplays = 10;
  std::vector<double> losses;
  const int64_t before = cpu_allocator_stats().allocations;
  for (int i = 0; i < kReplays; ++i) losses.push_back(step(d.x[i % 2], d.y[i % 2]).item());
  const int64_t taken = cpu_allocator_stats().allocations - before;
  EXPECT_EQ(step.stats().replays, 3 + kReplays);
  EXPECT_EQ(taken, kReplays) << "buffers taken from the allocator by " << kReplays << " replays";
  // Still training: the loss on the same batch goes down.
  EXPECT_LT(losses[kReplays - 2], losses[0]);
}

// Steps that read only scalars (full(v) / 4 summed) keep their result in the executable
// while the scalars repeat, and compute again when they change.
TEST(StepJit, ScalarOnlyStepsFollowTheirScalars) {
  Tensor x = ones({3});
  mark_step();
  for (double v : {1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.5}) {
    Tensor y = x + (full({4}, v) / 4.0).sum();
    const std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), 3u);
    for (float g : got) EXPECT_FLOAT_EQ(g, static_cast<float>(1.0 + v)) << "v = " << v;
  }
}

// A state tensor the step only reads (a frozen weight) keeps its buffer across replays:
// only tensors the step gives a new value donate theirs to the executable.
TEST(StepJit, ReadOnlyStateKeepsItsData) {
  manual_seed(4);
  Tensor w = randn({5}), x = randn({5});
  mark_step();
  const std::vector<float> vw = w.to_vector<float>(), vx = x.to_vector<float>();
  auto step = jit([&](const Tensor& a) { return a * w + 2.0; });
  for (int i = 0; i < 6; ++i) {
    const std::vector<float> got = step(x).to_vector<float>();
    ASSERT_EQ(w.to_vector<float>(), vw) << "call " << i;
    for (int k = 0; k < 5; ++k) EXPECT_FLOAT_EQ(got[k], vx[k] * vw[k] + 2.0f) << "call " << i;
  }
  EXPECT_EQ(step.stats().replays, 4) << step.stats().to_string();
}

// State over caller memory (from_blob) that the step writes: each call, replayed or traced,
// leaves the new value in the memory, as a sync does (lazy/borrowed_memory.h).
TEST(StepJit, ReplayWritesFromBlobStateIntoItsMemory) {
  std::vector<float> acc = {1, 2, 3};
  Tensor a = from_blob(acc.data(), {3}, kFloat32);
  auto step = jit([&](const Tensor& x) {
    a.add_(x);
    return a * 1.0;
  });
  Tensor x = tensor({1.0, 10.0, 100.0});
  mark_step();
  for (int i = 1; i <= 6; ++i) {
    Tensor got = step(x);
    EXPECT_FLOAT_EQ(got.to_vector<float>()[2], 3.0f + 100.0f * i) << "call " << i;
    EXPECT_EQ(acc, (std::vector<float>{1.0f + i, 2.0f + 10.0f * i, 3.0f + 100.0f * i}))
        << "call " << i << " " << step.stats().to_string();
  }
  EXPECT_GE(step.stats().replays, 1) << step.stats().to_string();
}

// A replay hands every binding to the executable as its own (run_donating), so an operand
// whose buffer only the argument tensor holds looks one reference away from dead to the
// run. The argument and the read-only state must still keep their data: the elementwise
// result may not be written over them, call after call with a fresh argument each time.
TEST(StepJit, ReplayNeverWritesOverArgumentsOrReadOnlyState) {
  manual_seed(8);
  Tensor w = randn({64});
  mark_step();
  const std::vector<float> vw = w.to_vector<float>();
  auto step = jit([&](const Tensor& a) { return a * w + 1.0; });
  for (int i = 0; i < 6; ++i) {
    Tensor x = randn({64});
    mark_step();
    const std::vector<float> vx = x.to_vector<float>();
    const std::vector<float> got = step(x).to_vector<float>();
    ASSERT_EQ(x.to_vector<float>(), vx) << "call " << i;
    ASSERT_EQ(w.to_vector<float>(), vw) << "call " << i;
    for (int k = 0; k < 64; ++k)
      ASSERT_NEAR(got[k], vx[k] * vw[k] + 1.0f, 1e-6) << "call " << i << " element " << k;
  }
  EXPECT_EQ(step.stats().replays, 4) << step.stats().to_string();
}

// The LibTorch way of batching: narrow() views of one dataset tensor, each call's batch at
// another offset of the same storage. The weight gradient reads the argument through a second
// graph input (a view of it), which a replay must bind at the argument's current offset, not
// at the traced one (it did: every replay trained on the second traced batch).
TEST(StepJit, BatchesCutFromOneDatasetTensor) {
  manual_seed(3);
  Tensor X = randn({64, kSizes.front()}), Y = randn({64, kSizes.back()});
  mark_step();
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R ref({.lr = 0.05, .momentum = 0.9}), jr({.lr = 0.05, .momentum = 0.9});
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  for (int i = 0; i < 16; ++i) {
    const int64_t start = (i % 8) * 8;
    Tensor x = X.narrow(0, start, 8), y = Y.narrow(0, start, 8);
    Tensor l_ref = ref.body(x, y);
    mark_step();
    Tensor l_jit = step(x, y);
    ASSERT_NEAR(l_ref.item(), l_jit.item(), 1e-6) << "step " << i << ": " << step.stats().to_string();
  }
  EXPECT_EQ(step.stats().replays, 13) << step.stats().to_string();
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
  expect_close(grads(ref.model), grads(jr.model), 1e-6, "gradients");
}

// Two arguments cut from one tensor, whose distance changes after the step is armed: each
// graph input that views one of them is bound to that one, wherever each starts.
TEST(StepJit, TwoArgumentsCutFromOneTensorMoveApart) {
  manual_seed(1);
  Tensor X = randn({64, 4});
  mark_step();
  auto f = [](const Tensor& a, const Tensor& b) {
    return (matmul(a.t(), b) + matmul(b.t(), a) * 2.0).sum();
  };
  auto step = jit(f);
  for (int i = 0; i < 12; ++i) {
    const int64_t s1 = (i % 5) * 4, s2 = i < 6 ? s1 + 8 : (i * 7) % 40;
    Tensor a = X.narrow(0, s1, 8), b = X.narrow(0, s2, 8);
    const double want = f(a, b).item();
    ASSERT_NEAR(step(a, b).item(), want, 1e-4) << "call " << i << ": " << step.stats().to_string();
  }
  EXPECT_EQ(step.stats().replays, 10) << step.stats().to_string();
}

// A step that reads its batch and, beside it, a fixed part of the tensor the batch was cut
// from: both share one storage, but only the batch moves from call to call. The fixed part
// must not be bound relative to the batch: such a step traces every call (with the reason)
// and each result is right.
TEST(StepJit, FixedPartOfTheBatchesTensorIsNotMovedWithTheBatch) {
  manual_seed(4);
  Tensor X = randn({32, 4});
  mark_step();
  auto step = jit([&](const Tensor& x) { return (x * 2.0).sum() + X.narrow(0, 0, 8).sum(); });
  const std::vector<float> xv = X.to_vector<float>();
  double head = 0;
  for (int k = 0; k < 32; ++k) head += xv[k];
  for (int i = 0; i < 8; ++i) {
    const int64_t start = (i % 4) * 8;
    double want = head;
    for (int k = 0; k < 32; ++k) want += 2.0 * xv[start * 4 + k];
    ASSERT_NEAR(step(X.narrow(0, start, 8)).item(), want, 1e-4) << "call " << i;
  }
  EXPECT_EQ(step.stats().replays, 0) << step.stats().to_string();
  EXPECT_NE(step.stats().last_reason, "") << step.stats().to_string();
}

// Dropout inside a jitted step: each replay draws the next numbers of the generator, as the
// same loop without jit does call after call (so the two loops agree step for step), and the
// step replays (the generator's offset is a host value, not a scalar that changes per trace).
TEST(StepJit, RandomOpsDrawNewNumbersOnReplay) {
  Data d = make_data(12, 8, 9);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  const optim::SGDOptions o{.lr = 0.05, .momentum = 0.9};
  auto body = [](R& run, const Tensor& x, const Tensor& y) {
    return run.body(dropout(x, 0.3, /*train=*/true), y);
  };
  std::vector<double> want;
  R ref(o);  // seeds the generator (TrainRun::init)
  for (int i = 0; i < 12; ++i) want.push_back(body(ref, d.x[i], d.y[i]).item());
  const double next_after_ref = rand({1}).item();
  R jr(o);  // the same seed again
  auto step = jit([&](const Tensor& x, const Tensor& y) { return body(jr, x, y); });
  for (int i = 0; i < 12; ++i)
    ASSERT_NEAR(step(d.x[i], d.y[i]).item(), want[i], 1e-6) << "step " << i << ": " << step.stats().to_string();
  EXPECT_EQ(step.stats().replays, 9) << step.stats().to_string();
  expect_close(ref.model->parameters(), jr.model->parameters(), 1e-6, "parameters");
  // Replays advanced the generator as traced calls do: the next number drawn outside the
  // step is the same after both loops.
  EXPECT_EQ(rand({1}).item(), next_after_ref);
}

// ---- replay run path: operand binding per layout ----
// A CPU executable binds its programs' operands once per layout of its inputs (the slot
// layouts of a run follow from them) and then only patches data pointers. A step replayed
// with arguments whose layouts alternate (contiguous, transposed, strided) reads each through
// its own layout, and an argument passed contiguous again is read as such.
TEST(StepJit, ReplayFollowsArgumentLayouts) {
  manual_seed(3);
  Tensor a = randn({6, 4}), b = randn({4, 6}), c = randn({6, 8}), w = randn({6, 4});
  mark_step();
  std::vector<Tensor> xs = {a, b.t(), c.slice(1, 0, 8, 2), a * 1.0, b.t(), c.slice(1, 1, 8, 2)};
  sync(xs);
  auto step = jit([&](const Tensor& x) { return relu(x * w + 1.0) - x / 2.0; });
  for (int round = 0; round < 4; ++round)
    for (const Tensor& x : xs) {
      Tensor y = step(x);
      const std::vector<float> vx = x.contiguous().to_vector<float>(), vw = w.to_vector<float>();
      const std::vector<float> got = y.to_vector<float>();
      ASSERT_EQ(got.size(), 24u);
      for (int k = 0; k < 24; ++k) {
        const float want = std::max(vx[k] * vw[k] + 1.0f, 0.0f) - vx[k] / 2.0f;
        ASSERT_NEAR(got[k], want, 1e-5) << "round " << round << " element " << k;
      }
    }
  EXPECT_GT(step.stats().replays, 0) << step.stats().to_string();
}

TEST(StepJit, LogsFallbackReasons) {
  Data d = make_data(3, 4, 13);
  using R = TrainRun<optim::SGD, optim::SGDOptions>;
  R jr(optim::SGDOptions{.lr = 0.1});
  auto step = jit([&](const Tensor& x, const Tensor& y) { return jr.body(x, y); });
  step(d.x[0], d.y[0]);
  EXPECT_EQ(step.stats().last_reason, "first call");
  step(d.x[1], d.y[1]);
  EXPECT_NE(step.stats().last_reason.find("verifying"), std::string::npos);
  step(d.x[2], d.y[2]);
  EXPECT_TRUE(step.stats().last_replayed);
  EXPECT_NE(step.stats().to_string().find("1 replayed"), std::string::npos) << step.stats().to_string();
}

}  // namespace
}  // namespace sloth
