// Shared pieces of sloth's benchmarks: the elementwise chains and the MLP training step.
// LibTorch's side of the same workloads is benchmarks/libtorch_workloads.cc; keep them in step.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/jit.h"
#include "sloth/sloth.h"

namespace sloth_bench {

constexpr int64_t kChainN = int64_t{1} << 24;  // 16M floats = 64 MiB per tensor

// k-op chain over inputs a, b, c: op i is y+b, y*c, y*0.5 for i%3 == 0, 1, 2.
// k=1 reads a, b; k>=2 reads a, b, c. One output.
inline int chain_inputs(int k) { return k == 1 ? 2 : 3; }
inline sloth::Tensor chain(int k, const sloth::Tensor& a, const sloth::Tensor& b,
                           const sloth::Tensor& c) {
  sloth::Tensor y = a;
  for (int i = 0; i < k; ++i) {
    switch (i % 3) {
      case 0: y = y + b; break;
      case 1: y = y * c; break;
      default: y = y * 0.5; break;
    }
  }
  return y;
}
inline float chain_ref(int k, float a, float b, float c) {
  float y = a;
  for (int i = 0; i < k; ++i) y = i % 3 == 0 ? y + b : i % 3 == 1 ? y * c : y * 0.5f;
  return y;
}

// The 6-op chain of BASELINES.md: relu(a*b + c) * d - e / 2 (5 inputs, 1 output).
inline sloth::Tensor chain6(const sloth::Tensor& a, const sloth::Tensor& b, const sloth::Tensor& c,
                            const sloth::Tensor& d, const sloth::Tensor& e) {
  return sloth::relu(a * b + c) * d - e / 2.0;
}

// Runs a workload until its hot kernels are compiled (SLOTH_JIT's default compiles them on a
// background thread after their second run), so timing measures the steady state.
template <typename F>
void warm_up(F&& run) {
  for (int i = 0; i < 3; ++i) run();
  sloth::cpu::jit::wait_idle();
  run();
}

// Aborts the benchmark binary when a result is wrong: a fast wrong answer is not a result.
inline void check_close(const char* what, double got, double want, double tol = 1e-3) {
  double err = got - want;
  if (err < 0) err = -err;
  double scale = want < 0 ? -want : want;
  if (err > tol * (1 + scale)) {
    std::fprintf(stderr, "WRONG RESULT in %s: got %.7g want %.7g\n", what, got, want);
    std::abort();
  }
}

// Aborts when a training benchmark did not train (the loss must end finite and lower).
inline void check_trains(double first, double last) {
  if (!(std::isfinite(last) && last < first)) {
    std::fprintf(stderr, "loss did not decrease: first %g last %g\n", first, last);
    std::abort();
  }
}

// MLP trained with raw sloth ops: linear layers as matmul(x, W) + b with W [in, out],
// ReLU between layers, SGD with momentum written with in-place ops under NoGradGuard.
struct Mlp {
  std::vector<sloth::Tensor> w, b, vw, vb;  // params and momentum buffers
  double lr = 0.01, momentum = 0.9;

  explicit Mlp(const std::vector<int64_t>& sizes) {
    using namespace sloth;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      double scale = 1.0 / std::sqrt(static_cast<double>(sizes[i]));
      Tensor wi = (rand({sizes[i], sizes[i + 1]}) * 2.0 - 1.0) * scale;
      Tensor bi = (rand({sizes[i + 1]}) * 2.0 - 1.0) * scale;
      mark_step();
      wi = wi.detach().requires_grad_();
      bi = bi.detach().requires_grad_();
      w.push_back(wi);
      b.push_back(bi);
      vw.push_back(zeros({sizes[i], sizes[i + 1]}));
      vb.push_back(zeros({sizes[i + 1]}));
    }
    mark_step();
  }

  sloth::Tensor forward(const sloth::Tensor& x) const {
    sloth::Tensor h = x;
    for (size_t i = 0; i < w.size(); ++i) {
      h = sloth::matmul(h, w[i]) + b[i];
      if (i + 1 < w.size()) h = sloth::relu(h);
    }
    return h;
  }

  void sgd_step() {
    sloth::NoGradGuard guard;
    auto upd = [&](sloth::Tensor& p, sloth::Tensor& v) {
      sloth::Tensor g = p.grad();
      v.mul_(momentum).add_(g);  // v = momentum * v + g (PyTorch, dampening 0)
      p.sub_(v, lr);             // p -= lr * v
      p.set_grad(sloth::Tensor());  // zero_grad(set_to_none)
    };
    for (size_t i = 0; i < w.size(); ++i) {
      upd(w[i], vw[i]);
      upd(b[i], vb[i]);
    }
  }

  // One training step, synced. Returns the loss.
  double step_ce(const sloth::Tensor& x, const sloth::Tensor& target) {
    sloth::Tensor loss = sloth::cross_entropy(forward(x), target);
    loss.backward();
    sgd_step();
    sloth::mark_step();
    return loss.item();
  }
  double step_mse(const sloth::Tensor& x, const sloth::Tensor& target) {
    sloth::Tensor loss = sloth::mse_loss(forward(x), target);
    loss.backward();
    sgd_step();
    sloth::mark_step();
    return loss.item();
  }
};

}  // namespace sloth_bench
