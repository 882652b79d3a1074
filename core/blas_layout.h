// How a BLAS-style GEMM (row-major, with a transpose flag and a leading dimension) can read a
// strided rows x cols matrix in place. Shared by every backend that calls a GEMM library, so a
// layout either is read in place everywhere or copied everywhere.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sloth {

struct BlasLayout {
  bool trans = false;  // read as the transpose of a row-major matrix
  int64_t ld = 0;      // leading dimension, in elements
  bool ok = false;     // false: no (trans, ld) describes the layout; copy it first
};

// `sr`, `sc`: element strides of rows and columns.
inline BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  BlasLayout m;
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

}  // namespace sloth
