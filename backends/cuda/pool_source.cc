#include "backends/cuda/pool_source.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace sloth::cuda {

KernelSource max_pool_indices_source(DType t) {
  const std::string name =
      absl::StrFormat("sloth_max_pool_indices_%s", t == DType::kFloat64 ? "f64" : "f32");
  const std::string body = absl::StrFormat("typedef %s T;\n", cuda_type(t)) + R"(
struct P { i64 w[15]; };
extern "C" __global__ void __launch_bounds__(256) $NAME(const __grid_constant__ P p) {
  i64* out = (i64*)p.w[0];
  const T* in = (const T*)p.w[1];
  const i64 planes = p.w[2], h = p.w[3], w = p.w[4], ho = p.w[5], wo = p.w[6];
  const i64 kh = p.w[7], kw = p.w[8], sh = p.w[9], sw = p.w[10], ph = p.w[11], pw = p.w[12];
  const i64 dh = p.w[13], dw = p.w[14];
  const i64 total = planes * ho * wo;
  SL_GRID_LOOP(i, total) {
    const i64 ow = i % wo, oh = (i / wo) % ho, pl = i / (wo * ho);
    const T* x = in + pl * h * w;
    i64 ih0 = oh * sh - ph, iw0 = ow * sw - pw;
    const i64 ih1 = min(ih0 + (kh - 1) * dh + 1, h), iw1 = min(iw0 + (kw - 1) * dw + 1, w);
    while (ih0 < 0) ih0 += dh;
    while (iw0 < 0) iw0 += dw;
    i64 best = ih0 * w + iw0;
    T m = (T)(-__int_as_float(0x7f800000));  // -inf (NVRTC has no INFINITY)
    for (i64 ih = ih0; ih < ih1; ih += dh)
      for (i64 iw = iw0; iw < iw1; iw += dw) {
        const T v = x[ih * w + iw];
        if (v > m || v != v) { m = v; best = ih * w + iw; }
      }
    out[i] = best;
  }
}
)";
  return {name, preamble() + absl::StrReplaceAll(body, {{"$NAME", name}}), kMaxPoolIndicesWords};
}

KernelSource max_pool_plane_source(DType t, bool scatter) {
  const std::string name = absl::StrFormat("sloth_max_pool_%s_%s", scatter ? "scatter" : "gather",
                                           t == DType::kFloat64 ? "f64" : "f32");
  const std::string head = absl::StrFormat("typedef %s T;\n", cuda_type(t)) + R"(
struct P { i64 w[6]; };
extern "C" __global__ void __launch_bounds__(256) $NAME(const __grid_constant__ P p) {
  T* out = (T*)p.w[0];
  const T* v = (const T*)p.w[1];
  const i64* idx = (const i64*)p.w[2];
  const i64 planes = p.w[3], hw = p.w[4], l = p.w[5];
)";
  const char* gather = R"(
  SL_GRID_LOOP(i, planes * l) {
    const i64 k = idx[i];
    out[i] = (k >= 0 && k < hw) ? v[(i / l) * hw + k] : (T)0;
  }
}
)";
  const char* scatter_body = R"(
  SL_GRID_LOOP(pl, planes) {
    T* o = out + pl * hw;
    for (i64 j = 0; j < hw; ++j) o[j] = (T)0;
    for (i64 j = 0; j < l; ++j) {
      const i64 k = idx[pl * l + j];
      if (k >= 0 && k < hw) o[k] += v[pl * l + j];
    }
  }
}
)";
  const std::string body = head + (scatter ? scatter_body : gather);
  return {name, preamble() + absl::StrReplaceAll(body, {{"$NAME", name}}), kMaxPoolPlaneWords};
}

}  // namespace sloth::cuda
