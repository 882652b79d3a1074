// Reductions (sum, prod, amax, amin, argmax, argmin) over any set of dims of a strided input.
// The input is split into kept dims (one output each) and reduced dims, each group coalesced.
// When the reduced run is contiguous each output reduces a contiguous stretch with several
// independent accumulators (vectorizable, and more accurate than one running sum); when the
// kept innermost dim is the contiguous one, rows are accumulated into a block of outputs
// instead ("column" reduction), so memory is always read in order.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/ew_semantics.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/minmax.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "core/error.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

// Float sums and products accumulate in double, integer and bool ones in int64.
template <typename T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T> struct SumOp {
  using A = Wide<T>;
  static A init() { return 0; }
  static A add(A a, T x) { return a + static_cast<A>(x); }
  static A merge(A a, A b) { return a + b; }
};
template <typename T> struct ProdOp {
  using A = Wide<T>;
  static A init() { return 1; }
  static A add(A a, T x) { return a * static_cast<A>(x); }
  static A merge(A a, A b) { return a * b; }
};
template <typename T> struct MaxOp {
  using A = T;
  static A init() { return lowest_value<T>(); }
  static A add(A a, T x) { return ew::max_<T>(x, a); }  // NaN in x or a propagates
  static A merge(A a, A b) { return ew::max_<T>(a, b); }
};
template <typename T> struct MinOp {
  using A = T;
  static A init() { return highest_value<T>(); }
  static A add(A a, T x) { return ew::min_<T>(x, a); }
  static A merge(A a, A b) { return ew::min_<T>(a, b); }
};

struct Geometry {
  Shape kshape, rshape;   // coalesced kept / reduced dims
  Strides kin, rin;       // input strides of each
  int64_t kn = 1, rn = 1;
};

// Fills `g` (cleared first: a reused Geometry keeps its vectors' capacity, so a reduction
// run again and again allocates nothing here).
void split_into(const DeviceData& x, absl::Span<const int64_t> dims, Geometry& g) {
  g.kshape.clear();
  g.rshape.clear();
  g.kin.clear();
  g.rin.clear();
  const Shape& s = x.layout.shape;
  for (size_t d = 0; d < s.size(); ++d) {
    bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (red ? g.rshape : g.kshape).push_back(s[d]);
    (red ? g.rin : g.kin).push_back(x.layout.strides[d]);
  }
  g.kn = numel(g.kshape);
  g.rn = numel(g.rshape);
  // Outputs are written in row-major order of the kept dims, so only input strides matter.
  coalesce(g.kshape, {&g.kin});
  coalesce(g.rshape, {&g.rin});
}

template <typename T, typename Op>
typename Op::A reduce_run(const T* p, int64_t n, int64_t stride) {
  using A = typename Op::A;
  if constexpr (kHasVectorMinMax<T> &&
                (std::is_same_v<Op, MaxOp<T>> || std::is_same_v<Op, MinOp<T>>)) {
    if (stride == 1) return minmax_contig<T, std::is_same_v<Op, MaxOp<T>>>(p, n, Op::init());
  }
  if (stride != 1) {
    A a = Op::init();
    for (int64_t j = 0; j < n; ++j) a = Op::add(a, p[j * stride]);
    return a;
  }
  constexpr int kLanes = 8;
  A acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = Op::init();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] = Op::add(acc[k], p[j + k]);
  for (; j < n; ++j) acc[0] = Op::add(acc[0], p[j]);
  A a = acc[0];
  for (int k = 1; k < kLanes; ++k) a = Op::merge(a, acc[k]);
  return a;
}

// Reduces elements [start, start + n) of the reduced space, starting at `base`.
template <typename T, typename Op>
typename Op::A reduce_range(const T* base, const Geometry& g, int64_t start, int64_t n) {
  typename Op::A a = Op::init();
  const int nd = static_cast<int>(g.rshape.size());
  const int64_t is = g.rin[nd - 1];
  for_each_run<1>(g.rshape.data(), nd, {g.rin.data()}, start, n,
                  [&](const std::array<int64_t, 1>& off, int64_t run) {
                    a = Op::merge(a, reduce_run<T, Op>(base + off[0], run, is));
                  });
  return a;
}

// Column sums of float rows (bias and norm-weight gradients: a [rows, L] matrix summed over
// its rows). Each task owns a block of 32 columns and a chunk of rows and keeps its 32
// double accumulators in registers (8 AVX vectors) while it walks the rows, instead of a
// load and a store per element of a stack array. When the columns give fewer tasks than
// threads, the rows are split into chunks whose partial sums are merged in chunk order (so
// the result depends only on the thread count, not on scheduling).
constexpr int64_t kColBlock = 32;

// The kept dims but the last (the output's rows, walked outside the column loop) and their
// input strides ([1] / [0] when there are none). Held per thread, reused call after call (no
// allocation per reduction in a loop); a reduction's tasks read them through the returned
// references while the calling thread waits, and reductions never nest on one thread.
struct OuterLoop {
  Shape& shape;
  Strides& strides;
};
OuterLoop outer_loop(const Geometry& g) {
  thread_local Shape shape;
  thread_local Strides strides;
  shape.assign(g.kshape.begin(), g.kshape.end() - 1);
  strides.assign(g.kin.begin(), g.kin.end() - 1);
  if (shape.empty()) { shape.push_back(1); strides.push_back(0); }
  return {shape, strides};
}

template <typename RowFn>
void column_block(int64_t len, int64_t nrows, RowFn row_at, double* acc_out) {
  if (len == kColBlock) {
    __m256d acc[8];
    for (auto& a : acc) a = _mm256_setzero_pd();
    for (int64_t r = 0; r < nrows; ++r) {
      const float* p = row_at(r);
      for (int q = 0; q < 4; ++q) {
        const __m256 v = _mm256_loadu_ps(p + 8 * q);
        acc[2 * q] = _mm256_add_pd(acc[2 * q], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        acc[2 * q + 1] = _mm256_add_pd(acc[2 * q + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
      }
    }
    for (int q = 0; q < 8; ++q) _mm256_storeu_pd(acc_out + 4 * q, acc[q]);
    return;
  }
  for (int64_t j = 0; j < len; ++j) acc_out[j] = 0;
  for (int64_t r = 0; r < nrows; ++r) {
    const float* p = row_at(r);
    for (int64_t j = 0; j < len; ++j) acc_out[j] += static_cast<double>(p[j]);
  }
}

template <typename O>
void column_sum_f32(const float* base, const Geometry& g, O* out, bool parallel) {
  const int nk = static_cast<int>(g.kshape.size()), nr = static_cast<int>(g.rshape.size());
  const int64_t L = g.kshape[nk - 1], outer = g.kn / L;
  const int64_t cblocks = (L + kColBlock - 1) / kColBlock;
  const int nt = parallel ? num_threads() : 1;
  int64_t chunks = 1;
  if (nt > 1 && outer * cblocks < 4 * nt) chunks = std::clamp<int64_t>(g.rn / 256, 1, nt);
  const int64_t per_chunk = (g.rn + chunks - 1) / chunks;
  // Reused per thread; the tasks see them through these references (see `partial` below).
  const OuterLoop loop = outer_loop(g);
  Shape& oshape = loop.shape;
  Strides& ostr = loop.strides;
  // Row offsets of the reduced space (one coalesced dim in the common case).
  const bool one_dim = nr == 1;
  const int64_t rs = g.rin[nr - 1];
  std::vector<int64_t> row_off;
  if (!one_dim) {
    row_off.reserve(g.rn);
    for_each_run<1>(g.rshape.data(), nr, {g.rin.data()}, 0, g.rn,
                    [&](const std::array<int64_t, 1>& off, int64_t run) {
                      for (int64_t r = 0; r < run; ++r) row_off.push_back(off[0] + r * rs);
                    });
  }
  // Reused (no allocation per call in a loop); the tasks see it through `part`, as a
  // thread_local named inside the lambda would be each worker's own.
  thread_local std::vector<double> partial;
  partial.resize(chunks > 1 ? chunks * outer * L : 0);
  double* const part = partial.data();
  auto body = [&](int64_t b, int64_t e) {
    alignas(32) double acc[kColBlock];
    for (int64_t w = b; w < e; ++w) {
      const int64_t c = w % chunks, ob = w / chunks;
      const int64_t o = ob / cblocks, j0 = (ob % cblocks) * kColBlock;
      const int64_t len = std::min(kColBlock, L - j0);
      const int64_t r0 = c * per_chunk, r1 = std::min(g.rn, r0 + per_chunk);
      int64_t ooff = 0;
      for_each_run<1>(oshape.data(), static_cast<int>(oshape.size()), {ostr.data()}, o, 1,
                      [&](const std::array<int64_t, 1>& off, int64_t) { ooff = off[0]; });
      const float* col0 = base + ooff + j0;
      if (one_dim)
        column_block(len, std::max<int64_t>(r1 - r0, 0), [&](int64_t r) { return col0 + (r0 + r) * rs; }, acc);
      else
        column_block(len, std::max<int64_t>(r1 - r0, 0), [&](int64_t r) { return col0 + row_off[r0 + r]; }, acc);
      if (chunks == 1) {
        for (int64_t j = 0; j < len; ++j) out[o * L + j0 + j] = static_cast<O>(acc[j]);
      } else {
        double* dst = part + (c * outer + o) * L + j0;
        for (int64_t j = 0; j < len; ++j) dst[j] = acc[j];
      }
    }
  };
  const int64_t tasks = outer * cblocks * chunks;
  if (parallel && tasks > 1) parallel_for(tasks, 1, body);
  else body(0, tasks);
  if (chunks > 1)
    for (int64_t i = 0; i < outer * L; ++i) {
      double s = 0;
      for (int64_t c = 0; c < chunks; ++c) s += part[c * outer * L + i];
      out[i] = static_cast<O>(s);
    }
}

template <typename T, typename O, typename Op>
void reduce_kernel(const T* base, const Geometry& g, O* out) {
  using A = typename Op::A;
  const int64_t total = g.kn * g.rn;
  const bool parallel = total >= kParallelThreshold;
  const int nk = static_cast<int>(g.kshape.size());
  const bool column = g.kn > 1 && g.kin[nk - 1] == 1 && g.rin.back() != 1;

  if (g.kn == 1) {  // everything reduces to one value: partial sums per thread, then merge
    // Plain arrays, not std::vector: vector<bool> packs bits, and threads write neighbours.
    const int np = num_threads();
    A part_small[16];
    std::unique_ptr<A[]> part_heap(np > 16 ? new A[np] : nullptr);
    A* part = np > 16 ? part_heap.get() : part_small;
    for (int i = 0; i < np; ++i) part[i] = Op::init();
    std::atomic<int> slot{0};
    auto body = [&](int64_t b, int64_t e) {
      part[slot.fetch_add(1)] = reduce_range<T, Op>(base, g, b, e - b);
    };
    if (parallel) parallel_for(g.rn, 16384, body);
    else body(0, g.rn);
    A a = Op::init();
    for (int i = 0; i < np; ++i) a = Op::merge(a, part[i]);
    out[0] = static_cast<O>(a);
    return;
  }
  if (!column) {
    auto body = [&](int64_t b, int64_t e) {
      for_each_run<1>(g.kshape.data(), nk, {g.kin.data()}, b, e - b,
                      [&](const std::array<int64_t, 1>& off, int64_t run) {
                        const int64_t ks = g.kin[nk - 1];
                        for (int64_t j = 0; j < run; ++j)
                          out[b++] = static_cast<O>(
                              reduce_range<T, Op>(base + off[0] + j * ks, g, 0, g.rn));
                      });
    };
    if (parallel) parallel_for(g.kn, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.rn, 1)), body);
    else body(0, g.kn);
    return;
  }
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Op, SumOp<float>>) {
    column_sum_f32<O>(base, g, out, parallel);
    return;
  }
  // Column reduction: the innermost kept dim (length L) is contiguous; for each block of it,
  // walk every reduced position and accumulate a contiguous row slice.
  const int64_t L = g.kshape[nk - 1], outer = g.kn / L;
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (L + kBlock - 1) / kBlock;
  // Reused per thread; the tasks see them through these references (see `partial` below).
  const OuterLoop loop = outer_loop(g);
  Shape& oshape = loop.shape;
  Strides& ostr = loop.strides;
  const int nr = static_cast<int>(g.rshape.size());
  auto body = [&](int64_t b, int64_t e) {
    std::unique_ptr<A[]> acc(new A[kBlock]);
    for (int64_t w = b; w < e; ++w) {
      int64_t o = w / blocks, blk = w % blocks;
      int64_t j0 = blk * kBlock, len = std::min(kBlock, L - j0);
      int64_t ooff = 0;
      for_each_run<1>(oshape.data(), static_cast<int>(oshape.size()), {ostr.data()}, o, 1,
                      [&](const std::array<int64_t, 1>& off, int64_t) { ooff = off[0]; });
      for (int64_t j = 0; j < len; ++j) acc[j] = Op::init();
      const T* row0 = base + ooff + j0;
      for_each_run<1>(g.rshape.data(), nr, {g.rin.data()}, 0, g.rn,
                      [&](const std::array<int64_t, 1>& off, int64_t run) {
                        for (int64_t r = 0; r < run; ++r) {
                          const T* row = row0 + off[0] + r * g.rin[nr - 1];
                          A* a = acc.get();
                          for (int64_t j = 0; j < len; ++j) a[j] = Op::add(a[j], row[j]);
                        }
                      });
      O* dst = out + o * L + j0;
      for (int64_t j = 0; j < len; ++j) dst[j] = static_cast<O>(acc[j]);
    }
  };
  if (parallel) parallel_for(outer * blocks, 1, body);
  else body(0, outer * blocks);
}

template <typename T, bool kMax>
void arg_kernel(const DeviceData& x, const Geometry& g, int64_t* out) {
  const T* base = x.data<T>();
  const int nk = static_cast<int>(g.kshape.size());
  // Argument reductions run over exactly one dim, so the reduced space is one strided run.
  const int64_t n = g.rn, rs = g.rin.back();
  if (g.kn > 1 && g.kin[nk - 1] == 1 && rs != 1 && n > 1) {
    // Column form (e.g. a pooling window's dim of [N, C, kk, L]): the innermost kept dim is
    // contiguous, so compare whole rows into a block of running bests, reading memory in
    // order (vectorizable) instead of one strided walk per output.
    const int64_t L = g.kshape[nk - 1], outer = g.kn / L;
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (L + kBlock - 1) / kBlock;
    const OuterLoop loop = outer_loop(g);
    Shape& oshape = loop.shape;
    Strides& ostr = loop.strides;
    auto body = [&](int64_t b, int64_t e) {
      T best[kBlock];
      for (int64_t w = b; w < e; ++w) {
        const int64_t o = w / blocks, j0 = (w % blocks) * kBlock, len = std::min(kBlock, L - j0);
        int64_t ooff = 0;
        for_each_run<1>(oshape.data(), static_cast<int>(oshape.size()), {ostr.data()}, o, 1,
                        [&](const std::array<int64_t, 1>& off, int64_t) { ooff = off[0]; });
        const T* row0 = base + ooff + j0;
        int64_t* dst = out + o * L + j0;
        for (int64_t j = 0; j < len; ++j) { best[j] = row0[j]; dst[j] = 0; }
        for (int64_t i = 1; i < n; ++i) {
          const T* row = row0 + i * rs;
          for (int64_t j = 0; j < len; ++j) {
            const T v = row[j], bv = best[j];
            // The first maximum wins; the first NaN wins over everything (as PyTorch).
            const bool take = (kMax ? v > bv : v < bv) || (ew::isnan_(v) && !ew::isnan_(bv));
            best[j] = take ? v : bv;
            dst[j] = take ? i : dst[j];
          }
        }
      }
    };
    const int64_t work = outer * blocks;
    if (g.kn * n >= kParallelThreshold) parallel_for(work, 1, body);
    else body(0, work);
    return;
  }
  auto body = [&](int64_t b, int64_t e) {
    for_each_run<1>(g.kshape.data(), nk, {g.kin.data()}, b, e - b,
                    [&](const std::array<int64_t, 1>& off, int64_t run) {
                      for (int64_t j = 0; j < run; ++j) {
                        const T* p = base + off[0] + j * g.kin[nk - 1];
                        T best = p[0];
                        int64_t bi = 0;
                        if (!ew::isnan_(best)) {
                          for (int64_t i = 1; i < n; ++i) {
                            T v = p[i * rs];
                            if (ew::isnan_(v)) { bi = i; break; }
                            if (kMax ? v > best : v < best) { best = v; bi = i; }
                          }
                        }
                        out[b++] = bi;
                      }
                    });
  };
  if (g.kn * n >= kParallelThreshold) parallel_for(g.kn, std::max<int64_t>(1, 16384 / n), body);
  else body(0, g.kn);
}

}  // namespace

namespace {
template <typename T, typename O, typename Op>
void bound_reduce(const void* geometry, const char* x, char* out) {
  reduce_kernel<T, O, Op>(reinterpret_cast<const T*>(x), *static_cast<const Geometry*>(geometry),
                          reinterpret_cast<O*>(out));
}
}  // namespace

bool bind_reduce(Env& env, const Instr& in, BoundReduce* r) {
  if (in.op != OpId::kSum && in.op != OpId::kProd && in.op != OpId::kAmax && in.op != OpId::kAmin)
    return false;
  const DeviceData& x = env.vals[in.in[0]];
  auto g = std::make_shared<Geometry>();
  split_into(x, absl::Span<const int64_t>(in.attrs->dims.data(), in.attrs->dims.size()), *g);
  if (g->kn == 0 || g->rn == 0) return false;  // nothing to compute, or an error to report
  r->fn = nullptr;
  visit_dtype(x.dtype, [&](auto xz) {
    using T = decltype(xz);
    visit_dtype(in.dtype, [&](auto oz) {
      using O = decltype(oz);
      switch (in.op) {
        case OpId::kSum: r->fn = &bound_reduce<T, O, SumOp<T>>; break;
        case OpId::kProd: r->fn = &bound_reduce<T, O, ProdOp<T>>; break;
        case OpId::kAmax: r->fn = &bound_reduce<T, O, MaxOp<T>>; break;
        default: r->fn = &bound_reduce<T, O, MinOp<T>>; break;
      }
    });
  });
  r->geometry = std::move(g);
  return true;
}

absl::Status run_reduce(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  // Written straight into the slot (no DeviceData, dims or geometry vectors allocated per
  // run: a replayed step runs the same small reductions every call).
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const bool arg = in.op == OpId::kArgmax || in.op == OpId::kArgmin;
  int64_t arg_dim = 0;
  absl::Span<const int64_t> dims(in.attrs->dims.data(), in.attrs->dims.size());
  if (arg) {
    arg_dim = ArgReduceAttrs::of(in.attrs).dim;
    dims = x.layout.shape.empty() ? absl::Span<const int64_t>() : absl::Span<const int64_t>(&arg_dim, 1);
  }
  thread_local Geometry geometry;  // reduce kernels run on the calling thread's stack frame
  Geometry& g = geometry;
  split_into(x, dims, g);
  if (g.kn == 0) return absl::OkStatus();
  if (arg) {
    if (g.rn == 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: cannot reduce over an empty dim", op_name(in.op)));
    visit_dtype(x.dtype, [&](auto z) {
      using T = decltype(z);
      if (in.op == OpId::kArgmax) arg_kernel<T, true>(x, g, out.data<int64_t>());
      else arg_kernel<T, false>(x, g, out.data<int64_t>());
    });
    return absl::OkStatus();
  }
  if (g.rn == 0 && (in.op == OpId::kAmax || in.op == OpId::kAmin))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: cannot reduce over an empty dim (no identity)", op_name(in.op)));
  absl::Status st = absl::OkStatus();
  visit_dtype(x.dtype, [&](auto xz) {
    using T = decltype(xz);
    visit_dtype(out.dtype, [&](auto oz) {
      using O = decltype(oz);
      O* o = out.data<O>();
      switch (in.op) {
        case OpId::kSum: reduce_kernel<T, O, SumOp<T>>(x.data<T>(), g, o); break;
        case OpId::kProd: reduce_kernel<T, O, ProdOp<T>>(x.data<T>(), g, o); break;
        case OpId::kAmax: reduce_kernel<T, O, MaxOp<T>>(x.data<T>(), g, o); break;
        case OpId::kAmin: reduce_kernel<T, O, MinOp<T>>(x.data<T>(), g, o); break;
        default:
          st = absl::InternalError(
              absl::StrFormat("cpu backend: %s is not a reduction", op_name(in.op)));
      }
    });
  });
  return st;
}

}  // namespace sloth::cpu
