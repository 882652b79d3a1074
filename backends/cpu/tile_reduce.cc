// The fused reduction of a tile program: the prologue runs tile by tile over the reduction's
// input space in row-major order, and each tile of the reduced value goes straight into
// accumulators (no intermediate buffer). The reduced dims are the trailing ones (the planner
// checks), so each output owns one contiguous stretch of rn elements of that order.
#include <algorithm>
#include <atomic>

#include "absl/container/inlined_vector.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/tile_loop.h"

namespace sloth::cpu {

using tile::MaxAcc;
using tile::MinAcc;
using tile::ProdAcc;
using tile::SumAcc;

// The fused reduction over all outputs (row_lo < 0, split over threads when large) or over
// outputs [row_lo, row_hi) on this thread.
absl::Status TileProgram::run_reduce(int64_t n, const Bind& b, int64_t row_lo,
                                     int64_t row_hi) const {
  const int64_t kn = numel(red_.shape);
  const int64_t rn = kn == 0 ? 0 : n / kn;
  const DType vt = vals_[sink_].dtype;
  absl::Status st = absl::OkStatus();
  visit_dtype(vt, [&](auto vz) {
    using T = decltype(vz);
    visit_dtype(red_.dtype, [&](auto oz) {
      using O = decltype(oz);
      O* o = reinterpret_cast<O*>(b.red_out);
      switch (red_.op) {
        case OpId::kSum: reduce_as<T, O, SumAcc<T>>(n, kn, rn, b, o, row_lo, row_hi); break;
        case OpId::kProd: reduce_as<T, O, ProdAcc<T>>(n, kn, rn, b, o, row_lo, row_hi); break;
        case OpId::kAmax: reduce_as<T, O, MaxAcc<T>>(n, kn, rn, b, o, row_lo, row_hi); break;
        case OpId::kAmin: reduce_as<T, O, MinAcc<T>>(n, kn, rn, b, o, row_lo, row_hi); break;
        default: st = absl::InternalError("cpu backend: unsupported fused reduction");
      }
    });
  });
  return st;
}

template <typename T, typename O, typename Acc>
void TileProgram::reduce_as(int64_t n, int64_t kn, int64_t rn, const Bind& b, O* o,
                            int64_t row_lo, int64_t row_hi) const {
  using A = typename Acc::A;
  const TileFn jit = b.jit;
  if (kn == 0) return;
  if (rn == 0) {
    for (int64_t i = 0; i < kn; ++i) o[i] = static_cast<O>(Acc::init());
    return;
  }
  if (kn == 1) {  // one output: per-thread partials over the whole range, then merged
    struct One {
      A a;
      void operator()(const void* v, int64_t, int64_t m) {
        a = Acc::merge(a, Acc::run(static_cast<const T*>(v), m));
      }
    };
    if (n >= kParallelThreshold) {
      const int np = num_threads();
      absl::InlinedVector<A, 16> part(np, Acc::init());
      std::atomic<int> next{0};
      parallel_for(n, kTile * 8, [&](int64_t lo, int64_t hi) {
        One sink{Acc::init()};
        run_chunk<One>(lo, hi, b, &sink, jit);
        part[next.fetch_add(1)] = sink.a;
      });
      A a = Acc::init();
      for (int i = 0; i < np; ++i) a = Acc::merge(a, part[i]);
      o[0] = static_cast<O>(a);
    } else {
      One sink{Acc::init()};
      run_chunk<One>(0, n, b, &sink, jit);
      o[0] = static_cast<O>(sink.a);
    }
    return;
  }
  // Several outputs: chunks of whole rows; a tile may span rows and a row may span tiles.
  struct Rows {
    O* o;
    int64_t rn, row;
    A a;
    int64_t left;  // elements of `row` still to come
    void operator()(const void* v, int64_t, int64_t m) {
      const T* x = static_cast<const T*>(v);
      while (m > 0) {
        int64_t take = std::min(m, left);
        a = Acc::merge(a, Acc::run(x, take));
        x += take;
        m -= take;
        left -= take;
        if (left == 0) {
          o[row++] = static_cast<O>(a);
          a = Acc::init();
          left = rn;
        }
      }
    }
  };
  auto body = [&](int64_t rb, int64_t re) {
    Rows sink{o, rn, rb, Acc::init(), rn};
    run_chunk<Rows>(rb * rn, re * rn, b, &sink, jit);
  };
  if (row_lo >= 0)
    body(row_lo, row_hi);
  else if (n >= kParallelThreshold)
    parallel_for(kn, std::max<int64_t>(1, (kTile * 8 + rn - 1) / rn), body);
  else
    body(0, kn);
}

}  // namespace sloth::cpu
