#include "backends/cuda/codegen_sequence.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace sloth::cuda {
namespace {

// codegen.cc's conventions: a struct of 64-bit words, one entry point named by content.
// `head` (typedefs, helpers) comes before the entry point, `body` is its braced body.
KernelSource finish(const std::string& kind, const std::string& head, const std::string& body,
                    int words) {
  const std::string src =
      head + absl::StrFormat("struct P { i64 w[%d]; };\n", words) +
      "extern \"C\" __global__ void __launch_bounds__(256) $NAME(const __grid_constant__ P p)" +
      body;
  const std::string name = absl::StrFormat("sloth_%s_%016x", kind, fnv1a(src));
  return {name, preamble() + absl::StrReplaceAll(src, {{"$NAME", name}}), words};
}

}  // namespace

KernelSource cumsum_source(DType in, DType out) {
  const std::string head =
      absl::StrFormat("typedef %s X;\ntypedef %s O;\ntypedef %s A;\n", cuda_type(in),
                      cuda_type(out), is_floating(out) ? "double" : "long long");
  return finish("cumsum", head, R"( {
  const X* x = (const X*)p.w[0];
  O* y = (O*)p.w[1];
  const i64 rows = p.w[2], n = p.w[3], inner = p.w[4];
  SL_GRID_LOOP(r, rows) {
    const i64 base = (r / inner) * n * inner + r % inner;
    A acc = 0;
    for (i64 j = 0; j < n; ++j) {
      acc += (A)x[base + j * inner];
      y[base + j * inner] = (O)acc;
    }
  }
}
)", 5);
}

KernelSource sort_rows_source(DType in) {
  const std::string head = absl::StrFormat("typedef %s T;\n", cuda_type(in)) + R"(
__device__ __forceinline__ bool sl_before(T a, T b, int desc) {
  const bool an = a != a, bn = b != b;
  return desc ? ((an && !bn) || a > b) : ((!an && bn) || a < b);
}
)";
  return finish("sortrows", head, R"( {
  const T* x = (const T*)p.w[0];
  i64* out = (i64*)p.w[1];
  const i64 rows = p.w[2], n = p.w[3], inner = p.w[4], k = p.w[6];
  const int desc = (int)p.w[5];
  i64* scratch = (i64*)p.w[7];
  SL_GRID_LOOP(r, rows) {
    const i64 base = (r / inner) * n * inner + r % inner;
    i64* idx = scratch + r * n;
    for (i64 j = 0; j < n; ++j) {
      const T v = x[base + j * inner];
      i64 m = j;
      while (m > 0 && sl_before(v, x[base + idx[m - 1] * inner], desc)) {
        idx[m] = idx[m - 1];
        --m;
      }
      idx[m] = j;
    }
    const i64 ob = (r / inner) * k * inner + r % inner;
    for (i64 j = 0; j < k; ++j) out[ob + j * inner] = idx[j];
  }
}
)", 8);
}

}  // namespace sloth::cuda
