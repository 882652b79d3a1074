// Strided-memory helpers shared by the kernels: dim coalescing, N-D walks and the one
// converting strided copy that clone, concatenation, scatters and index ops build on.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/dims.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "lazy/device_data.h"

namespace sloth::cpu {

// Merges adjacent dims that every stride vector walks contiguously, and drops size-1 dims,
// so that a contiguous tensor becomes 1-D and inner loops are as long as possible. Always
// leaves at least one dim. `strides` are rewritten in place.
void coalesce(Shape& shape, absl::Span<Strides* const> strides);
void coalesce(Dims& shape, absl::Span<Dims* const> strides);  // no heap use up to 4 dims

// dst[i] = src[i] (or dst[i] += src[i]) over `shape`, converting src's dtype to dst's.
// Pointers address element 0 of each view; strides are in elements; stride 0 is allowed on
// src (broadcast). Splits across threads when large.
void copy_strided(void* dst, DType dst_type, IntSpan dst_strides, const void* src,
                  DType src_type, IntSpan src_strides, IntSpan shape, bool accumulate = false);

// Walks the linear index range [start, start + n) of row-major `shape` (nd >= 1) and calls
// f(off, run) once per stretch along the innermost dim: off[k] is operand k's element offset
// at the stretch's start; operand k advances by strides[k][nd - 1] within it. Callers put
// their typed tight loop in f, so the walk costs one call per inner run, not per element.
template <size_t K, typename F>
void for_each_run(const int64_t* shape, int nd, const std::array<const int64_t*, K>& strides,
                  int64_t start, int64_t n, F&& f) {
  if (n <= 0) return;
  int64_t idx[64];
  std::array<int64_t, K> off{};
  int64_t rem = start;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (size_t k = 0; k < K; ++k) off[k] += idx[d] * strides[k][d];
  }
  const int last = nd - 1;
  const int64_t inner = shape[last];
  while (n > 0) {
    int64_t run = std::min(n, inner - idx[last]);
    f(off, run);
    n -= run;
    if (n == 0) break;
    for (size_t k = 0; k < K; ++k) off[k] += run * strides[k][last];
    idx[last] += run;
    if (idx[last] < inner) continue;
    for (size_t k = 0; k < K; ++k) off[k] -= inner * strides[k][last];
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= shape[d] * strides[k][d];
      idx[d] = 0;
    }
  }
}

using lazy::with_layout;

// Copies view `src` into the window `dst` (same shape; dst may be strided).
void copy_into(const lazy::DeviceData& dst, const lazy::DeviceData& src, bool accumulate = false);

// Element pointer of a view.
inline char* ptr(const lazy::DeviceData& d) { return static_cast<char*>(d.raw()); }

}  // namespace sloth::cpu
