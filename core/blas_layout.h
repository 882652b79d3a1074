// How a BLAS-style GEMM (row-major, with a transpose flag and a leading dimension) can read a
// strided rows x cols matrix in place. Shared by every backend that calls a GEMM library, so a
// layout either is read in place everywhere or copied everywhere.
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "core/shape.h"
#include "core/view_layout.h"

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

// torch.matmul's operands as a batch of GEMMs: a 1-D left operand is a row [1, k], a 1-D
// right one a column [k, 1] (the extra dim is absent from the result, the data layout is the
// same), and the batch dims broadcast.
struct MatmulGeometry {
  Layout a, b;   // the operands with 1-D promoted to 2-D
  int64_t m = 0, k = 0, n = 0;
  Shape batch;   // the broadcast batch dims
};
inline absl::StatusOr<MatmulGeometry> matmul_geometry(const Layout& a, const Layout& b) {
  MatmulGeometry g{a, b};
  if (g.a.shape.size() == 1) {
    g.a.shape.insert(g.a.shape.begin(), 1);
    g.a.strides.insert(g.a.strides.begin(), 0);
  }
  if (g.b.shape.size() == 1) {
    g.b.shape.push_back(1);
    g.b.strides.push_back(0);
  }
  const size_t ra = g.a.shape.size(), rb = g.b.shape.size();
  g.m = g.a.shape[ra - 2], g.k = g.a.shape[ra - 1], g.n = g.b.shape[rb - 1];
  Shape ba(g.a.shape.begin(), g.a.shape.end() - 2), bb(g.b.shape.begin(), g.b.shape.end() - 2);
  absl::StatusOr<Shape> batch = broadcast_shapes("matmul", ba, bb);
  if (!batch.ok()) return batch.status();
  g.batch = *std::move(batch);
  return g;
}

}  // namespace sloth
