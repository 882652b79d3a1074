#include "backends/cuda/window_source.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace sloth::cuda {
namespace {

// The words every window kernel reads, and its index geometry.
constexpr const char* kHeader = R"(
struct P { i64 w[19]; };
extern "C" __global__ void __launch_bounds__(256) $NAME(const __grid_constant__ P p) {
  T* out = (T*)p.w[0];
  const T* in = (const T*)p.w[1];
  const i64 n = p.w[2], c = p.w[3], h = p.w[4], w = p.w[5], ho = p.w[6], wo = p.w[7];
  const i64 kh = p.w[8], kw = p.w[9], dh = p.w[10], dw = p.w[11], ph = p.w[12], pw = p.w[13];
  const i64 sh = p.w[14], sw = p.w[15];
  const bool batch_inner = p.w[16] != 0;
  const i64 extra_row = p.w[17];
  const double pad = w2d(p.w[18]);
  const i64 l = ho * wo, kk = kh * kw;
  (void)extra_row; (void)pad;
)";

KernelSource finish_window(const char* kind, DType t, const std::string& body) {
  std::string s = absl::StrFormat("typedef %s T;\n", cuda_type(t)) + kHeader + body + "}\n";
  const std::string name = absl::StrFormat("sloth_%s_%s", kind, t == DType::kFloat64 ? "f64" : "f32");
  return {name, preamble() + absl::StrReplaceAll(s, {{"$NAME", name}}), kWindowWords};
}

}  // namespace

KernelSource unfold_source(DType t) {
  return finish_window("unfold", t, R"(
  const i64 rows = c * kk + (extra_row != 0 ? 1 : 0);
  const i64 total = rows * n * l;
  SL_GRID_LOOP(i, total) {
    i64 row, b, col;
    if (batch_inner) { row = i / (n * l); b = (i / l) % n; col = i % l; }
    else { b = i / (rows * l); row = (i / l) % rows; col = i % l; }
    if (row >= c * kk) { out[i] = (T)(extra_row == 1 ? 1 : 0); continue; }
    const i64 ch = row / kk, ki = (row % kk) / kw, kj = row % kw;
    const i64 ih = (col / wo) * sh - ph + ki * dh, iw = (col % wo) * sw - pw + kj * dw;
    out[i] = (ih >= 0 && ih < h && iw >= 0 && iw < w) ? in[((b * c + ch) * h + ih) * w + iw]
                                                      : (T)pad;
  }
)");
}

KernelSource fold_source(DType t) {
  return finish_window("fold", t, R"(
  const i64 total = n * c * h * w;
  const i64 rows = c * kk + (extra_row != 0 ? 1 : 0);
  SL_GRID_LOOP(i, total) {
    const i64 x = i % w, y = (i / w) % h, ch = (i / (w * h)) % c, b = i / (w * h * c);
    T acc = 0;
    for (i64 ki = 0; ki < kh; ++ki) {
      const i64 oy = y + ph - ki * dh;
      if (oy < 0 || oy % sh != 0 || oy / sh >= ho) continue;
      for (i64 kj = 0; kj < kw; ++kj) {
        const i64 ox = x + pw - kj * dw;
        if (ox < 0 || ox % sw != 0 || ox / sw >= wo) continue;
        const i64 row = ch * kk + ki * kw + kj, col = (oy / sh) * wo + ox / sw;
        acc += in[batch_inner ? row * (n * l) + b * l + col : (b * rows + row) * l + col];
      }
    }
    out[i] = acc;
  }
)");
}

}  // namespace sloth::cuda
