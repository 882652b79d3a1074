// Convolution and pooling on the CPU: the two conv layers of the Fashion-MNIST CNN (issue
// #13) at batch 128, against one cblas_sgemm doing the same FLOPs, and max pooling 2x2.
//   bazel run -c opt //benchmarks:conv_bench
// Layers (Arg): 0 = conv1 1->32 3x3 pad 1 on 28x28, 1 = conv2 32->64 3x3 pad 1 on 14x14.
//   BM_Conv2dForward/layer          y = conv2d(x, w, b), synced
//   BM_Conv2dForwardBackward/layer  y = conv2d(x, w, b); (y * gy).sum().backward(); grads of
//                                   w, b (and x for conv2, whose input is an activation) synced
//   BM_SgemmSameFlops/layer         cblas_sgemm [O x CKK] @ [CKK x N*H*W]: the forward's FLOPs
//   BM_MaxPool2d/layer              max_pool2d(relu output, 2) forward and backward (layer 0:
//                                   [128, 32, 28, 28]; layer 1: [128, 64, 14, 14]), synced
//   BM_Unfold/layer                 the im2col of the layer's input alone
// CONV_BENCH_PLAN=1 prints the plans (and max pooling's runtime metrics).
// The "flops" counter is the conv's 2*N*O*CKK*L (forward) or 3x that (forward + backward).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "benchmarks/bench_common.h"
#include "sloth/sloth.h"

namespace {

struct Layer {
  int64_t n, c, o, h, w, k, pad;
};
constexpr Layer kLayers[] = {{128, 1, 32, 28, 28, 3, 1}, {128, 32, 64, 14, 14, 3, 1}};

double conv_flops(const Layer& l) {
  return 2.0 * l.n * l.o * (l.c * l.k * l.k) * (l.h * l.w);  // same-size output (pad 1)
}

struct ConvInputs {
  sloth::Tensor x, w, b, gy;
};
ConvInputs make_inputs(const Layer& l, bool grad) {
  sloth::manual_seed(11);
  ConvInputs in;
  in.x = sloth::randn({l.n, l.c, l.h, l.w});
  in.w = sloth::randn({l.o, l.c, l.k, l.k}) * (1.0 / std::sqrt(double(l.c * l.k * l.k)));
  in.b = sloth::randn({l.o});
  in.gy = sloth::randn({l.n, l.o, l.h, l.w});
  sloth::mark_step();
  if (grad) {
    in.w = in.w.detach().requires_grad_();
    in.b = in.b.detach().requires_grad_();
    if (l.c > 1) in.x = in.x.detach().requires_grad_();  // conv2's input is an activation
  }
  return in;
}

// out[0, oc, i, j] from its definition, for the correctness check.
double conv_at(const Layer& l, const ConvInputs& in, int64_t oc, int64_t i, int64_t j) {
  std::vector<float> x = in.x.select(0, 0).contiguous().to_vector<float>();
  std::vector<float> w = in.w.select(0, oc).contiguous().to_vector<float>();
  double acc = in.b.select(0, oc).item();
  for (int64_t c = 0; c < l.c; ++c)
    for (int64_t a = 0; a < l.k; ++a)
      for (int64_t b = 0; b < l.k; ++b) {
        const int64_t ih = i - l.pad + a, iw = j - l.pad + b;
        if (ih < 0 || ih >= l.h || iw < 0 || iw >= l.w) continue;
        acc += double(x[(c * l.h + ih) * l.w + iw]) * w[(c * l.k + a) * l.k + b];
      }
  return acc;
}

void set_flops(benchmark::State& state, double flops) {
  state.counters["flops"] =
      benchmark::Counter(flops * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Conv2dForward(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  ConvInputs in = make_inputs(l, false);
  auto run = [&] { return sloth::conv2d(in.x, in.w, in.b, {1, 1}, {l.pad, l.pad}); };
  sloth::Tensor y;
  if (std::getenv("CONV_BENCH_PLAN")) std::printf("%s\n", sloth::dump_plan({run()}).c_str());
  sloth_bench::warm_up([&] { sloth::sync({run()}); });
  for (auto _ : state) {
    y = run();
    sloth::mark_step();
  }
  sloth_bench::check_close("conv2d", y.select(0, 0).select(0, 3).select(0, 5).select(0, 0).item(),
                           conv_at(l, in, 3, 5, 0), 1e-3);
  set_flops(state, conv_flops(l));
}
BENCHMARK(BM_Conv2dForward)->Arg(0)->Arg(1)->ArgName("layer")->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_Conv2dForwardBackward(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  ConvInputs in = make_inputs(l, true);
  const bool xgrad = l.c > 1;
  auto step = [&] {
    sloth::Tensor y = sloth::conv2d(in.x, in.w, in.b, {1, 1}, {l.pad, l.pad});
    (y * in.gy).sum().backward();
    std::vector<sloth::Tensor> grads{in.w.grad(), in.b.grad()};
    if (xgrad) grads.push_back(in.x.grad());
    sloth::sync(grads);
    in.w.set_grad(sloth::Tensor());
    in.b.set_grad(sloth::Tensor());
    if (xgrad) in.x.set_grad(sloth::Tensor());
    return grads;
  };
  sloth_bench::warm_up(step);
  std::vector<sloth::Tensor> grads;
  for (auto _ : state) grads = step();
  // d/db of sum(y * gy) is gy summed over N, H, W.
  sloth_bench::check_close("conv2d bias grad", grads[1].select(0, 2).item(),
                           in.gy.select(1, 2).sum().item(), 1e-3);
  set_flops(state, 3 * conv_flops(l));
}
BENCHMARK(BM_Conv2dForwardBackward)->Arg(0)->Arg(1)->ArgName("layer")->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_SgemmSameFlops(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const int64_t m = l.o, k = l.c * l.k * l.k, n = l.n * l.h * l.w;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = std::sin(0.001 * i);
  for (int64_t i = 0; i < k * n; ++i) b[i] = std::cos(0.002 * i);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, conv_flops(l));
}
BENCHMARK(BM_SgemmSameFlops)->Arg(0)->Arg(1)->ArgName("layer")->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_MaxPool2d(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  sloth::manual_seed(12);
  sloth::Tensor x = sloth::relu(sloth::randn({l.n, l.o, l.h, l.w}));
  sloth::Tensor gy = sloth::randn({l.n, l.o, l.h / 2, l.w / 2});
  sloth::mark_step();
  x = x.detach().requires_grad_();
  auto step = [&] {
    sloth::Tensor y = sloth::max_pool2d(x, {2, 2});
    (y * gy).sum().backward();
    sloth::Tensor g = x.grad();
    static bool shown = false;
    if (std::getenv("CONV_BENCH_PLAN") && !shown) {
      shown = true;
      std::printf("%s\n", sloth::dump_plan({y, g}).c_str());
    }
    sloth::sync({y, g});
    x.set_grad(sloth::Tensor());
    return g;
  };
  sloth_bench::warm_up(step);
  sloth::Tensor g;
  sloth::reset_metrics();
  for (auto _ : state) g = step();
  if (std::getenv("CONV_BENCH_PLAN")) std::printf("%s\n", sloth::metrics().to_string().c_str());
  // Every window routes its gradient to exactly one element: the sums agree.
  sloth_bench::check_close("max_pool2d grad sum", g.sum().item(), gy.sum().item(), 1e-3);
  state.counters["bytes_per_second"] = benchmark::Counter(
      4.0 * 3 * l.n * l.o * l.h * l.w * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MaxPool2d)->Arg(0)->Arg(1)->ArgName("layer")->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

namespace {
// The forward's im2col alone (F.unfold's [N, C*kk, L] layout; conv2d writes the same bytes
// as [C*kk, N*L]).
void BM_Unfold(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  ConvInputs in = make_inputs(l, false);
  sloth::Tensor y;
  sloth_bench::warm_up([&] { sloth::sync({sloth::unfold(in.x, {3, 3}, {1, 1}, {1, 1})}); });
  for (auto _ : state) {
    y = sloth::unfold(in.x, {3, 3}, {1, 1}, {1, 1});
    sloth::mark_step();
  }
}
BENCHMARK(BM_Unfold)->Arg(0)->Arg(1)->ArgName("layer")->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
