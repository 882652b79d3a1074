// torch.matmul on the CPU: float32/float64 through OpenBLAS GEMM, integers with a plain loop.
// Strided operands are handed to BLAS as they are whenever their last two dims form a
// row-major matrix or its transpose (leading dimension = the other stride); only other
// layouts are copied. When the right operand has no batch dims and the left one's batch and
// row dims collapse to one stride, the whole batch is one GEMM.
#include <cblas.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "core/error.h"

namespace sloth::cpu {
namespace {

struct MatArg {
  bool trans = false;
  int64_t ld = 0;
  bool ok = false;
};

// How BLAS can read a rows x cols matrix with these element strides, if it can.
MatArg classify(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  MatArg m;
  if (sc == 1 || cols == 1) {
    m.ld = rows == 1 ? std::max<int64_t>(cols, 1) : sr;
    if (m.ld >= std::max<int64_t>(cols, 1)) {
      m.ok = true;
      return m;
    }
  }
  if (sr == 1 || rows == 1) {
    m.ld = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
    if (m.ld >= std::max<int64_t>(rows, 1)) {
      m.trans = true;
      m.ok = true;
      return m;
    }
  }
  return m;
}

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c) {
  auto t = [](bool x) { return x ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
  else
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
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

absl::Status run_matmul(Env& env, const Instr& in) {
  const DeviceData& a = env.get(in.in[0]);
  const DeviceData& b = env.get(in.in[1]);
  if (a.dtype != b.dtype || a.dtype != in.dtype || a.layout.shape.empty() ||
      b.layout.shape.empty())
    return absl::InternalError("cpu backend: matmul operands do not match the instruction");
  // torch.matmul promotion: a 1-D left operand is a row [1, k], a 1-D right one a column
  // [k, 1]; the extra dim is absent from the result but the data layout is the same.
  Layout la = a.layout, lb = b.layout;
  if (la.shape.size() == 1) {
    la.shape.insert(la.shape.begin(), 1);
    la.strides.insert(la.strides.begin(), 0);
  }
  if (lb.shape.size() == 1) {
    lb.shape.push_back(1);
    lb.strides.push_back(0);
  }
  const size_t ra = la.shape.size(), rb = lb.shape.size();
  const int64_t m = la.shape[ra - 2], k = la.shape[ra - 1], n = lb.shape[rb - 1];
  Shape ba(la.shape.begin(), la.shape.end() - 2), bb(lb.shape.begin(), lb.shape.end() - 2);
  auto batch_or = broadcast_shapes("matmul", ba, bb);
  if (!batch_or.ok()) return batch_or.status();
  const Shape batch = *batch_or;
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
        MatArg ma = classify(rows, k, srow, sak), mb = classify(k, n, sbk, sbn);
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
