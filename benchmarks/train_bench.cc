// Training steps as users write them: nn::MLP (nn::Linear, weights [out, in], x W^T + b),
// optim::SGD (momentum 0.9, lr 0.01), zero_grad, backward, step, mark_step, loss.item():
// MLP 784-1024-1024-10 at batch 256 and 32 (cross_entropy), tiny MLP 32-64-64-1 at batch 16
// (mse_loss). The *Raw variants run the same models hand-written (weights [in, out], a
// hand-written SGD update): the GEMM-bound reference the nn path must match. For the big MLP,
// counters give the GEMM-bound ideal: the step's 3 x forward GEMM FLOPs (forward, grad-input
// and grad-weight GEMM of every layer) timed with cblas_sgemm in the same run.
//   bazel run //benchmarks:train_bench
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "benchmarks/bench_common.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {

const std::vector<int64_t> kBig = {784, 1024, 1024, 10};
const std::vector<int64_t> kTiny = {32, 64, 64, 1};

double forward_flops(const std::vector<int64_t>& sizes, int64_t batch) {
  double f = 0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) f += 2.0 * batch * sizes[i] * sizes[i + 1];
  return f;
}

// The step's GEMMs through cblas_sgemm: per layer (in -> out) Y = X W, dX = dY W^T,
// dW = X^T dY (row-major, the shapes the step runs) = 3 x the forward GEMM FLOPs.
class StepGemms {
 public:
  StepGemms(const std::vector<int64_t>& sizes, int64_t batch) : batch_(batch) {
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      int64_t in = sizes[i], out = sizes[i + 1];
      ls_.push_back(L{std::vector<float>(batch * in, 0.01f), std::vector<float>(in * out, 0.02f),
                      std::vector<float>(batch * out), std::vector<float>(batch * out, 0.03f),
                      std::vector<float>(batch * in), std::vector<float>(in * out), in, out});
    }
    for (int i = 0; i < 3; ++i) run();
  }
  void run() {
    for (auto& l : ls_) {
      const int64_t B = batch_, I = l.in, O = l.out;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, O, I, 1.f, l.x.data(), I,
                  l.w.data(), O, 0.f, l.y.data(), O);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, I, O, 1.f, l.dy.data(), O,
                  l.w.data(), O, 0.f, l.dx.data(), I);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I, O, B, 1.f, l.x.data(), I,
                  l.dy.data(), O, 0.f, l.dw.data(), O);
    }
  }
  double timed_run_s() {
    auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  struct L { std::vector<float> x, w, y, dy, dx, dw; int64_t in, out; };
  std::vector<L> ls_;
  int64_t batch_;
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Times `step` (returning its loss) per iteration and, untimed after each, the step's GEMMs
// alone, so both see the same machine load. Sets the counters the GEMM-bound rows share and
// returns the metrics, the iteration count and the two medians.
struct StepVsGemms {
  sloth::Metrics m;
  double n = 0, step_s = 0, ideal_s = 0;
};
template <class Step>
StepVsGemms time_step_vs_gemms(benchmark::State& state, StepGemms& gemms, double first, Step step) {
  std::vector<double> ideal_s, step_s;
  double loss = first;
  sloth::reset_metrics();
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    loss = step();
    step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    state.PauseTiming();
    ideal_s.push_back(gemms.timed_run_s());
    state.ResumeTiming();
  }
  StepVsGemms r{sloth::metrics(), static_cast<double>(state.iterations()), median(step_s),
                median(ideal_s)};
  sloth_bench::check_trains(first, loss);
  state.counters["os_allocs_per_step"] = r.m.os_allocations / r.n;
  state.counters["kernels_per_step"] = r.m.kernels_launched / r.n;
  state.counters["plan_misses"] = static_cast<double>(r.m.plan_cache_misses);
  return r;
}

// The model as users write it: nn modules and an optimizer.
class NnMlp {
 public:
  explicit NnMlp(const std::vector<int64_t>& sizes)
      : model_(std::make_shared<sloth::nn::MLP>(sizes)),
        opt_(model_->parameters(), {.lr = 0.01, .momentum = 0.9}) {
    sloth::mark_step();
  }
  template <class Loss>
  double step(const sloth::Tensor& x, const sloth::Tensor& target, Loss loss_fn) {
    sloth::Tensor loss = loss_fn(model_->forward(x), target);
    opt_.zero_grad();
    loss.backward();
    opt_.step();
    sloth::mark_step();
    return loss.item();
  }
  double step_ce(const sloth::Tensor& x, const sloth::Tensor& y) {
    return step(x, y, [](const sloth::Tensor& o, const sloth::Tensor& t) { return sloth::cross_entropy(o, t); });
  }
  double step_mse(const sloth::Tensor& x, const sloth::Tensor& y) {
    return step(x, y, [](const sloth::Tensor& o, const sloth::Tensor& t) { return sloth::mse_loss(o, t); });
  }

 private:
  std::shared_ptr<sloth::nn::MLP> model_;
  sloth::optim::SGD opt_;
};

// The same model and step under sloth::jit (sloth/jit.h): after two equal traces, a call
// replays the recorded plan without running the C++ step.
class NnMlpJit {
 public:
  explicit NnMlpJit(const std::vector<int64_t>& sizes)
      : model_(std::make_shared<sloth::nn::MLP>(sizes)),
        opt_(model_->parameters(), {.lr = 0.01, .momentum = 0.9}) {
    sloth::mark_step();
  }
  double step_ce(const sloth::Tensor& x, const sloth::Tensor& y) { return ce_(x, y).item(); }
  double step_mse(const sloth::Tensor& x, const sloth::Tensor& y) { return mse_(x, y).item(); }
  const sloth::JitStats& stats() const { return mse_.stats().calls ? mse_.stats() : ce_.stats(); }

 private:
  struct Body {
    NnMlpJit* self;
    bool ce;
    sloth::Tensor operator()(const sloth::Tensor& x, const sloth::Tensor& t) const {
      sloth::Tensor out = self->model_->forward(x);
      sloth::Tensor loss = ce ? sloth::cross_entropy(out, t) : sloth::mse_loss(out, t);
      self->opt_.zero_grad();
      loss.backward();
      self->opt_.step();
      return loss;
    }
  };
  std::shared_ptr<sloth::nn::MLP> model_;
  sloth::optim::SGD opt_;
  sloth::Jit<Body> ce_{Body{this, true}}, mse_{Body{this, false}};
};

template <class Model>
void train_mlp(benchmark::State& state) {
  const int64_t batch = state.range(0);
  sloth::manual_seed(5);
  Model mlp(kBig);
  sloth::Tensor x = sloth::randn({batch, kBig.front()});
  sloth::Tensor y = sloth::randint(0, kBig.back(), {batch}, sloth::kInt64);
  sloth::mark_step();
  double first = mlp.step_ce(x, y), loss = first;
  // Warm: plans cached, buffers pooled, hot kernels compiled.
  sloth_bench::warm_up([&] { loss = mlp.step_ce(x, y); });
  // The ideal is timed after every step (untimed for the step), so both see the same
  // machine load; its median over the run is the counter.
  StepGemms gemms(kBig, batch);
  const StepVsGemms r = time_step_vs_gemms(state, gemms, first, [&] { return mlp.step_ce(x, y); });
  const sloth::Metrics& m = r.m;
  const double n = r.n;
  const double fl = 3 * forward_flops(kBig, batch);
  state.counters["flops"] = benchmark::Counter(fl * n, benchmark::Counter::kIsRate);
  const double ideal = r.ideal_s;
  state.counters["ideal_ms"] = ideal * 1e3;
  state.counters["cblas_flops"] = fl / ideal;
  state.counters["step_over_ideal"] = r.step_s / ideal;  // medians of this run
  state.counters["trace_ms_per_step"] = m.trace_s * 1e3 / n;
  state.counters["exec_ms_per_step"] = m.execute_s * 1e3 / n;
  state.counters["loss"] = loss;
}

// batches == 1: one batch of random targets, trained step after step (towards a loss of
// ~1e-16; see the Ftz rows). batches > 1: a dataset of that many batches, stepped through in
// turn as a training loop does, with a teacher's targets (x . w + 0.1 noise), so the loss
// settles at the noise and the step's numbers stay normal. LibTorch's tiny_mlp_b16_data is the
// same loop.
template <class Model>
void train_tiny_mlp(benchmark::State& state, int64_t batches = 1) {
  const int64_t batch = state.range(0);
  sloth::manual_seed(6);
  Model mlp(kTiny);
  std::vector<sloth::Tensor> xs, ys;
  if (batches == 1) {
    xs.push_back(sloth::randn({batch, kTiny.front()}));
    ys.push_back(sloth::randn({batch, kTiny.back()}));
  } else {
    sloth::Tensor w = sloth::randn({kTiny.front(), kTiny.back()}) / std::sqrt(double(kTiny.front()));
    for (int64_t i = 0; i < batches; ++i) {
      xs.push_back(sloth::randn({batch, kTiny.front()}));
      ys.push_back(sloth::matmul(xs.back(), w) + 0.1 * sloth::randn({batch, kTiny.back()}));
    }
  }
  sloth::mark_step();
  size_t k = 0;
  auto step = [&] {
    const size_t i = k++ % xs.size();
    return mlp.step_mse(xs[i], ys[i]);
  };
  double first = step(), loss = first;
  for (int i = 0; i < 20; ++i) loss = step();
  sloth_bench::warm_up([&] { loss = step(); });
  sloth::reset_metrics();
  for (auto _ : state) loss = step();
  sloth::Metrics m = sloth::metrics();
  sloth_bench::check_trains(first, loss);
  const double n = static_cast<double>(state.iterations());
  state.counters["os_allocs_per_step"] = m.os_allocations / n;
  state.counters["kernels_per_step"] = m.kernels_launched / n;
  state.counters["plan_misses"] = static_cast<double>(m.plan_cache_misses);
  state.counters["trace_us_per_step"] = m.trace_s * 1e6 / n;
  state.counters["plan_us_per_step"] = m.plan_s * 1e6 / n;
  state.counters["exec_us_per_step"] = m.execute_s * 1e6 / n;
  state.counters["loss"] = loss;
}

// Interleaved: the nn path and its hand-written reference at each batch.
void BM_TrainMlp(benchmark::State& state) { train_mlp<NnMlp>(state); }
void BM_TrainMlpRaw(benchmark::State& state) { train_mlp<sloth_bench::Mlp>(state); }
BENCHMARK(BM_TrainMlp)->Arg(256)->Arg(32)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_TrainMlpRaw)->Arg(256)->Arg(32)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(2.0);
void BM_TrainMlpJit(benchmark::State& state) { train_mlp<NnMlpJit>(state); }
BENCHMARK(BM_TrainMlpJit)->Arg(32)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_TrainTinyMlp(benchmark::State& state) { train_tiny_mlp<NnMlp>(state); }
void BM_TrainTinyMlpRaw(benchmark::State& state) { train_tiny_mlp<sloth_bench::Mlp>(state); }
BENCHMARK(BM_TrainTinyMlp)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_TrainTinyMlpRaw)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);
void BM_TrainTinyMlpJit(benchmark::State& state) { train_tiny_mlp<NnMlpJit>(state); }
BENCHMARK(BM_TrainTinyMlpJit)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// The same steps with set_flush_denormal(true) (LibTorch's side: tiny_mlp_b16_ftz, with
// setFlushDenormal). The step trains one batch of 16 towards a loss of ~1e-16: within a
// thousand steps a tenth of SGD's momentum entries are denormal (PyTorch 1.13 the same: 535 of
// 6337 at step 1000, 2111 from step 10000), and each vector instruction over one takes a
// microcode assist (~150 cycles). That is a fixed cost per instruction, not per runtime
// overhead, so it is a far larger share of sloth's step than of LibTorch's; with FTZ on both
// sides these rows compare the runtimes alone.
template <class Model>
void train_tiny_mlp_ftz(benchmark::State& state) {
  sloth::set_flush_denormal(true);
  train_tiny_mlp<Model>(state);
  sloth::set_flush_denormal(false);
}
void BM_TrainTinyMlpFtz(benchmark::State& state) { train_tiny_mlp_ftz<NnMlp>(state); }
void BM_TrainTinyMlpJitFtz(benchmark::State& state) { train_tiny_mlp_ftz<NnMlpJit>(state); }
BENCHMARK(BM_TrainTinyMlpFtz)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_TrainTinyMlpJitFtz)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// A dataset of 64 batches stepped through in turn (train_tiny_mlp says why), as training does.
constexpr int64_t kTinyBatches = 64;
void BM_TrainTinyMlpData(benchmark::State& state) { train_tiny_mlp<NnMlp>(state, kTinyBatches); }
void BM_TrainTinyMlpJitData(benchmark::State& state) {
  train_tiny_mlp<NnMlpJit>(state, kTinyBatches);
}
BENCHMARK(BM_TrainTinyMlpData)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_TrainTinyMlpJitData)->Arg(16)->ArgName("batch")->UseRealTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// The README's main job, step for step: train_fashion_mnist's MLP 784-256-128-10 at batch 128
// with AdamW (lr 3e-3, weight decay 1e-2), cross_entropy, zero_grad, backward, step,
// mark_step (the example reads the loss every 50 steps; here every step, the worse case).
// step_over_ideal: the step against its GEMMs alone (cblas_sgemm in this binary, interleaved).
// An epoch is 468 such steps.
const std::vector<int64_t> kMainJob = {784, 256, 128, 10};

void BM_MainJobStep(benchmark::State& state) {
  const int64_t batch = 128;
  sloth::manual_seed(0);
  auto model = std::make_shared<sloth::nn::MLP>(kMainJob);
  sloth::optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 1e-2});
  sloth::Tensor x = sloth::randn({batch, kMainJob.front()});
  sloth::Tensor y = sloth::randint(0, kMainJob.back(), {batch}, sloth::kInt64);
  sloth::mark_step();
  auto step = [&] {
    sloth::Tensor loss = sloth::cross_entropy(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    sloth::mark_step();
    return loss.item();
  };
  double first = step(), loss = first;
  sloth_bench::warm_up([&] { loss = step(); });
  StepGemms gemms(kMainJob, batch);
  const StepVsGemms r = time_step_vs_gemms(state, gemms, first, step);
  const sloth::Metrics& m = r.m;
  const double n = r.n;
  const double ideal = r.ideal_s;
  state.counters["ideal_ms"] = ideal * 1e3;
  state.counters["step_over_ideal"] = r.step_s / ideal;
  state.counters["trace_ms_per_step"] = m.trace_s * 1e3 / n;
  state.counters["exec_ms_per_step"] = m.execute_s * 1e3 / n;
  state.counters["epoch_s"] = r.step_s * 468;
}
BENCHMARK(BM_MainJobStep)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
