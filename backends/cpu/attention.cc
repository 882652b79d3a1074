// scaled_dot_product_attention's fused CPU kernel (OpId::kSdpa). Each task is one block of
// query rows of one (batch, head): the block's scores go to a thread-local buffer that stays
// in cache, are masked and soft-maxed in place, then multiplied by V straight into the
// output. So the [L, S] score matrix of a head is never written to memory as a tensor, and
// nothing of size [L, S] is allocated. The GEMMs of a block are small (rows x S x E); they run
// in OpenBLAS single-threaded (below its threading threshold), the blocks in the thread pool.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/container/inlined_vector.h"

#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/ew_semantics.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

// Rows per block: the block's scores (rows x S) fit in about 64 KiB.
int64_t block_rows(int64_t s, size_t elem) {
  return std::clamp<int64_t>(static_cast<int64_t>(65536 / elem) / std::max<int64_t>(s, 1), 1, 64);
}

template <typename T>
void gemm(bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc) {
  const auto t = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, t, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, t, m, n, k, alpha, a, lda, b, ldb, 0.0, c, ldc);
}

template <typename T>
inline T fast_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return ew::vexpf(x);
  else return std::exp(x);
}

// Reductions over a row in kLanes independent lanes, which the compiler vectorizes (a
// single running value is a loop-carried dependence it may not reorder).
constexpr int kLanes = 8;
template <typename T>
T row_max(const T* x, int64_t n) {
  T lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  T m = -std::numeric_limits<T>::infinity();
  for (int l = 0; l < kLanes; ++l) m = lane[l] > m ? lane[l] : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
template <typename T>
T row_sum(const T* x, int64_t n) {
  T lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += x[j + l];
  T s = 0;
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  for (; j < n; ++j) s += x[j];
  return s;
}

using Dims = absl::InlinedVector<int64_t, 8>;  // no heap for up to 8 batch dims

// Element offset of flattened batch index `b` over batch sizes `shape` and `strides`.
int64_t batch_offset(int64_t b, const Dims& shape, const Dims& strides, int64_t base) {
  int64_t o = base;
  for (size_t d = shape.size(); d-- > 0;) {
    o += (b % shape[d]) * strides[d];
    b /= shape[d];
  }
  return o;
}

// A matrix operand: its heads' batch layout, its row stride; unit column stride.
struct Mat {
  const char* base = nullptr;
  Dims shape, strides;  // batch dims
  int64_t offset = 0;
  int64_t ld = 0;
  int64_t head(int64_t h) const { return batch_offset(h, shape, strides, offset); }
};

// q/k/v as BLAS-ready matrices: rows at a stride >= the row length and unit column stride
// are used in place (permuted heads of a [B, L, H, D] projection are), others copied into
// `copy`.
Mat as_mat(Env& env, const DeviceData& x, DeviceData& copy) {
  const size_t r = x.layout.shape.size();
  auto usable = [r](const DeviceData& d) {
    const Shape& s = d.layout.shape;
    const Strides& st = d.layout.strides;
    return (s[r - 1] <= 1 || st[r - 1] == 1) && (s[r - 2] <= 1 || st[r - 2] >= s[r - 1]);
  };
  const DeviceData* d = &x;
  if (!usable(x)) {
    copy = make_contiguous(env, x, x.dtype);
    d = &copy;
  }
  const Shape& s = d->layout.shape;
  Mat m;
  m.base = static_cast<const char*>(d->storage->data());
  m.ld = std::max<int64_t>(s[r - 2] <= 1 ? 0 : d->layout.strides[r - 2],
                           std::max<int64_t>(s[r - 1], 1));
  m.shape.assign(s.begin(), s.end() - 2);
  m.strides.assign(d->layout.strides.begin(), d->layout.strides.end() - 2);
  m.offset = d->layout.offset;
  return m;
}

template <typename T>
absl::Status sdpa(Env& env, const Instr& in) {
  const DeviceData &q = env.get(in.in[0]), &k = env.get(in.in[1]), &v = env.get(in.in[2]);
  const SdpaAttrs at = SdpaAttrs::of(in.attrs);
  const Shape& qs = q.layout.shape;
  const size_t r = qs.size();
  const int64_t L = qs[r - 2], E = qs[r - 1], S = k.layout.shape[r - 2],
                Ev = v.layout.shape[r - 1];
  Shape os = qs;
  os.back() = Ev;
  DeviceData copies[3];  // strided operands copied for BLAS (rare)
  const Mat mq = as_mat(env, q, copies[0]), mk = as_mat(env, k, copies[1]),
            mv = as_mat(env, v, copies[2]);
  DeviceData& out = env.alloc_to(in.out, os, q.dtype);
  T* po = out.data<T>();
  int64_t heads = 1;
  for (int64_t d : mq.shape) heads *= d;
  if (numel(os) == 0) return absl::OkStatus();

  // The mask read through broadcast strides over [batch..., L, S].
  const bool has_mask = in.in.size() > 3;
  const DeviceData* mask = has_mask ? &env.get(in.in[3]) : nullptr;
  Mat mm;  // the mask's batch layout (broadcast strides); rows at ms_row, columns at ms_col
  int64_t ms_row = 0, ms_col = 0;
  const bool bool_mask = has_mask && mask->dtype == DType::kBool;
  if (has_mask) {
    const Shape& mshape = mask->layout.shape;
    Dims bst(r, 0);
    const size_t lead = r - mshape.size();
    for (size_t d = 0; d < mshape.size(); ++d)
      bst[lead + d] = mshape[d] == 1 ? 0 : mask->layout.strides[d];
    mm.shape.assign(qs.begin(), qs.end() - 2);
    mm.strides.assign(bst.begin(), bst.end() - 2);
    mm.offset = mask->layout.offset;
    ms_row = bst[r - 2];
    ms_col = bst[r - 1];
  }
  const T scale = static_cast<T>(at.scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  // Causal blocks are shorter: a block computes scores up to its last row's diagonal.
  const int64_t br = std::min<int64_t>(block_rows(S, sizeof(T)), at.is_causal ? 16 : 64);
  const int64_t blocks = (L + br - 1) / br;
  const char* mbase = has_mask ? static_cast<const char*>(mask->storage->data()) : nullptr;

  auto run = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<T> buf;
    if (buf.size() < static_cast<size_t>(br * S)) buf.resize(static_cast<size_t>(br * S));
    T* sc = buf.data();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t h = t / blocks, i0 = (t % blocks) * br, i1 = std::min(L, i0 + br);
      const int64_t rows = i1 - i0;
      // Causal: key j takes part for j <= i, so this block needs keys [0, i1).
      const int64_t cols = at.is_causal ? std::min(S, i1) : S;
      const T* qh = reinterpret_cast<const T*>(mq.base) + mq.head(h) + i0 * mq.ld;
      const T* kh = reinterpret_cast<const T*>(mk.base) + mk.head(h);
      const T* vh = reinterpret_cast<const T*>(mv.base) + mv.head(h);
      const int64_t mask_head = has_mask ? mm.head(h) : 0;
      T* oh = po + (h * L + i0) * Ev;
      if (cols == 0) {  // no keys: softmax over nothing times an empty V is 0
        std::fill(oh, oh + rows * Ev, T(0));
        continue;
      }
      gemm<T>(true, rows, cols, E, scale, qh, mq.ld, kh, mk.ld, sc, cols);
      for (int64_t i = 0; i < rows; ++i) {
        T* row = sc + i * cols;
        const int64_t qi = i0 + i;
        // Causal: only keys j <= qi take part; the others get probability 0 directly.
        const int64_t valid = at.is_causal ? std::min(cols, qi + 1) : cols;
        if (has_mask) {
          const int64_t mo = mask_head + qi * ms_row;
          if (bool_mask) {
            const bool* mrow = reinterpret_cast<const bool*>(mbase) + mo;
            for (int64_t j = 0; j < valid; ++j)
              if (!mrow[j * ms_col]) row[j] = neg_inf;
          } else {
            const T* mrow = reinterpret_cast<const T*>(mbase) + mo;
            for (int64_t j = 0; j < valid; ++j) row[j] += mrow[j * ms_col];
          }
        }
        // A fully masked row: exp(-inf - -inf) is NaN, as PyTorch's softmax gives.
        const T mx = row_max(row, valid);
        const T shift = mx == neg_inf ? std::numeric_limits<T>::quiet_NaN() : mx;
        for (int64_t j = 0; j < valid; ++j) row[j] = fast_exp<T>(row[j] - shift);
        const T inv = T(1) / row_sum(row, valid);
        for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
        for (int64_t j = valid; j < cols; ++j) row[j] = 0;
      }
      gemm<T>(false, rows, Ev, cols, T(1), sc, cols, vh, mv.ld, oh, Ev);
    }
  };
  const int64_t tasks = heads * blocks;
  const int64_t work_per_task = std::max<int64_t>(br * S * (E + Ev), 1);
  parallel_for(tasks, std::max<int64_t>(1, kParallelThreshold / work_per_task), run);
  return absl::OkStatus();
}

absl::Status run_sdpa(Env& env, const Instr& in) {
  if (env.get(in.in[0]).dtype == DType::kFloat64) return sdpa<double>(env, in);
  return sdpa<float>(env, in);
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kSdpa, run_sdpa);

}  // namespace sloth::cpu
