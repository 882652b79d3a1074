// Matmul: float types through cuBLAS strided-batched GEMM, integer types through the
// ahead-of-time int_matmul kernel.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/int_matmul.h"
#include "backends/cuda/kernel_launch.h"
#include "core/blas_layout.h"

namespace sloth::cuda {

using lazy::Instr;

absl::Status run_matmul(RunEnv& env, const Instr& in) {
  DeviceData a = env.get(in.in[0]);
  DeviceData b = env.get(in.in[1]);
  if (a.dtype != b.dtype || a.dtype != in.dtype || a.layout.shape.empty() || b.layout.shape.empty())
    return absl::InternalError("cuda backend: matmul operands do not match the instruction");
  if (in.dtype == DType::kBool)
    return absl::InvalidArgumentError("matmul: bool tensors are not supported");
  absl::StatusOr<MatmulGeometry> geo = matmul_geometry(a.layout, b.layout);
  if (!geo.ok()) return geo.status();
  Layout la = geo->a, lb = geo->b;  // replaced below when cuBLAS needs a contiguous copy
  const size_t ra = la.shape.size(), rb = lb.shape.size();
  const int64_t m = geo->m, k = geo->k, n = geo->n;
  const Shape& batch = geo->batch;
  const Shape ba(la.shape.begin(), la.shape.end() - 2), bb(lb.shape.begin(), lb.shape.end() - 2);
  const int64_t nb = numel(batch);
  DeviceData out = env.alloc(in.shape, in.dtype);
  const size_t es = dtype_size(in.dtype);
  DeviceContext& c = DeviceContext::get();
  if (nb == 0 || m == 0 || n == 0) {
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  if (k == 0) {
    SLOTH_CU_OK(cudaMemsetAsync(out.raw(), 0, nb * m * n * es, c.stream));
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  const bool fl = is_floating(in.dtype);
  // ---- uint8 ----
  // The integer kernel is int32/int64 only; PyTorch's CUDA matmul has no uint8 either.
  if (!fl && in.dtype != DType::kInt32 && in.dtype != DType::kInt64)
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul: ", dtype_name(in.dtype), " operands are not supported on CUDA (as PyTorch's "
        "addmm_cuda); convert first with .to(kInt32) or .to(kFloat)"));
  // Operands whose matrices cuBLAS cannot read as they are become contiguous first.
  if (fl && !blas_layout(m, k, la.strides[ra - 2], la.strides[ra - 1]).ok) {
    a = make_contiguous(env, with_layout(a, la), in.dtype);
    la = a.layout;
  }
  if (fl && !blas_layout(k, n, lb.strides[rb - 2], lb.strides[rb - 1]).ok) {
    b = make_contiguous(env, with_layout(b, lb), in.dtype);
    lb = b.layout;
  }
  Strides sa = broadcast_strides(ba, Strides(la.strides.begin(), la.strides.end() - 2), batch);
  Strides sb = broadcast_strides(bb, Strides(lb.strides.begin(), lb.strides.end() - 2), batch);
  Strides sc = contiguous_strides(batch);
  for (int64_t& x : sc) x *= m * n;
  Shape bs = batch;
  coalesce(bs, {&sa, &sb, &sc});
  const int64_t sam = la.strides[ra - 2], sak = la.strides[ra - 1];
  const int64_t sbk = lb.strides[rb - 2], sbn = lb.strides[rb - 1];
  if (!fl) {
    if (bs.size() > static_cast<size_t>(kMatmulMaxBatchDims))
      return absl::InvalidArgumentError("cuda backend: matmul with too many batch dims");
    IntMatmulGeo g;
    g.nd = static_cast<int>(bs.size());
    for (size_t d = 0; d < bs.size(); ++d) {
      g.shape[d] = bs[d];
      g.sa[d] = sa[d];
      g.sb[d] = sb[d];
    }
    g.nb = nb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.sam = sam;
    g.sak = sak;
    g.sbk = sbk;
    g.sbn = sbn;
    SLOTH_CU_OK(launch_int_matmul(in.dtype == DType::kInt64, a.raw(), b.raw(), out.raw(), g,
                                  c.sm_count * 32, c.stream));
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  BlasLayout ma = blas_layout(m, k, sam, sak), mb = blas_layout(k, n, sbk, sbn);
  // Row-major C = A B is column-major C^T = B^T A^T.
  const cublasOperation_t opb = mb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = ma.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  // The innermost coalesced batch dim is one strided-batched call; outer dims loop.
  const size_t nd = bs.size();
  const int64_t inner = bs[nd - 1];
  const int64_t outer = numel(bs) / inner;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, oa = 0, ob = 0, oc = 0;
    for (int d = static_cast<int>(nd) - 2; d >= 0; --d) {
      int64_t cd = rem % bs[d];
      rem /= bs[d];
      oa += cd * sa[d];
      ob += cd * sb[d];
      oc += cd * sc[d];
    }
    if (in.dtype == DType::kFloat32) {
      const float alpha = 1, beta = 0;
      SLOTH_CUBLAS_OK(cublasSgemmStridedBatched(
          c.blas, opb, opa, n, m, k, &alpha, b.data<float>() + ob, mb.ld, sb[nd - 1],
          a.data<float>() + oa, ma.ld, sa[nd - 1], &beta, out.data<float>() + oc, n, sc[nd - 1],
          inner));
    } else {
      const double alpha = 1, beta = 0;
      SLOTH_CUBLAS_OK(cublasDgemmStridedBatched(
          c.blas, opb, opa, n, m, k, &alpha, b.data<double>() + ob, mb.ld, sb[nd - 1],
          a.data<double>() + oa, ma.ld, sa[nd - 1], &beta, out.data<double>() + oc, n,
          sc[nd - 1], inner));
    }
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace sloth::cuda
