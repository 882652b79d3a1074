// The tile interpreter's data movement and accumulators (tile_program.h): operands loaded
// into tiles with conversion and broadcast, constant tiles, and the fused reductions' per-tile
// accumulators. Internal to the CPU backend.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cpu/minmax.h"
#include "backends/cpu/strided.h"
#include "core/dtype.h"
#include "core/ew_semantics.h"

namespace sloth::cpu::tile {

struct LoadArgs {
  const char* base;
  const int64_t* shape;
  const int64_t* strides;
  int nd;
};
using LoadFn = void (*)(const LoadArgs&, int64_t start, int64_t n, void* dst);

template <typename S, typename D>
void load_strided(const LoadArgs& a, int64_t start, int64_t n, void* dst_v) {
  const S* src = reinterpret_cast<const S*>(a.base);
  D* dst = static_cast<D*>(dst_v);
  const int64_t is = a.strides[a.nd - 1];
  for_each_run<1>(a.shape, a.nd, {a.strides}, start, n,
                  [&](const std::array<int64_t, 1>& off, int64_t run) {
                    const S* s = src + off[0];
                    if (is == 0) {
                      D v = convert_to<D>(s[0]);
                      for (int64_t j = 0; j < run; ++j) dst[j] = v;
                    } else if (is == 1) {
                      for (int64_t j = 0; j < run; ++j) dst[j] = convert_to<D>(s[j]);
                    } else {
                      for (int64_t j = 0; j < run; ++j) dst[j] = convert_to<D>(s[j * is]);
                    }
                    dst += run;
                  });
}
// An operand broadcast from one element (every stride 0: a learning rate, a 0-dim tensor):
// one read and a fill, without walking the loop space.
template <typename S, typename D>
void load_splat(const LoadArgs& a, int64_t, int64_t n, void* dst_v) {
  const D v = static_cast<D>(*reinterpret_cast<const S*>(a.base));
  D* dst = static_cast<D*>(dst_v);
  for (int64_t j = 0; j < n; ++j) dst[j] = v;
}
inline LoadFn splat_for(DType from, DType to) {
  return visit_dtype(from, [&](auto s) {
    return visit_dtype(to, [&](auto d) -> LoadFn {
      return &load_splat<decltype(s), decltype(d)>;
    });
  });
}
inline LoadFn load_for(DType from, DType to) {
  return visit_dtype(from, [&](auto s) {
    return visit_dtype(to, [&](auto d) -> LoadFn {
      return &load_strided<decltype(s), decltype(d)>;
    });
  });
}

template <typename T> void fill_typed(void* p, double v, int64_t n) {
  T* o = static_cast<T*>(p);
  T x = convert_to<T>(v);
  for (int64_t i = 0; i < n; ++i) o[i] = x;
}
inline void fill(void* p, DType t, double v, int64_t n) {
  visit_dtype(t, [&](auto z) { fill_typed<decltype(z)>(p, v, n); });
}

// Accumulators of the fused reductions: float sums and products in double, integers in
// int64 (as reduce.cc), several independent lanes per tile so the loop vectorizes.
template <typename T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
template <typename T, typename A, typename F, typename M>
A lanes(const T* x, int64_t n, A init, F add, M merge) {
  constexpr int kL = 8;
  A acc[kL];
  for (int k = 0; k < kL; ++k) acc[k] = init;
  int64_t j = 0;
  for (; j + kL <= n; j += kL)
    for (int k = 0; k < kL; ++k) acc[k] = add(acc[k], x[j + k]);
  for (; j < n; ++j) acc[0] = add(acc[0], x[j]);
  A a = acc[0];
  for (int k = 1; k < kL; ++k) a = merge(a, acc[k]);
  return a;
}
template <typename T> struct SumAcc {
  using A = Wide<T>;
  static A init() { return 0; }
  static A merge(A a, A b) { return a + b; }
  static A run(const T* x, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      // A tile (at most a few thousand elements) sums in float over 8 independent lanes;
      // tiles merge in double. Same accuracy class as the all-double sum for tile-sized
      // runs, at half the work (no widening of every element).
      return static_cast<A>(lanes<float, float>(
          x, n, 0.0f, [](float a, float v) { return a + v; }, [](float a, float b) { return a + b; }));
    } else {
      return lanes<T, A>(x, n, A(0), [](A a, T v) { return a + static_cast<A>(v); }, merge);
    }
  }
};
template <typename T> struct ProdAcc {
  using A = Wide<T>;
  static A init() { return 1; }
  static A merge(A a, A b) { return a * b; }
  static A run(const T* x, int64_t n) {
    return lanes<T, A>(x, n, A(1), [](A a, T v) { return a * static_cast<A>(v); }, merge);
  }
};
template <typename T> struct MaxAcc {
  using A = T;
  static A init() { return lowest_value<T>(); }
  static A merge(A a, A b) { return sloth::ew::max_<T>(a, b); }
  static A run(const T* x, int64_t n) {
    if constexpr (kHasVectorMinMax<T>) return minmax_contig<T, true>(x, n, init());
    else return lanes<T, A>(x, n, init(), [](A a, T v) { return sloth::ew::max_<T>(v, a); }, merge);
  }
};
template <typename T> struct MinAcc {
  using A = T;
  static A init() { return highest_value<T>(); }
  static A merge(A a, A b) { return sloth::ew::min_<T>(a, b); }
  static A run(const T* x, int64_t n) {
    if constexpr (kHasVectorMinMax<T>) return minmax_contig<T, false>(x, n, init());
    else return lanes<T, A>(x, n, init(), [](A a, T v) { return sloth::ew::min_<T>(v, a); }, merge);
  }
};

}  // namespace sloth::cpu::tile
