// CUDA C generation. Elementwise kernels print the lazy form (lazy/ew_form.h) and compute with
// core/ew_semantics.h, whose text every kernel embeds: the same element functions as the CPU
// backend. Philox mirrors core/philox.h.
#include "backends/cuda/codegen.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/ew_semantics_text.h"
#include "lazy/ew_form.h"

namespace sloth::cuda {

const char* cuda_type(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int";
    case DType::kInt64: return "long long";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kUInt8: return "unsigned char";
  }
  return "double";
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

const std::string& preamble() {
  // The element semantics (NaN-propagating max_/min_ included, which reductions use too) come
  // first, then index math, atomics and Philox.
  static const std::string s = ew_semantics_source() + R"CUDA(
using namespace sloth::ew;
using sloth::OpId;
typedef long long i64;
typedef unsigned long long u64;
#define SL_M )CUDA" + std::to_string(kMaxDims) + R"CUDA(
__device__ __forceinline__ double w2d(i64 w) { return __longlong_as_double(w); }
// Offset of linear index i of a row-major shape through strides (runtime rank).
__device__ __forceinline__ i64 sl_off(i64 i, int nd, const i64* shape, const i64* st) {
  i64 o = 0;
  for (int d = nd - 1; d >= 0; --d) {
    i64 s = shape[d];
    i64 c = i % s;
    i /= s;
    o += c * st[d];
  }
  return o;
}
__device__ __forceinline__ float sl_shfl(float v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double sl_shfl(double v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int sl_shfl(int v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ long long sl_shfl(long long v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ bool sl_shfl(bool v, int o) { return __shfl_down_sync(0xffffffffu, (int)v, o) != 0; }
__device__ __forceinline__ void sl_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void sl_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void sl_atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void sl_atomic_add(long long* p, long long v) { atomicAdd((u64*)p, (u64)v); }
__device__ __forceinline__ void sl_atomic_add(bool* p, bool v) { if (v) *p = true; }  // bool add = or
// uint8 add (wraps mod 256): a compare-and-swap on the aligned 32-bit word holding the byte.
__device__ __forceinline__ void sl_atomic_add(unsigned char* p, unsigned char v) {
  unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ull);
  const unsigned int sh = (unsigned int)((unsigned long long)p & 3ull) * 8u;
  unsigned int old = *w, assumed;
  do {
    assumed = old;
    const unsigned int b = ((assumed >> sh) + v) & 0xffu;
    old = atomicCAS(w, assumed, (assumed & ~(0xffu << sh)) | (b << sh));
  } while (assumed != old);
}
// Philox4x32-10, as core/philox.h.
struct PhOut { unsigned int x[4]; };
__device__ PhOut ph_philox(u64 counter, u64 key) {
  unsigned int c0 = (unsigned int)counter, c1 = (unsigned int)(counter >> 32), c2 = 0, c3 = 0;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  for (int r = 0; r < 10; ++r) {
    u64 p0 = (u64)0xD2511F53u * c0;
    u64 p1 = (u64)0xCD9E8D57u * c2;
    unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0;
    unsigned int n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned int)p1;
    c3 = (unsigned int)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  PhOut o;
  o.x[0] = c0; o.x[1] = c1; o.x[2] = c2; o.x[3] = c3;
  return o;
}
__device__ double ph_uniform(u64 seed, u64 index, bool f64) {
  PhOut o = ph_philox(index, seed);
  if (!f64) return (double)(o.x[0] >> 8) * (1.0 / 16777216.0);
  u64 bits = (((u64)o.x[0]) << 32 | o.x[1]) >> 11;
  return (double)bits * (1.0 / 9007199254740992.0);
}
__device__ double ph_normal(u64 seed, u64 index) {
  PhOut o = ph_philox(index, seed);
  double u1 = ((double)o.x[0] + 1.0) * (1.0 / 4294967296.0);
  double u2 = (double)o.x[1] * (1.0 / 4294967296.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
__device__ i64 ph_integer(u64 seed, u64 index, i64 low, i64 high) {
  PhOut o = ph_philox(index, seed);
  u64 bits = ((u64)o.x[0]) << 32 | o.x[1];
  return low + (i64)(bits % (u64)(high - low));
}
#define SL_GRID_LOOP(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
)CUDA";
  return s;
}

namespace {

std::string params_struct(int words) {
  return absl::StrFormat("struct P { i64 w[%d]; };\n", std::max(words, 1));
}

std::string entry(const std::string& name) {
  return absl::StrFormat("extern \"C\" __global__ void __launch_bounds__(256) %s(const __grid_constant__ P p)", name);
}

// The source with a name derived from its content, so equal kernels share a module.
KernelSource finish(const std::string& kind, const std::string& body_with_name_placeholder,
                    int words) {
  uint64_t h = fnv1a(body_with_name_placeholder);
  std::string name = absl::StrFormat("sloth_%s_%016x", kind, h);
  std::string src = absl::StrReplaceAll(body_with_name_placeholder, {{"$NAME", name}});
  return {name, preamble() + src, std::max(words, 1)};
}

}  // namespace

ElementwiseKernel generate_elementwise(const lazy::Plan& plan, const std::vector<int32_t>& instrs,
                                       const std::vector<int32_t>& materialize) {
  using Kind = lazy::EwForm::StepKind;
  ElementwiseKernel k;
  if (instrs.empty()) {
    k.error = "cuda backend: empty elementwise kernel";
    return k;
  }
  const lazy::EwForm f = lazy::build_ew_form(plan, instrs, materialize);
  k.shape = f.shape;
  if (!f.error.empty()) {
    k.error = "cuda backend: " + f.error;
    return k;
  }
  const int nd = static_cast<int>(k.shape.size());
  for (const lazy::EwForm::Operand& o : f.operands) k.exts.push_back({o.slot, o.dtype});
  for (const lazy::EwForm::Output& o : f.outputs) k.outs.push_back({o.slot, f.values[o.value]});
  // Word layout: [0] n, [1] lin, then exts (ptr + nd strides each), outs, consts. Scalars are
  // read once before the loop; their words are known only after the walk ($C placeholders).
  std::string pre, body;
  for (const lazy::EwForm::Step& st : f.steps) {
    const char* t = cuda_type(f.values[st.out]);
    switch (st.kind) {
      case Kind::kScalar:
        pre += absl::StrFormat("  const %s v%d = cvt<%s>(w2d(p.w[$C%d]));\n", t, st.out, t,
                               k.consts.size());
        k.consts.push_back({st.slot});
        break;
      case Kind::kLoad:
        body += absl::StrFormat("    %s v%d = cvt<%s>(in%d[o%d]);\n", t, st.out, t, st.operand,
                                st.operand);
        break;
      case Kind::kConvert:
        body += absl::StrFormat("    %s v%d = cvt<%s>(v%d);\n", t, st.out, t, st.in[0]);
        break;
      case Kind::kOp: {
        std::string args[3];
        for (int i = 0; i < 3; ++i)
          if (st.in[i] >= 0) args[i] = absl::StrCat("v", st.in[i]);
        const std::string e = lazy::ew_call(st, args, &cuda_type);
        if (e.empty()) {
          k.error = absl::StrFormat("cuda backend: no CUDA expression for %s", op_name(st.op));
          return k;
        }
        body += absl::StrFormat("    %s v%d = (%s)(%s);\n", t, st.out, t, e);
        for (size_t o = 0; o < f.outputs.size(); ++o)
          if (f.outputs[o].value == st.out) body += absl::StrFormat("    out%d[i] = v%d;\n", o, st.out);
        break;
      }
    }
  }
  // Assign words.
  int w = 2;
  std::string head;
  std::vector<int> ext_stride_word(k.exts.size());
  for (size_t e = 0; e < k.exts.size(); ++e) {
    head += absl::StrFormat("  const %s* __restrict__ in%d = (const %s*)p.w[%d];\n",
                            cuda_type(k.exts[e].slot_dtype), e, cuda_type(k.exts[e].slot_dtype), w);
    ext_stride_word[e] = w + 1;
    w += 1 + nd;
  }
  for (size_t o = 0; o < k.outs.size(); ++o) {
    head += absl::StrFormat("  %s* __restrict__ out%d = (%s*)p.w[%d];\n", cuda_type(k.outs[o].dtype),
                            o, cuda_type(k.outs[o].dtype), w);
    ++w;
  }
  for (size_t c = 0; c < k.consts.size(); ++c)
    pre = absl::StrReplaceAll(pre, {{absl::StrFormat("$C%d]", c), absl::StrFormat("%d]", w + c)}});
  w += static_cast<int>(k.consts.size());

  std::string idx;
  if (!k.exts.empty()) {
    idx += "    i64";
    for (size_t e = 0; e < k.exts.size(); ++e) idx += absl::StrFormat("%s o%d", e ? "," : "", e);
    idx += ";\n    if (lin) {\n";
    for (size_t e = 0; e < k.exts.size(); ++e) idx += absl::StrFormat("      o%d = i;\n", e);
    idx += "    } else {\n      i64 r = i;\n";
    for (size_t e = 0; e < k.exts.size(); ++e) idx += absl::StrFormat("      o%d = 0;\n", e);
    for (int d = nd - 1; d >= 0; --d) {
      // The loop shape is fixed by the plan: divisions by constants.
      idx += absl::StrFormat("      { i64 c = r %% %dLL; r /= %dLL;", k.shape[d], k.shape[d]);
      for (size_t e = 0; e < k.exts.size(); ++e)
        idx += absl::StrFormat(" o%d += c * p.w[%d];", e, ext_stride_word[e] + d);
      idx += " }\n";
    }
    idx += "    }\n";
  }
  std::string src = params_struct(w) + entry("$NAME") + " {\n  const i64 n = p.w[0];\n" +
                    "  const bool lin = p.w[1] != 0;\n  (void)lin;\n" + head + pre +
                    "  SL_GRID_LOOP(i, n) {\n" + idx + body + "  }\n}\n";
  k.src = finish("ew", src, w);
  return k;
}

KernelSource copy_source(DType dst, DType src, bool accumulate) {
  std::string s = params_struct(4 + 3 * kMaxDims) + entry("$NAME") + R"( {
  D* d = (D*)p.w[0];
  const S* s = (const S*)p.w[1];
  const i64 n = p.w[2];
  const int nd = (int)p.w[3];
  const i64* shape = &p.w[4];
  const i64* ds = &p.w[4 + SL_M];
  const i64* ss = &p.w[4 + 2 * SL_M];
  const bool lin = nd == 1 && ds[0] == 1 && ss[0] == 1;
  SL_GRID_LOOP(i, n) {
    i64 a = lin ? i : sl_off(i, nd, shape, ds), b = lin ? i : sl_off(i, nd, shape, ss);
    $ACC;
  }
}
)";
  s = absl::StrReplaceAll(s, {{"$ACC", accumulate ? "d[a] = (D)(d[a] + cvt<D>(s[b]))" : "d[a] = cvt<D>(s[b])"}});
  return finish("copy", absl::StrFormat("typedef %s D;\ntypedef %s S;\n", cuda_type(dst), cuda_type(src)) + s,
                4 + 3 * kMaxDims);
}

namespace {

struct ReduceTypes {
  std::string acc, init, add, merge;
};

ReduceTypes reduce_types(OpId op, DType in) {
  const std::string T = cuda_type(in);
  const std::string wide = is_floating(in) ? "double" : "long long";
  auto lowest = [&]() -> std::string {
    switch (in) {
      case DType::kBool: return "false";
      case DType::kInt32: return "(-2147483647 - 1)";
      case DType::kInt64: return "(-9223372036854775807LL - 1)";
      case DType::kUInt8: return "((unsigned char)0)";
      // -inf, not the lowest finite value: amax of an all -inf row is -inf.
      case DType::kFloat32: return "(-__int_as_float(0x7f800000))";
      default: return "(-__longlong_as_double(0x7ff0000000000000LL))";
    }
  };
  auto highest = [&]() -> std::string {
    switch (in) {
      case DType::kBool: return "true";
      case DType::kInt32: return "2147483647";
      case DType::kInt64: return "9223372036854775807LL";
      case DType::kUInt8: return "((unsigned char)255)";
      case DType::kFloat32: return "__int_as_float(0x7f800000)";
      default: return "__longlong_as_double(0x7ff0000000000000LL)";
    }
  };
  const std::string mx = "max_<" + T + ">";  // core/ew_semantics.h: NaN-propagating
  const std::string mn = "min_<" + T + ">";
  switch (op) {
    case OpId::kSum: return {wide, "0", "a + (A)x", "a + b"};
    case OpId::kProd: return {wide, "1", "a * (A)x", "a * b"};
    case OpId::kAmax: return {T, lowest(), mx + "(x, a)", mx + "(a, b)"};
    default: return {T, highest(), mn + "(x, a)", mn + "(a, b)"};
  }
}

std::string reduce_header(OpId op, DType in, DType out) {
  ReduceTypes r = reduce_types(op, in);
  return absl::StrFormat(
      "typedef %s T;\ntypedef %s O;\ntypedef %s A;\n"
      "__device__ __forceinline__ A r_init() { return (A)%s; }\n"
      "__device__ __forceinline__ A r_add(A a, T x) { return %s; }\n"
      "__device__ __forceinline__ A r_merge(A a, A b) { return %s; }\n",
      cuda_type(in), cuda_type(out), r.acc, r.init, r.add, r.merge);
}

}  // namespace

KernelSource reduce_source(OpId op, DType in, DType out) {
  std::string s = reduce_header(op, in, out) + params_struct(8 + 4 * kMaxDims) + R"(
__device__ __forceinline__ A block_reduce(A a) {
  __shared__ A sh[32];
  for (int o = 16; o > 0; o >>= 1) a = r_merge(a, sl_shfl(a, o));
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0) sh[wid] = a;
  __syncthreads();
  if (wid == 0) {
    const int nw = (blockDim.x + 31) >> 5;
    a = lane < nw ? sh[lane] : r_init();
    for (int o = 16; o > 0; o >>= 1) a = r_merge(a, sl_shfl(a, o));
  }
  __syncthreads();
  return a;
}
)" + entry("$NAME") + R"( {
  const T* __restrict__ in = (const T*)p.w[0];
  O* out = (O*)p.w[1];
  A* tmp = (A*)p.w[2];
  const i64 kn = p.w[3], rn = p.w[4], splits = p.w[5];
  const int nk = (int)p.w[6], nr = (int)p.w[7];
  const i64* kshape = &p.w[8];
  const i64* kin = &p.w[8 + SL_M];
  const i64* rshape = &p.w[8 + 2 * SL_M];
  const i64* rin = &p.w[8 + 3 * SL_M];
  const i64 chunk = (rn + splits - 1) / splits;
  for (i64 b = blockIdx.x; b < kn * splits; b += gridDim.x) {
    const i64 o = b / splits, part = b % splits;
    const i64 base = sl_off(o, nk, kshape, kin);
    const i64 r0 = part * chunk, r1 = min(rn, r0 + chunk);
    A a = r_init();
    if (nr <= 1) {
      const i64 s = nr == 1 ? rin[0] : 0;
      for (i64 r = r0 + threadIdx.x; r < r1; r += blockDim.x) { T x = in[base + r * s]; a = r_add(a, x); }
    } else {
      for (i64 r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
        T x = in[base + sl_off(r, nr, rshape, rin)];
        a = r_add(a, x);
      }
    }
    a = block_reduce(a);
    if (threadIdx.x == 0) {
      if (splits == 1) out[o] = (O)a;
      else tmp[b] = a;
    }
  }
}
)";
  return finish("reduce", s, 8 + 4 * kMaxDims);
}

KernelSource reduce_merge_source(OpId op, DType in, DType out) {
  std::string s = reduce_header(op, in, out) + params_struct(4) + entry("$NAME") + R"( {
  const A* tmp = (const A*)p.w[0];
  O* out = (O*)p.w[1];
  const i64 kn = p.w[2], splits = p.w[3];
  SL_GRID_LOOP(o, kn) {
    A a = r_init();
    for (i64 s = 0; s < splits; ++s) a = r_merge(a, tmp[o * splits + s]);
    out[o] = (O)a;
  }
}
)";
  return finish("rmerge", s, 4);
}

KernelSource arg_reduce_source(OpId op, DType in) {
  const bool mx = op == OpId::kArgmax;
  std::string s = absl::StrFormat("typedef %s T;\n", cuda_type(in)) + params_struct(6 + 2 * kMaxDims) +
                  absl::StrFormat(R"(
// (v1, i1) beats (v2, i2): the first NaN wins, then the %s value, then the lower index.
__device__ __forceinline__ bool better(T v1, i64 i1, T v2, i64 i2) {
  const bool n1 = v1 != v1, n2 = v2 != v2;
  if (n1 || n2) return (n1 && n2) ? i1 < i2 : n1;
  if (v1 %s v2) return true;
  if (v1 == v2) return i1 < i2;
  return false;
}
)", mx ? "largest" : "smallest", mx ? ">" : "<") +
                  entry("$NAME") + R"( {
  const T* __restrict__ in = (const T*)p.w[0];
  i64* out = (i64*)p.w[1];
  const i64 kn = p.w[2], rn = p.w[3], rs = p.w[4];
  const int nk = (int)p.w[5];
  const i64* kshape = &p.w[6];
  const i64* kin = &p.w[6 + SL_M];
  __shared__ T sv[32];
  __shared__ i64 si[32];
  for (i64 o = blockIdx.x; o < kn; o += gridDim.x) {
    const i64 base = sl_off(o, nk, kshape, kin);
    T bv = in[base];
    i64 bi = -1;
    for (i64 r = threadIdx.x; r < rn; r += blockDim.x) {
      T v = in[base + r * rs];
      if (bi < 0 || better(v, r, bv, bi)) { bv = v; bi = r; }
    }
    for (int off = 16; off > 0; off >>= 1) {
      T ov = sl_shfl(bv, off);
      i64 oi = sl_shfl((long long)bi, off);
      if (oi >= 0 && (bi < 0 || better(ov, oi, bv, bi))) { bv = ov; bi = oi; }
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) { sv[wid] = bv; si[wid] = bi; }
    __syncthreads();
    if (wid == 0) {
      const int nw = (blockDim.x + 31) >> 5;
      bv = lane < nw ? sv[lane] : bv;
      bi = lane < nw ? si[lane] : -1;
      for (int off = 16; off > 0; off >>= 1) {
        T ov = sl_shfl(bv, off);
        i64 oi = sl_shfl((long long)bi, off);
        if (oi >= 0 && (bi < 0 || better(ov, oi, bv, bi))) { bv = ov; bi = oi; }
      }
      if (lane == 0) out[o] = bi < 0 ? 0 : bi;
    }
    __syncthreads();
  }
}
)";
  return finish("arg", s, 6 + 2 * kMaxDims);
}

KernelSource factory_source(OpId op, DType t) {
  std::string e;
  switch (op) {
    case OpId::kFull: e = "(T)a"; break;
    case OpId::kArange: e = "(T)(a + i * b)"; break;
    case OpId::kLinspace:
      e = "(T)(n == 1 ? a : (i < n / 2 ? a + i * ((b - a) / (double)(n - 1)) : b - (n - 1 - i) * ((b - a) / (double)(n - 1))))";
      break;
    case OpId::kEye: e = "(T)((i / i1) == (i % i1) ? 1 : 0)"; break;
    case OpId::kRand:
      e = absl::StrFormat("(T)ph_uniform((u64)(i64)a, (u64)(i64)b + (u64)i, %s)",
                          t == DType::kFloat64 ? "true" : "false");
      break;
    case OpId::kRandn: e = "(T)ph_normal((u64)(i64)a, (u64)(i64)b + (u64)i)"; break;
    case OpId::kRandint: e = "(T)ph_integer((u64)(i64)a, (u64)(i64)b + (u64)i, i0, i1)"; break;
    default: return {};
  }
  std::string s = absl::StrFormat("typedef %s T;\n", cuda_type(t)) + params_struct(6) +
                  entry("$NAME") + R"( {
  T* out = (T*)p.w[0];
  const i64 n = p.w[1];
  const double a = w2d(p.w[2]), b = w2d(p.w[3]);
  const i64 i0 = p.w[4], i1 = p.w[5];
  (void)a; (void)b; (void)i0; (void)i1;
  SL_GRID_LOOP(i, n) { out[i] = $EXPR; }
}
)";
  s = absl::StrReplaceAll(s, {{"$EXPR", e}});
  return finish(absl::StrCat("fac", static_cast<int>(op)), s, 6);
}

KernelSource check_index_source(DType idx) {
  std::string s = absl::StrFormat("typedef %s I;\n", cuda_type(idx)) +
                  params_struct(6 + 2 * kMaxDims) + entry("$NAME") + R"( {
  const I* idx = (const I*)p.w[0];
  const i64 n = p.w[1];
  const int nd = (int)p.w[2];
  const i64* shape = &p.w[3];
  const i64* st = &p.w[3 + SL_M];
  const i64 size = p.w[3 + 2 * SL_M];
  const bool neg = p.w[4 + 2 * SL_M] != 0;
  i64* err = (i64*)p.w[5 + 2 * SL_M];
  SL_GRID_LOOP(i, n) {
    const i64 v = (i64)idx[sl_off(i, nd, shape, st)];
    const bool bad = neg ? (v < -size || v >= size) : (v < 0 || v >= size);
    if (bad) err[0] = 1;
  }
}
)";
  return finish("chkidx", s, 6 + 2 * kMaxDims);
}

KernelSource index_source(int mode, DType t, DType idx) {
  std::string op;
  switch (mode) {
    case 0: op = "o[ooff] = tg[toff + v * dstride];"; break;
    case 1: op = "sl_atomic_add(&tg[toff + v * dstride], o[ooff]);"; break;
    default: op = "if (winner[v] == cd) tg[toff + v * dstride] = o[ooff];"; break;
  }
  std::string s = absl::StrFormat("typedef %s T;\ntypedef %s I;\n", cuda_type(t), cuda_type(idx)) +
                  params_struct(9 + 4 * kMaxDims) + entry("$NAME") + R"( {
  T* tg = (T*)p.w[0];
  T* o = (T*)p.w[1];
  const I* idx = (const I*)p.w[2];
  const i64* winner = (const i64*)p.w[3];
  const i64 n = p.w[4];
  const int nd = (int)p.w[5];
  const int dim = (int)p.w[6];
  const i64 dstride = p.w[7], size = p.w[8];
  const i64* shape = &p.w[9];
  const i64* ts = &p.w[9 + SL_M];
  const i64* os = &p.w[9 + 2 * SL_M];
  const i64* is = &p.w[9 + 3 * SL_M];
  (void)winner; (void)size;
  SL_GRID_LOOP(i, n) {
    i64 r = i, toff = 0, ooff = 0, ioff = 0, cd = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const i64 c = r % shape[d];
      r /= shape[d];
      toff += c * ts[d];
      ooff += c * os[d];
      ioff += c * is[d];
      if (d == dim) cd = c;
    }
    (void)cd;
    i64 v = (i64)idx[ioff];
    if (v < 0) v += size;
    $OP
  }
}
)";
  s = absl::StrReplaceAll(s, {{"$OP", op}});
  return finish(absl::StrCat("index", mode), s, 9 + 4 * kMaxDims);
}

KernelSource winner_source(DType idx) {
  std::string s = absl::StrFormat("typedef %s I;\n", cuda_type(idx)) + params_struct(5) +
                  entry("$NAME") + R"( {
  const I* idx = (const I*)p.w[0];
  const i64 n = p.w[1], is = p.w[2], size = p.w[3];
  long long* winner = (long long*)p.w[4];
  SL_GRID_LOOP(i, n) {
    i64 v = (i64)idx[i * is];
    if (v < 0) v += size;
    atomicMax(&winner[v], (long long)i);
  }
}
)";
  return finish("winner", s, 5);
}

KernelSource one_hot_source(DType idx) {
  std::string s = absl::StrFormat("typedef %s I;\n", cuda_type(idx)) +
                  params_struct(5 + 2 * kMaxDims) + entry("$NAME") + R"( {
  const I* idx = (const I*)p.w[0];
  i64* out = (i64*)p.w[1];
  const i64 n = p.w[2];
  const int nd = (int)p.w[3];
  const i64 classes = p.w[4];
  const i64* shape = &p.w[5];
  const i64* st = &p.w[5 + SL_M];
  SL_GRID_LOOP(i, n) { out[i * classes + (i64)idx[sl_off(i, nd, shape, st)]] = 1; }
}
)";
  return finish("onehot", s, 5 + 2 * kMaxDims);
}

}  // namespace sloth::cuda
