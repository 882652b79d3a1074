// conv2d's dedicated kernels on CUDA (ConvForward, ConvInputGrad, ConvWeightGrad): the
// columns of the whole batch through the Unfold/Fold kernels (window_source.h) and cuBLAS
// GEMMs over them (the GPU has the memory and bandwidth the CPU kernel avoids spending):
//   forward       cols = unfold(x) [N, CKK, L]; y_n = W cols_n (strided-batched, W shared);
//                 + bias broadcast
//   input grad    dcols_n = W^T dy_n (strided-batched); dx = fold(dcols)
//   weight grad   cols = unfold(x); dW = sum_n dy_n cols_n^T (one GEMM per sample, beta 1)
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernel_launch.h"
#include "backends/cuda/op_kernels.h"
#include "backends/cuda/run_env.h"
#include "backends/cuda/window_source.h"
#include "core/op_attrs.h"

namespace sloth::cuda {
namespace {

struct Conv {
  int64_t n, c, h, w, o, ho, wo;
  WindowAttrs a;
  int64_t l() const { return ho * wo; }
  int64_t ckk() const { return c * a.kh() * a.kw(); }
};

DeviceData contiguous(RunEnv& env, int slot) {
  DeviceData d = env.get(slot);
  return d.is_contiguous() ? d : make_contiguous(env, d, d.dtype);
}

// unfold (cols [N, CKK, L] from img [N, C, H, W]) or fold (img from cols), zero padding.
void window(const Conv& g, DType t, bool unfold, const DeviceData& img, const DeviceData& cols) {
  ParamWords p;
  p.p(unfold ? cols.raw() : img.raw());
  p.p(unfold ? img.raw() : cols.raw());
  for (int64_t v : {g.n, g.c, g.h, g.w, g.ho, g.wo, g.a.kh(), g.a.kw(), g.a.dh(), g.a.dw(),
                    g.a.ph(), g.a.pw(), g.a.sh(), g.a.sw(), int64_t{0}, int64_t{0}})
    p.i(v);
  p.d(0.0);
  launch(unfold ? unfold_source(t) : fold_source(t), p, unfold ? cols.numel() : img.numel());
}

// Row-major C[m, n] = A[m, k] B[k, n] (op(A), op(B) by ta, tb) for `batch` triples at the
// given element strides: column-major C^T = B^T A^T.
absl::Status gemm(DType t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a,
                  int64_t lda, int64_t sa, const void* b, int64_t ldb, int64_t sb, double beta,
                  void* c, int64_t sc, int64_t batch) {
  DeviceContext& ctx = DeviceContext::get();
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (t == DType::kFloat32) {
    const float alpha = 1, bt = static_cast<float>(beta);
    SLOTH_CUBLAS_OK(cublasSgemmStridedBatched(ctx.blas, ob, oa, n, m, k, &alpha,
                                              static_cast<const float*>(b), ldb, sb,
                                              static_cast<const float*>(a), lda, sa, &bt,
                                              static_cast<float*>(c), n, sc, batch));
  } else {
    const double alpha = 1;
    SLOTH_CUBLAS_OK(cublasDgemmStridedBatched(ctx.blas, ob, oa, n, m, k, &alpha,
                                              static_cast<const double*>(b), ldb, sb,
                                              static_cast<const double*>(a), lda, sa, &beta,
                                              static_cast<double*>(c), n, sc, batch));
  }
  return absl::OkStatus();
}

absl::Status check_dtype(DType t) {
  if (t != DType::kFloat32 && t != DType::kFloat64)
    return absl::InternalError("cuda backend: conv kernels take float32 or float64");
  return absl::OkStatus();
}

absl::Status run_conv_forward(RunEnv& env, const Instr& in) {
  SLOTH_RETURN_IF_ERROR(check_dtype(in.dtype));
  DeviceData x = contiguous(env, in.in[0]), w = contiguous(env, in.in[1]);
  const Shape& xs = x.layout.shape;
  const Conv g{xs[0], xs[1], xs[2], xs[3], in.shape[1], in.shape[2], in.shape[3],
               WindowAttrs::of(in.attrs)};
  DeviceData y = env.alloc(in.shape, in.dtype);
  if (y.numel() > 0) {
    DeviceData cols = env.alloc({g.n, g.ckk(), g.l()}, in.dtype);
    if (cols.numel() > 0) window(g, in.dtype, true, x, cols);
    SLOTH_RETURN_IF_ERROR(gemm(in.dtype, false, false, g.o, g.l(), g.ckk(), w.raw(), g.ckk(), 0,
                               cols.raw(), g.l(), g.ckk() * g.l(), 0.0, y.raw(), g.o * g.l(), g.n));
    if (in.in.size() > 2) {
      DeviceData b = env.get(in.in[2]);
      Layout bl = b.layout;
      bl.shape = in.shape.to_shape();
      bl.strides = {0, b.layout.strides[0], 0, 0};
      copy_into(y, with_layout(b, bl), /*accumulate=*/true);
    }
  }
  env.set(in.out, std::move(y));
  return absl::OkStatus();
}

absl::Status run_conv_input_grad(RunEnv& env, const Instr& in) {
  SLOTH_RETURN_IF_ERROR(check_dtype(in.dtype));
  DeviceData dy = contiguous(env, in.in[0]), w = contiguous(env, in.in[1]);
  const Shape& ys = dy.layout.shape;
  const Conv g{in.shape[0], in.shape[1], in.shape[2], in.shape[3], ys[1], ys[2], ys[3],
               WindowAttrs::of(in.attrs)};
  DeviceData dx = env.alloc(in.shape, in.dtype);
  if (dx.numel() > 0) {
    DeviceData cols = env.alloc({g.n, g.ckk(), g.l()}, in.dtype);
    SLOTH_RETURN_IF_ERROR(gemm(in.dtype, true, false, g.ckk(), g.l(), g.o, w.raw(), g.ckk(), 0,
                               dy.raw(), g.l(), g.o * g.l(), 0.0, cols.raw(), g.ckk() * g.l(), g.n));
    window(g, in.dtype, false, dx, cols);
  }
  env.set(in.out, std::move(dx));
  return absl::OkStatus();
}

absl::Status run_conv_weight_grad(RunEnv& env, const Instr& in) {
  SLOTH_RETURN_IF_ERROR(check_dtype(in.dtype));
  DeviceData dy = contiguous(env, in.in[0]), x = contiguous(env, in.in[1]);
  const Shape& xs = x.layout.shape;
  const Shape& ys = dy.layout.shape;
  const Conv g{xs[0], xs[1], xs[2], xs[3], ys[1], ys[2], ys[3], WindowAttrs::of(in.attrs)};
  DeviceData dw = env.alloc(in.shape, in.dtype);
  if (dw.numel() > 0) {
    if (g.n == 0) {
      fill(dw, 0.0);
    } else {
      DeviceData cols = env.alloc({g.n, g.ckk(), g.l()}, in.dtype);
      window(g, in.dtype, true, x, cols);
      const size_t es = dtype_size(in.dtype);
      for (int64_t s = 0; s < g.n; ++s)
        SLOTH_RETURN_IF_ERROR(gemm(in.dtype, false, true, g.o, g.ckk(), g.l(),
                                   static_cast<const char*>(dy.raw()) + s * g.o * g.l() * es, g.l(), 0,
                                   static_cast<const char*>(cols.raw()) + s * g.ckk() * g.l() * es,
                                   g.l(), 0, s == 0 ? 0.0 : 1.0, dw.raw(), 0, 1));
    }
  }
  env.set(in.out, std::move(dw));
  return absl::OkStatus();
}

}  // namespace

SLOTH_CUDA_OP_KERNEL(kConvForward, run_conv_forward);
SLOTH_CUDA_OP_KERNEL(kConvInputGrad, run_conv_input_grad);
SLOTH_CUDA_OP_KERNEL(kConvWeightGrad, run_conv_weight_grad);

}  // namespace sloth::cuda
