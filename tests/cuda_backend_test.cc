// The CUDA backend (built with --config=cuda).
// - Without a GPU: the generated CUDA C of every kernel kind, and of every fused kernel the
//   plans of the op samples produce, compiles with NVRTC to PTX (NVRTC needs no device).
// - With a GPU: a differential test over the whole op table (every op on every sample gives
//   the CPU result within tolerance) and the caching allocator's steady state. These skip
//   themselves, with the reason, when no device is usable.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>

#include "backends/cuda/codegen.h"
#include "backends/cuda/codegen_sequence.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc_compile.h"
#include "backends/cuda/window_source.h"  // convolution and pooling
#include "backends/cuda/pool_source.h"  // pooling: max_pool2d's argmax
#include "gtest/gtest.h"
#include "lazy/graph.h"
#include "lazy/lowering.h"
#include "lazy/tensor_impl.h"
#include "sloth/dispatch.h"
#include "sloth/sloth.h"
#include "tests/support/op_samples.h"
#include "tests/support/tensors.h"

namespace sloth {
namespace {

using testing::compare;
using testing::to_ref;
using testing::to_tensor;

constexpr const char* kArch = "compute_90";

std::vector<OpId> all_ops() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = static_cast<OpId>(i);
    if (op != OpId::kData && op != OpId::kScalar) ops.push_back(op);
  }
  return ops;
}

void expect_ptx(const cuda::KernelSource& ks) {
  auto code = cuda::nvrtc_compile(ks.source, ks.name, kArch);
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_FALSE(code->cubin);
  EXPECT_NE(code->image.find(".entry " + ks.name), std::string::npos) << ks.name;
}

// ---- no GPU needed ---------------------------------------------------------------------------

TEST(CudaNvrtc, FusedElementwiseKernelCompilesToPtx) {
  // y = exp(x * s) + x over a [4, 8] float32 input and a float32 scalar s.
  lazy::Plan plan;
  plan.slots.resize(5);
  plan.slots[0] = {lazy::SlotKind::kInput, DType::kFloat32, 0, {4, 8}};
  plan.input_strides = {{8, 1}};
  plan.slots[1] = {lazy::SlotKind::kScalar, DType::kFloat32, 0, {}};
  for (int s = 2; s < 5; ++s) plan.slots[s] = {lazy::SlotKind::kValue, DType::kFloat32, 0, {4, 8}};
  auto instr = [](OpId op, std::initializer_list<int32_t> in, int32_t out) {
    lazy::Instr i{op, DType::kFloat32, {4, 8}, {}, {}, out};
    i.in.assign(in.begin(), in.end());
    return i;
  };
  plan.instrs = {instr(OpId::kMul, {0, 1}, 2), instr(OpId::kExp, {2}, 3), instr(OpId::kAdd, {3, 0}, 4)};
  plan.kernels = {{lazy::KernelKind::kElementwise, {0, 1, 2}, {4}}};
  plan.outputs = {4};
  plan.num_inputs = 1;
  plan.num_scalars = 1;

  cuda::ElementwiseKernel k = cuda::generate_elementwise(plan, {0, 1, 2}, {4});
  ASSERT_EQ(k.error, "");
  EXPECT_EQ(k.exts.size(), 1u) << "x is loaded once although it is read twice";
  EXPECT_EQ(k.outs.size(), 1u) << "only y is written to memory";
  EXPECT_EQ(k.consts.size(), 1u);
  auto t0 = std::chrono::steady_clock::now();
  auto code = cuda::nvrtc_compile(k.src.source, k.src.name, kArch);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_NE(code->image.find(".entry " + k.src.name), std::string::npos);
  EXPECT_NE(code->image.find(".target sm_90"), std::string::npos);
  std::printf("NVRTC compiled %s (%zu bytes of CUDA C) to %zu bytes of PTX in %.0f ms\n",
              k.src.name.c_str(), k.src.source.size(), code->image.size(), ms);

  int n = 0;
  ASSERT_TRUE(cuda::compile_plan_sources(plan, kArch, &n).ok());
  EXPECT_EQ(n, 1);
}

TEST(CudaNvrtc, GenericKernelsCompileForEveryDtype) {
  const DType all[] = {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64,
                      DType::kUInt8};
  for (DType d : all) {
    SCOPED_TRACE(dtype_name(d));
    for (DType s : all) expect_ptx(cuda::copy_source(d, s, false));
    expect_ptx(cuda::copy_source(d, d, true));
    for (OpId op : {OpId::kSum, OpId::kProd, OpId::kAmax, OpId::kAmin}) {
      DType out = (op == OpId::kSum || op == OpId::kProd) && !is_floating(d) ? DType::kInt64 : d;
      expect_ptx(cuda::reduce_source(op, d, out));
      expect_ptx(cuda::reduce_merge_source(op, d, out));
    }
    expect_ptx(cuda::arg_reduce_source(OpId::kArgmax, d));
    expect_ptx(cuda::arg_reduce_source(OpId::kArgmin, d));
    for (OpId op : {OpId::kFull, OpId::kArange, OpId::kLinspace, OpId::kEye, OpId::kRand,
                    OpId::kRandn, OpId::kRandint})
      expect_ptx(cuda::factory_source(op, d));
    for (int mode = 0; mode < 3; ++mode) expect_ptx(cuda::index_source(mode, d, DType::kInt64));
  }
  for (DType i : {DType::kInt32, DType::kInt64}) {
    expect_ptx(cuda::check_index_source(i));
    expect_ptx(cuda::winner_source(i));
    expect_ptx(cuda::one_hot_source(i));
    for (int mode = 0; mode < 3; ++mode) expect_ptx(cuda::index_source(mode, DType::kFloat32, i));
  }
}

// ---- attention and sequence ops ----
TEST(CudaNvrtc, SequenceKernelsCompileForEveryDtype) {
  for (DType d : {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    expect_ptx(cuda::cumsum_source(d, is_floating(d) ? d : DType::kInt64));
    if (d != DType::kBool) expect_ptx(cuda::sort_rows_source(d));
  }
}

// Every fused kernel that the plans of the op samples produce (on the CPU, where the graph is
// built but not run) generates CUDA C that NVRTC accepts.
TEST(CudaNvrtc, EveryOpSamplePlanCompiles) {
  int plans = 0, kernels = 0;
  for (OpId op : all_ops()) {
    if (op == OpId::kSplit || op == OpId::kChunk) continue;  // views: no kernels
    for (const OpSample& s : op_samples(op)) {
      SCOPED_TRACE(std::string(op_name(op)) + " sample " + s.name);
      std::vector<Tensor> in;
      for (size_t i = 0; i < s.inputs.size(); ++i)
        in.push_back(to_tensor(s.inputs[i], i < s.transposed.size() && s.transposed[i]));
      Tensor out;
      try {
        manual_seed(7);
        out = call_op(op, in, s.attrs);
      } catch (const Error&) {
        continue;  // samples the op rejects (the op table test covers those)
      }
      lazy::NodePtr node = out.impl()->value();
      if (node->materialized()) continue;
      lazy::Graph g = lazy::build_graph({node});
      if (g.roots.empty()) continue;
      lazy::Plan plan = lazy::lower(g);
      lazy::plan_kernels(plan, true);
      int n = 0;
      absl::Status st = cuda::compile_plan_sources(plan, kArch, &n);
      ASSERT_TRUE(st.ok()) << st.message() << "\n" << plan.describe();
      ++plans;
      kernels += n;
    }
  }
  std::printf("%d plans, %d fused kernels compiled with NVRTC\n", plans, kernels);
  EXPECT_GT(plans, 100);
  EXPECT_GT(kernels, 50);
}

// ---- convolution and pooling ----
// The Unfold/Fold kernels (Kernel ops run their own kernels, not fused ones).
TEST(CudaNvrtc, WindowKernelsCompileToPtx) {
  for (DType d : {DType::kFloat32, DType::kFloat64}) {
    expect_ptx(cuda::unfold_source(d));
    expect_ptx(cuda::fold_source(d));
  }
}

// ---- pooling: max_pool2d's argmax (MaxPool2dIndices) ----
TEST(CudaNvrtc, MaxPoolIndicesKernelCompilesToPtx) {
  for (DType d : {DType::kFloat32, DType::kFloat64}) {
    expect_ptx(cuda::max_pool_indices_source(d));
    expect_ptx(cuda::max_pool_plane_source(d, false));
    expect_ptx(cuda::max_pool_plane_source(d, true));
  }
}

TEST(CudaDevice, ReportsWhyItIsUnavailable) {
  const std::string why = cuda::device_status();
  EXPECT_EQ(why.empty(), cuda_is_available());
  if (!why.empty()) std::printf("CUDA unavailable: %s\n", why.c_str());
}

// ---- GPU only --------------------------------------------------------------------------------

#define SKIP_WITHOUT_GPU()                                                                   \
  if (!cuda_is_available())                                                                 \
  GTEST_SKIP() << "no usable CUDA device (" << cuda::device_status()                        \
               << "); run tools/gpu_check.sh on a GPU machine"

Tensor on_cuda(const RefTensor& r, bool transposed) {
  if (transposed && r.shape.size() == 2) {
    // Keep the input non-contiguous on the device: move the contiguous transpose, then view.
    Tensor t = to_tensor(r, true).t();  // contiguous [n, m]
    return t.to(Device::cuda()).t();
  }
  return to_tensor(r, false).to(Device::cuda());
}

class CudaOpSamples : public ::testing::TestWithParam<OpId> {};

TEST_P(CudaOpSamples, MatchCpu) {
  SKIP_WITHOUT_GPU();
  const OpId op = GetParam();
  int checked = 0;
  for (const OpSample& s : op_samples(op)) {
    SCOPED_TRACE(std::string(op_name(op)) + " sample " + s.name);
    std::vector<Tensor> cpu_in, gpu_in;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const bool tr = i < s.transposed.size() && s.transposed[i];
      cpu_in.push_back(to_tensor(s.inputs[i], tr));
      gpu_in.push_back(on_cuda(s.inputs[i], tr));
    }
    const double tol = op == OpId::kLinspace ? 1e-4 : 2e-5;
    if (op == OpId::kSplit || op == OpId::kChunk) {
      std::vector<Tensor> e = call_op_list(op, cpu_in[0], s.attrs);
      std::vector<Tensor> g = call_op_list(op, gpu_in[0], s.attrs);
      ASSERT_EQ(e.size(), g.size());
      for (size_t k = 0; k < e.size(); ++k)
        EXPECT_EQ(compare(to_ref(e[k]), to_ref(g[k].to(Device::cpu())), tol), "") << "piece " << k;
      ++checked;
      continue;
    }
    std::string cpu_error, gpu_error;
    RefTensor expected, got;
    try {
      manual_seed(1234);
      expected = to_ref(call_op(op, cpu_in, s.attrs));
    } catch (const Error& e) {
      cpu_error = e.what();
    }
    try {
      manual_seed(1234);
      Tensor g = call_op(op, gpu_in, s.attrs);
      EXPECT_TRUE(g.device().is_cuda()) << "the result stays on the device";
      got = to_ref(g.to(Device::cpu()));
    } catch (const Error& e) {
      gpu_error = e.what();
    }
    EXPECT_EQ(gpu_error, cpu_error);
    if (!cpu_error.empty()) continue;
    EXPECT_EQ(compare(expected, got, tol), "");
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(AllOps, CudaOpSamples, ::testing::ValuesIn(all_ops()),
                         [](const ::testing::TestParamInfo<OpId>& p) {
                           return std::string(op_name(p.param));
                         });

TEST(CudaDevice, RoundTripAndSteadyStateAllocation) {
  SKIP_WITHOUT_GPU();
  Tensor x = randn({256, 512});
  Tensor w = randn({512, 128});
  Tensor xg = x.to(Device::cuda()), wg = w.to(Device::cuda());
  EXPECT_EQ(compare(to_ref(x), to_ref(xg.to(Device::cpu())), 0), "");
  auto step = [&] { return to_ref((xg.matmul(wg).relu() * 2.0).sum().to(Device::cpu())); };
  RefTensor first = step();
  EXPECT_EQ(compare(to_ref((x.matmul(w).relu() * 2.0).sum()), first, 1e-4), "");
  step();
  const int64_t before = cuda::allocator_stats().os_allocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(cuda::allocator_stats().os_allocations, before)
      << "a repeated step takes every buffer from the cache";
  EXPECT_GT(cuda::allocator_stats().cached_bytes, 0);
}

TEST(CudaDevice, DeviceMovesAreDifferentiable) {
  SKIP_WITHOUT_GPU();
  Tensor x = tensor({1.0, -2.0, 3.0}, {3}, TensorOptions().dtype(kFloat64).requires_grad());
  Tensor y = (x.to(Device::cuda()) * 3.0).relu().sum().to(Device::cpu());
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 0, 3}));
}

TEST(CudaDevice, BadIndexIsAnErrorNotACrash) {
  SKIP_WITHOUT_GPU();
  Tensor x = randn({4, 3}).to(Device::cuda());
  Tensor idx = from_vector<int64_t>({0, 7}, {2}).to(Device::cuda());
  try {
    to_ref(x.index_select(0, idx).to(Device::cpu()));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 7 is out of range"), std::string::npos) << e.what();
  }
  // The device is still usable afterwards.
  EXPECT_EQ(to_ref(x.sum().to(Device::cpu())).v.size(), 1u);
}

// The workloads of benchmarks/cuda_bench.cc (which times them), checked for values here: the
// fused elementwise chain against a host computation, sloth's GEMM and a direct cuBLAS call
// against a host sgemm.
float fused_chain_ref(float x) {
  const float a = std::max(x * 1.5f + 0.25f, 0.0f);
  return std::tanh(a - x * 0.5f);
}

TEST(CudaWorkloads, FusedElementwiseChainMatchesHost) {
  SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t{1} << 22) + 7;  // several blocks and a ragged tail
  manual_seed(3);
  Tensor x_cpu = randn({n});
  std::vector<float> x = x_cpu.to_vector<float>();
  Tensor xd = x_cpu.to(Device::cuda());
  Tensor y = ((xd * 1.5 + 0.25).relu() - xd * 0.5).tanh();
  ASSERT_EQ(y.dtype(), kFloat32);
  ASSERT_EQ(y.shape(), (Shape{n}));
  std::vector<float> got = y.to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  int64_t checked = 0;
  for (int64_t i = 0; i < n; i += (i < 4096 || i > n - 4096) ? 1 : 997) {
    ASSERT_NEAR(got[i], fused_chain_ref(x[i]), 1e-5f) << "element " << i << " of x = " << x[i];
    ++checked;
  }
  EXPECT_GT(checked, 8192);
}

// Row-major C[m, n] = A[m, k] B[k, n] in double.
std::vector<double> host_gemm(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                              int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += double(a[i * k + p]) * b[p * n + j];
  return c;
}

void expect_gemm_near(const std::vector<float>& got, const std::vector<double>& want, int64_t k,
                      const char* who) {
  ASSERT_EQ(got.size(), want.size()) << who;
  // float32 accumulation of k products of N(0, 1) values (TF32 is off for float32 matmul).
  const double tol = 1e-5 * k + 1e-4;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol) << who << " element " << i;
}

TEST(CudaWorkloads, GemmMatchesHostSgemmAndCublas) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t m, k, n; };
  for (Case c : {Case{67, 45, 33}, Case{256, 320, 192}}) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n));
    manual_seed(11);
    Tensor a = randn({c.m, c.k}), b = randn({c.k, c.n});
    const std::vector<float> ha = a.to_vector<float>(), hb = b.to_vector<float>();
    const std::vector<double> want = host_gemm(ha, hb, c.m, c.k, c.n);

    Tensor got = a.to(Device::cuda()).matmul(b.to(Device::cuda())).to(Device::cpu());
    ASSERT_EQ(got.shape(), (Shape{c.m, c.n}));
    expect_gemm_near(got.to_vector<float>(), want, c.k, "sloth matmul");

    // cuBLAS called directly (the benchmark's baseline): column-major, so C^T = B^T A^T.
    float *da = nullptr, *db = nullptr, *dc = nullptr;
    ASSERT_EQ(cudaMalloc(&da, ha.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, hb.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dc, c.m * c.n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(da, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    cublasHandle_t h;
    ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    const float one = 1, zero = 0;
    EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, c.n, c.m, c.k, &one, db, c.n, da, c.k,
                          &zero, dc, c.n),
              CUBLAS_STATUS_SUCCESS);
    std::vector<float> hc(c.m * c.n);
    EXPECT_EQ(cudaMemcpy(hc.data(), dc, hc.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    expect_gemm_near(hc, want, c.k, "cublasSgemm");
  }
}

}  // namespace
}  // namespace sloth
