// CUDA timings (built only with --config=cuda; tools/gpu_check.sh runs it on a GPU machine):
//   BM_CudaFusedChain: ((x * 1.5 + 0.25).relu() - x * 0.5).tanh() over 64Mi float32 (one
//     fused kernel); counters: GB/s moved (one read, one write) and % of the H200's 4800 GB/s.
//   BM_CudaSgemm / BM_CublasSgemm: 4096^3 float32 matmul through sloth, and cuBLAS called
//     directly on raw buffers of the same size: the ratio of the two is sloth's overhead.
// tests/cuda_backend_test.cc (CudaWorkloads.*) checks the values of these same workloads.
//   bazel run --config=cuda //benchmarks:cuda_bench
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "sloth/dispatch.h"
#include "sloth/sloth.h"

namespace {

using sloth::Device;
using sloth::Tensor;

constexpr double kPeakGBs = 4800;  // H200 HBM3e

bool have_gpu(benchmark::State& state) {
  if (sloth::cuda_is_available()) return true;
  state.SkipWithError("no usable CUDA device");
  return false;
}

// Times one call of f per iteration with the device drained on both sides (manual time: the
// host returns before the kernels finish).
void time_iterations(benchmark::State& state, const std::function<void()>& f) {
  f();  // warm: plan cache, NVRTC, allocator
  cudaDeviceSynchronize();
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    cudaDeviceSynchronize();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

void BM_CudaFusedChain(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t n = 64ll << 20;  // 256 MiB in, 256 MiB out
  Tensor x = sloth::randn({n}).to(Device::cuda());
  sloth::internal::sync_tensor(x);
  time_iterations(state, [&] {
    Tensor y = ((x * 1.5 + 0.25).relu() - x * 0.5).tanh();
    sloth::internal::sync_tensor(y);
  });
  const double bytes = 2.0 * n * 4;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["GB/s"] = benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["pct_of_peak"] = benchmark::Counter(
      100 * bytes * state.iterations() / 1e9 / kPeakGBs, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CudaFusedChain)->UseManualTime()->Unit(benchmark::kMillisecond);

constexpr int64_t kGemm = 4096;
constexpr double kGemmFlop = 2.0 * kGemm * kGemm * kGemm;

void set_tflops(benchmark::State& state) {
  state.counters["TFLOP/s"] =
      benchmark::Counter(kGemmFlop * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}

void BM_CudaSgemm(benchmark::State& state) {
  if (!have_gpu(state)) return;
  Tensor a = sloth::randn({kGemm, kGemm}).to(Device::cuda());
  Tensor b = sloth::randn({kGemm, kGemm}).to(Device::cuda());
  sloth::internal::sync_tensor(a);
  sloth::internal::sync_tensor(b);
  time_iterations(state, [&] {
    Tensor c = a.matmul(b);
    sloth::internal::sync_tensor(c);
  });
  set_tflops(state);
}
BENCHMARK(BM_CudaSgemm)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CublasSgemm(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const size_t bytes = kGemm * kGemm * sizeof(float);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cublasHandle_t h = nullptr;
  if (cudaMalloc(&da, bytes) != cudaSuccess || cudaMalloc(&db, bytes) != cudaSuccess ||
      cudaMalloc(&dc, bytes) != cudaSuccess || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cudaMalloc or cublasCreate failed");
    return;
  }
  cudaMemset(da, 0, bytes);
  cudaMemset(db, 0, bytes);
  const float one = 1, zero = 0;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  time_iterations(state, [&] {
    cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, kGemm, kGemm, kGemm, &one, db,
                                   kGemm, da, kGemm, &zero, dc, kGemm);
    if (s != CUBLAS_STATUS_SUCCESS) st = s;
  });
  cublasDestroy(h);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  if (st != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasSgemm failed");
    return;
  }
  set_tflops(state);
}
BENCHMARK(BM_CublasSgemm)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
