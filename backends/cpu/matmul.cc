// torch.matmul on the CPU: float32/float64 through OpenBLAS GEMM, integers with a plain loop.
// Strided operands are handed to BLAS as they are whenever their last two dims form a
// row-major matrix or its transpose (leading dimension = the other stride); only other
// layouts are copied. When the right operand has no batch dims and the left one's batch and
// row dims collapse to one stride, the whole batch is one GEMM.
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/cpu/blas_core.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/small_gemm.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "core/blas_layout.h"
#include "core/error.h"
#include "core/settings.h"

namespace sloth::cpu {
namespace {

template <typename T>
void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
              const T* b, int64_t ldb, T* c, int64_t ldc) {
  auto t = [](bool x) { return x ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  }
}

// Work (m*n*k) from which one GEMM is split across the pool, in blocks of rows (or columns
// when there are few rows) whose edges stay multiples of the BLAS kernels' tile sizes.
constexpr int64_t kSplitGemm = int64_t{1} << 20;

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    // Small products skip OpenBLAS (small_gemm.h; SLOTH_SMALL_GEMM=0 turns this off).
    if (settings().small_gemm && small_sgemm_takes(ta, tb, m, n, k)) {
      small_sgemm(ta, tb, m, n, k, a, lda, b, ldb, c);
      return;
    }
  }
  ensure_blas_core();
  blas_single_threaded();
  const int nt = num_threads();
  if (nt <= 1 || m * n * k < kSplitGemm) {
    gemm_one<T>(ta, tb, m, n, k, a, lda, b, ldb, c, n);
    return;
  }
  if (m >= 16 * nt) {  // rows: A's rows (or columns when transposed) and C's rows
    const int64_t blk = (m + 8 * nt - 1) / (8 * nt) * 8;
    parallel_for((m + blk - 1) / blk, 1, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t i0 = q * blk, rows = std::min(blk, m - i0);
        gemm_one<T>(ta, tb, rows, n, k, ta ? a + i0 : a + i0 * lda, lda, b, ldb, c + i0 * n, n);
      }
    });
  } else {  // columns: B's columns (or rows when transposed) and C's columns
    const int64_t blk = (n + 16 * nt - 1) / (16 * nt) * 16;
    parallel_for((n + blk - 1) / blk, 1, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t j0 = q * blk, cols = std::min(blk, n - j0);
        gemm_one<T>(ta, tb, m, cols, k, a, lda, tb ? b + j0 * ldb : b + j0, ldb, c + j0, n);
      }
    });
  }
}

// Whether a batch of GEMMs goes one whole GEMM per pool task: when there are enough of them
// for every thread, and both operands are read in place (the copying path allocates from the
// Env, which is not thread-safe).
bool split_batch(int64_t nb, bool a_ok, bool b_ok) {
  return a_ok && b_ok && num_threads() > 1 && nb >= 2 * num_threads();
}

template <typename T>
void int_matmul(const T* a, int64_t sam, int64_t sak, const T* b, int64_t sbk, int64_t sbn,
                T* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      T av = a[i * sam + p * sak];
      const T* br = b + p * sbk;
      for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(row[j] + av * br[j * sbn]);
    }
  }
}

}  // namespace

bool bind_gemm(Env& env, const Instr& in, BoundGemm* g) {
  const DeviceData& a = env.vals[in.in[0]];
  const DeviceData& b = env.vals[in.in[1]];
  if (a.dtype != b.dtype || a.dtype != in.dtype || a.layout.shape.size() != 2 ||
      b.layout.shape.size() != 2 || (in.dtype != DType::kFloat32 && in.dtype != DType::kFloat64))
    return false;
  const int64_t m = a.layout.shape[0], k = a.layout.shape[1], n = b.layout.shape[1];
  const BlasLayout ma = blas_layout(m, k, a.layout.strides[0], a.layout.strides[1]);
  const BlasLayout mb = blas_layout(k, n, b.layout.strides[0], b.layout.strides[1]);
  if (!ma.ok || !mb.ok || m <= 0 || n <= 0 || k <= 0 || b.layout.shape[0] != k) return false;
  *g = BoundGemm{in.dtype, ma.trans, mb.trans, m, n, k, ma.ld, mb.ld};
  // gemm()'s choices, made once: the small kernel, or one BLAS call on this thread.
  if (in.dtype == DType::kFloat32 && settings().small_gemm && small_sgemm_takes(ma.trans, mb.trans, m, n, k)) {
    g->path = BoundGemm::kSmall;
  } else if (num_threads() <= 1 || m * n * k < kSplitGemm) {
    ensure_blas_core();
    blas_single_threaded();
    g->path = BoundGemm::kBlas;
  }
  return true;
}

void run_gemm(const BoundGemm& g, const char* a, const char* b, char* c) {
  if (g.path == BoundGemm::kSmall) {
    small_sgemm(g.ta, g.tb, g.m, g.n, g.k, reinterpret_cast<const float*>(a), g.lda,
                reinterpret_cast<const float*>(b), g.ldb, reinterpret_cast<float*>(c));
    return;
  }
  if (g.path == BoundGemm::kBlas) {
    if (g.dtype == DType::kFloat32)
      gemm_one<float>(g.ta, g.tb, g.m, g.n, g.k, reinterpret_cast<const float*>(a), g.lda,
                      reinterpret_cast<const float*>(b), g.ldb, reinterpret_cast<float*>(c), g.n);
    else
      gemm_one<double>(g.ta, g.tb, g.m, g.n, g.k, reinterpret_cast<const double*>(a), g.lda,
                       reinterpret_cast<const double*>(b), g.ldb, reinterpret_cast<double*>(c), g.n);
    return;
  }
  if (g.dtype == DType::kFloat32)
    gemm<float>(g.ta, g.tb, g.m, g.n, g.k, reinterpret_cast<const float*>(a), g.lda,
                reinterpret_cast<const float*>(b), g.ldb, reinterpret_cast<float*>(c));
  else
    gemm<double>(g.ta, g.tb, g.m, g.n, g.k, reinterpret_cast<const double*>(a), g.lda,
                 reinterpret_cast<const double*>(b), g.ldb, reinterpret_cast<double*>(c));
}

absl::Status run_matmul(Env& env, const Instr& in) {
  const DeviceData& a = env.get(in.in[0]);
  const DeviceData& b = env.get(in.in[1]);
  if (a.dtype != b.dtype || a.dtype != in.dtype || a.layout.shape.empty() ||
      b.layout.shape.empty())
    return absl::InternalError("cpu backend: matmul operands do not match the instruction");
  // Plain 2-D x 2-D floating GEMM whose operands BLAS (or the small kernel) reads in place:
  // no batch bookkeeping, output written straight into its slot.
  if (a.layout.shape.size() == 2 && b.layout.shape.size() == 2 &&
      (in.dtype == DType::kFloat32 || in.dtype == DType::kFloat64)) {
    const int64_t m = a.layout.shape[0], k = a.layout.shape[1], n = b.layout.shape[1];
    BlasLayout ma = blas_layout(m, k, a.layout.strides[0], a.layout.strides[1]);
    BlasLayout mb = blas_layout(k, n, b.layout.strides[0], b.layout.strides[1]);
    if (ma.ok && mb.ok && m > 0 && n > 0 && k > 0 && b.layout.shape[0] == k) {
      const DeviceData& a2 = a;  // env.alloc_to below does not move other slots
      const DeviceData& b2 = b;
      DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
      if (in.dtype == DType::kFloat32)
        gemm<float>(ma.trans, mb.trans, m, n, k, a2.data<float>(), ma.ld, b2.data<float>(), mb.ld,
                    out.data<float>());
      else
        gemm<double>(ma.trans, mb.trans, m, n, k, a2.data<double>(), ma.ld, b2.data<double>(),
                     mb.ld, out.data<double>());
      return absl::OkStatus();
    }
  }
  absl::StatusOr<MatmulGeometry> geo = matmul_geometry(a.layout, b.layout);
  if (!geo.ok()) return geo.status();
  const Layout &la = geo->a, &lb = geo->b;
  const size_t ra = la.shape.size(), rb = lb.shape.size();
  const int64_t m = geo->m, k = geo->k, n = geo->n;
  const Shape& batch = geo->batch;
  const Shape ba(la.shape.begin(), la.shape.end() - 2), bb(lb.shape.begin(), lb.shape.end() - 2);
  Strides sa = broadcast_strides(ba, Strides(la.strides.begin(), la.strides.end() - 2), batch);
  Strides sb = broadcast_strides(bb, Strides(lb.strides.begin(), lb.strides.end() - 2), batch);
  const int64_t sam = la.strides[ra - 2], sak = la.strides[ra - 1];
  const int64_t sbk = lb.strides[rb - 2], sbn = lb.strides[rb - 1];
  const int64_t nb = numel(batch);

  DeviceData out = env.alloc(in.shape, in.dtype);
  const size_t es = dtype_size(in.dtype);
  if (nb == 0 || m == 0 || n == 0) {
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  if (k == 0) {
    std::memset(out.raw(), 0, nb * m * n * es);
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  // Batch offsets of each operand, in the output's row-major batch order.
  std::vector<int64_t> offa(nb), offb(nb);
  {
    Shape bs = batch.empty() ? Shape{1} : batch;
    Strides xa = batch.empty() ? Strides{0} : sa, xb = batch.empty() ? Strides{0} : sb;
    int64_t i = 0;
    for_each_run<2>(bs.data(), static_cast<int>(bs.size()), {xa.data(), xb.data()}, 0, nb,
                    [&](const std::array<int64_t, 2>& off, int64_t run) {
                      for (int64_t j = 0; j < run; ++j, ++i) {
                        offa[i] = off[0] + j * xa.back();
                        offb[i] = off[1] + j * xb.back();
                      }
                    });
  }
  // Fold the batch into the rows when b is shared and a's [batch..., m] rows have one stride.
  int64_t fold_rows = 0, fold_stride = 0;
  if (nb > 1 && std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; })) {
    Shape rows = batch;
    rows.push_back(m);
    Strides rs = sa;
    rs.push_back(sam);
    coalesce(rows, {&rs});
    if (rows.size() == 1 && rs[0] != 0) {
      fold_rows = rows[0];
      fold_stride = rs[0];
    }
  }

  absl::Status st = absl::OkStatus();
  visit_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      auto one = [&](const T* A, int64_t rows, int64_t srow, const T* B, T* C) {
        BlasLayout ma = blas_layout(rows, k, srow, sak), mb = blas_layout(k, n, sbk, sbn);
        DeviceData ca, cb;
        if (!ma.ok) {
          ca = env.alloc({rows, k}, in.dtype);
          copy_strided(ca.raw(), in.dtype, contiguous_strides(ca.layout.shape), A, in.dtype,
                       {srow, sak}, ca.layout.shape);
          A = ca.data<T>();
          ma = {false, k, true};
        }
        if (!mb.ok) {
          cb = env.alloc({k, n}, in.dtype);
          copy_strided(cb.raw(), in.dtype, contiguous_strides(cb.layout.shape), B, in.dtype,
                       {sbk, sbn}, cb.layout.shape);
          B = cb.data<T>();
          mb = {false, n, true};
        }
        gemm<T>(ma.trans, mb.trans, rows, n, k, A, ma.ld, B, mb.ld, C);
      };
      if (fold_rows > 0) {
        one(pa + offa[0], fold_rows, fold_stride, pb + offb[0], pc);
      } else if (split_batch(nb, blas_layout(m, k, sam, sak).ok, blas_layout(k, n, sbk, sbn).ok)) {
        // Many small GEMMs (a convolution's per-sample products): one whole GEMM per sample
        // on sloth's pool (gemm() runs inline inside a pool task). Split inside, each small
        // product spent most of its time waking up and synchronizing threads.
        parallel_for(nb, 1, [&](int64_t b0, int64_t b1) {
          for (int64_t i = b0; i < b1; ++i)
            one(pa + offa[i], m, sam, pb + offb[i], pc + i * m * n);
        });
      } else {
        for (int64_t i = 0; i < nb; ++i) one(pa + offa[i], m, sam, pb + offb[i], pc + i * m * n);
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      st = absl::InvalidArgumentError("matmul: bool tensors are not supported");
    } else {
      for (int64_t i = 0; i < nb; ++i)
        int_matmul<T>(pa + offa[i], sam, sak, pb + offb[i], sbk, sbn, pc + i * m * n, m, n, k);
    }
  });
  SLOTH_RETURN_IF_ERROR(st);
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace sloth::cpu
