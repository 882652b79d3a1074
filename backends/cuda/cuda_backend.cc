// The CUDA backend: one stream on device 0, a caching device allocator, pinned staging for
// host copies, NVRTC-compiled kernels (cached by source hash in memory and, with
// SLOTH_CUDA_CACHE_DIR, on disk), cuBLAS GEMM. A Plan compiles like on the CPU: each run of
// elementwise instructions becomes one generated grid-stride kernel (compiled when the plan
// is compiled, so a cached plan replays with one launch per step and no compilation); other
// instructions use generic generated kernels (copy, reduce, index, factories) compiled once
// per dtype combination. Views are zero-copy (apply_view).
#include "backends/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "backends/cuda/codegen.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nvrtc_compile.h"
#include "core/error.h"
#include "core/view_layout.h"
#include "lazy/backend.h"
#include "lazy/device_data.h"

namespace sloth::cuda {

using lazy::DeviceData;
using lazy::Instr;
using lazy::Plan;
using lazy::SlotKind;

namespace {

std::string cuda_error(const char* call, cudaError_t e) {
  return absl::StrFormat("CUDA error: %s failed: %s (%s)", call, cudaGetErrorString(e),
                         cudaGetErrorName(e));
}

#define SLOTH_CU(call)                                                   \
  do {                                                                   \
    cudaError_t _e = (call);                                             \
    if (_e != cudaSuccess) throw ::sloth::Error(cuda_error(#call, _e));  \
  } while (0)

#define SLOTH_CUBLAS(call)                                                                   \
  do {                                                                                       \
    cublasStatus_t _s = (call);                                                              \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                         \
      throw ::sloth::Error(absl::StrFormat("cuBLAS error: %s failed: %s", #call,            \
                                           cublasGetStatusString(_s)));                      \
  } while (0)

// ---- device probe ----------------------------------------------------------------------------

const std::string& probe() {
  static const std::string reason = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return cuda_error("cudaGetDeviceCount", e);
    }
    if (n <= 0) return std::string("no CUDA device found (cudaGetDeviceCount returned 0)");
    return std::string();
  }();
  return reason;
}

// ---- per-device context: stream, cuBLAS, properties --------------------------------------------

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  int sm_count = 1;
  std::string arch;  // "sm_90"

  static Context& get() {
    static Context* c = [] {
      auto* ctx = new Context;  // never destroyed: static destruction order vs. the driver
      SLOTH_CU(cudaSetDevice(0));
      SLOTH_CU(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
      cudaDeviceProp prop;
      SLOTH_CU(cudaGetDeviceProperties(&prop, 0));
      ctx->sm_count = std::max(prop.multiProcessorCount, 1);
      ctx->arch = absl::StrFormat("sm_%d%d", prop.major, prop.minor);
      if (const char* a = std::getenv("SLOTH_CUDA_ARCH")) ctx->arch = a;
      SLOTH_CUBLAS(cublasCreate(&ctx->blas));
      SLOTH_CUBLAS(cublasSetStream(ctx->blas, ctx->stream));
      return ctx;
    }();
    return *c;
  }
  void sync() { SLOTH_CU(cudaStreamSynchronize(stream)); }
};

// ---- caching allocator -----------------------------------------------------------------------

size_t bin_size(size_t bytes) {
  if (bytes <= 512) return 512;
  const size_t mb = 1u << 20;
  if (bytes <= mb) {
    size_t b = 512;
    while (b < bytes) b <<= 1;
    return b;
  }
  if (bytes <= 64 * mb) return (bytes + mb - 1) / mb * mb;
  return (bytes + 8 * mb - 1) / (8 * mb) * (8 * mb);
}

// Size-binned free lists. All work runs on one stream, so a block freed by the host can be
// handed out again at once: later kernels are ordered after the ones that used it.
class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t b = bin_size(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    stats_.live_bytes += b;
    auto& list = free_[b];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      stats_.cached_bytes -= b;
      return p;
    }
    Context::get();
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, b);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      empty_locked();
      e = cudaMalloc(&p, b);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      stats_.live_bytes -= b;
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail("CUDA out of memory: cudaMalloc of %d bytes failed (%s) after emptying the cache; "
           "%d bytes are in live tensors, the device has %d of %d bytes free. Free tensors or "
           "use smaller batches.",
           static_cast<int64_t>(b), cudaGetErrorString(e), stats_.live_bytes,
           static_cast<int64_t>(free_b), static_cast<int64_t>(total_b));
    }
    ++stats_.os_allocations;
    stats_.os_bytes += b;
    return p;
  }
  void deallocate(void* p, size_t bytes) override {
    const size_t b = bin_size(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.live_bytes -= b;
    stats_.cached_bytes += b;
    free_[b].push_back(p);
  }
  Device device() const override { return Device::cuda(0); }
  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    empty_locked();
  }

 private:
  void empty_locked() {
    cudaStreamSynchronize(Context::get().stream);
    for (auto& [b, list] : free_) {
      for (void* p : list) cudaFree(p);
      stats_.cached_bytes -= static_cast<int64_t>(b * list.size());
      list.clear();
    }
  }
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

CudaAllocator& allocator() {
  static CudaAllocator* a = new CudaAllocator;
  return *a;
}

// ---- pinned staging for host copies ----------------------------------------------------------

class Staging {
 public:
  static constexpr size_t kChunk = 16u << 20;
  void to_device(const void* src, void* dst, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    Context& c = Context::get();
    char* buf = buffer();
    for (size_t off = 0; off < bytes; off += kChunk) {
      size_t n = std::min(kChunk, bytes - off);
      std::memcpy(buf, static_cast<const char*>(src) + off, n);
      SLOTH_CU(cudaMemcpyAsync(static_cast<char*>(dst) + off, buf, n, cudaMemcpyHostToDevice,
                               c.stream));
      c.sync();
    }
  }
  void to_host(const void* src, void* dst, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    Context& c = Context::get();
    char* buf = buffer();
    for (size_t off = 0; off < bytes; off += kChunk) {
      size_t n = std::min(kChunk, bytes - off);
      SLOTH_CU(cudaMemcpyAsync(buf, static_cast<const char*>(src) + off, n,
                               cudaMemcpyDeviceToHost, c.stream));
      c.sync();
      std::memcpy(static_cast<char*>(dst) + off, buf, n);
    }
  }

 private:
  char* buffer() {
    if (!buf_) SLOTH_CU(cudaMallocHost(reinterpret_cast<void**>(&buf_), kChunk));
    return buf_;
  }
  std::mutex mu_;
  char* buf_ = nullptr;
};

Staging& staging() {
  static Staging* s = new Staging;
  return *s;
}

// ---- module cache: NVRTC once per source, by content hash ------------------------------------

class ModuleCache {
 public:
  cudaKernel_t get(const KernelSource& ks) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kernels_.find(ks.name);
    if (it != kernels_.end()) return it->second;
    Context& c = Context::get();
    std::string image;
    std::string path;
    if (const char* dir = std::getenv("SLOTH_CUDA_CACHE_DIR")) {
      path = absl::StrFormat("%s/%s.%s.%016x.cubin", dir, ks.name, c.arch, fnv1a(ks.source));
      std::ifstream f(path, std::ios::binary);
      if (f) {
        std::stringstream ss;
        ss << f.rdbuf();
        image = ss.str();
      }
    }
    if (image.empty()) {
      auto code = nvrtc_compile(ks.source, ks.name, c.arch);
      if (!code.ok()) throw Error(std::string(code.status().message()));
      image = std::move(code->image);
      if (!path.empty()) {
        std::ofstream f(path, std::ios::binary);
        f.write(image.data(), static_cast<std::streamsize>(image.size()));
      }
    }
    cudaLibrary_t lib;
    SLOTH_CU(cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t k;
    SLOTH_CU(cudaLibraryGetKernel(&k, lib, ks.name.c_str()));
    kernels_[ks.name] = k;
    return k;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, cudaKernel_t> kernels_;
};

ModuleCache& modules() {
  static ModuleCache* m = new ModuleCache;
  return *m;
}

// Kernel parameters: 64-bit words.
struct Words {
  std::vector<int64_t> w;
  void i(int64_t v) { w.push_back(v); }
  void p(const void* ptr) { w.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr))); }
  void d(double v) {
    int64_t x;
    std::memcpy(&x, &v, 8);
    w.push_back(x);
  }
  void arr(IntSpan v, size_t len = kMaxDims) {
    for (size_t k = 0; k < len; ++k) w.push_back(k < v.size() ? v[k] : 0);
  }
};

void launch(cudaKernel_t k, const KernelSource& ks, Words& words, int64_t work, int64_t blocks = -1) {
  if (static_cast<int>(words.w.size()) != ks.words)
    throw Error(absl::StrFormat("cuda backend: %s takes %d parameter words, %d were packed", ks.name,
                                ks.words, words.w.size()));
  Context& c = Context::get();
  if (blocks < 0) blocks = (work + 255) / 256;
  blocks = std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(c.sm_count) * 32);
  void* args[] = {words.w.data()};
  SLOTH_CU(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                            dim3(256), args, 0, c.stream));
}

void launch(const KernelSource& ks, Words& words, int64_t work, int64_t blocks = -1) {
  launch(modules().get(ks), ks, words, work, blocks);
}

// ---- strided helpers -------------------------------------------------------------------------

// Merges adjacent dims every stride vector walks contiguously and drops size-1 dims; leaves
// at least one dim.
void coalesce(Shape& shape, std::vector<Strides*> strides) {
  Shape s;
  std::vector<Strides> st(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !s.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = st[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      s.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) st[k].back() = (*strides[k])[d];
    } else {
      s.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) st[k].push_back((*strides[k])[d]);
    }
  }
  if (s.empty()) {
    s.push_back(1);
    for (auto& v : st) v.push_back(0);
  }
  shape = std::move(s);
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(st[k]);
}

void check_rank(const char* what, size_t nd) {
  if (nd > static_cast<size_t>(kMaxDims))
    throw Error(absl::StrFormat("cuda backend: %s over %d dims after coalescing (at most %d)", what,
                                nd, kMaxDims));
}

inline DeviceData with_layout(const DeviceData& d, Layout layout) {
  DeviceData v = d;
  v.layout = std::move(layout);
  return v;
}

double cast_scalar(double v, DType dtype) {
  return visit_dtype(dtype, [&](auto z) { return static_cast<double>(static_cast<decltype(z)>(v)); });
}

// ---- per-run state ---------------------------------------------------------------------------

struct Env {
  const Plan* plan = nullptr;
  absl::Span<const double> scalars;
  std::vector<DeviceData> vals;
  lazy::RunStats* stats = nullptr;

  bool has(int slot) const { return vals[slot].storage != nullptr; }
  DeviceData alloc(const Shape& shape, DType dtype) {
    DeviceData d = lazy::allocate_data(&allocator(), shape, dtype);
    stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
    return d;
  }
  const DeviceData& get(int slot);
  double scalar(int slot);
  void set(int slot, DeviceData d) { vals[slot] = std::move(d); }
};

void fill(const DeviceData& d, double v) {
  const int64_t n = d.numel();
  if (n == 0) return;
  KernelSource ks = factory_source(OpId::kFull, d.dtype);
  Words w;
  w.p(d.raw());
  w.i(n);
  w.d(v);
  w.d(0);
  w.i(0);
  w.i(0);
  launch(ks, w, n);
}

double read_double(const DeviceData& d) {
  double out = 0;
  visit_dtype(d.dtype, [&](auto z) {
    decltype(z) v{};
    staging().to_host(d.raw(), &v, sizeof(v));
    out = static_cast<double>(v);
  });
  return out;
}

const DeviceData& Env::get(int slot) {
  if (!has(slot) && plan->slots[slot].kind == SlotKind::kScalar) {
    const lazy::Slot& s = plan->slots[slot];
    DeviceData d = alloc({}, s.dtype);
    fill(d, cast_scalar(scalars[s.index], s.dtype));
    vals[slot] = std::move(d);
  }
  return vals[slot];
}

double Env::scalar(int slot) {
  const lazy::Slot& s = plan->slots[slot];
  if (s.kind == SlotKind::kScalar) return cast_scalar(scalars[s.index], s.dtype);
  return read_double(get(slot));
}

// dst (+)= src over dst's shape; src broadcasts; dtype converts.
void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate = false) {
  Shape shape = dst.layout.shape;
  const int64_t n = numel(shape);
  if (n == 0) return;
  Strides ds = dst.layout.strides;
  Strides ss = broadcast_strides(src.layout.shape, src.layout.strides, shape);
  coalesce(shape, {&ds, &ss});
  check_rank("copy", shape.size());
  KernelSource ks = copy_source(dst.dtype, src.dtype, accumulate);
  Words w;
  w.p(dst.raw());
  w.p(src.raw());
  w.i(n);
  w.i(static_cast<int64_t>(shape.size()));
  w.arr(shape);
  w.arr(ds);
  w.arr(ss);
  launch(ks, w, n);
}

DeviceData make_contiguous(Env& env, const DeviceData& x, DType dtype) {
  DeviceData out = env.alloc(x.layout.shape, dtype);
  copy_into(out, x);
  return out;
}

// ---- elementwise -----------------------------------------------------------------------------

struct EwStep {
  ElementwiseKernel k;
  cudaKernel_t fn = nullptr;
};

void run_elementwise(Env& env, const EwStep& st) {
  const ElementwiseKernel& k = st.k;
  if (!k.error.empty()) throw Error(k.error);
  const int64_t n = numel(k.shape);
  std::vector<DeviceData> outs;
  for (const auto& o : k.outs) outs.push_back(env.alloc(k.shape, o.dtype));
  if (n > 0) {
    Words w;
    w.i(n);
    w.i(0);  // lin, decided below
    const Strides lin_st = contiguous_strides(k.shape);
    bool lin = true;
    std::vector<DeviceData> keep;  // converted operands live until the launch is queued
    for (const auto& e : k.exts) {
      DeviceData d = env.get(e.slot);
      if (!d.storage)
        throw Error(absl::StrFormat("cuda backend: slot %d is read before it is computed", e.slot));
      if (d.dtype != e.slot_dtype) {
        d = make_contiguous(env, d, e.slot_dtype);
        keep.push_back(d);
      }
      Strides s = broadcast_strides(d.layout.shape, d.layout.strides, k.shape);
      for (size_t i = 0; i < s.size(); ++i)
        if (k.shape[i] != 1 && s[i] != lin_st[i]) lin = false;
      w.p(d.raw());
      for (int64_t x : s) w.i(x);
    }
    w.w[1] = lin ? 1 : 0;
    for (const auto& o : outs) w.p(o.raw());
    for (const auto& c : k.consts) w.d(env.scalar(c.slot));
    launch(st.fn, k.src, w, n);
  }
  for (size_t o = 0; o < k.outs.size(); ++o) env.set(k.outs[o].slot, std::move(outs[o]));
}

// ---- reductions ------------------------------------------------------------------------------

void run_reduce(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  DeviceData out = env.alloc(in.shape, in.dtype);
  const bool arg = in.op == OpId::kArgmax || in.op == OpId::kArgmin;
  std::vector<int64_t> dims;
  if (arg) {
    if (!x.layout.shape.empty()) dims.push_back(in.attrs.i0);
  } else {
    dims.assign(in.attrs.dims.begin(), in.attrs.dims.end());
  }
  Shape ks, rs;
  Strides kin, rin;
  const Shape& s = x.layout.shape;
  for (size_t d = 0; d < s.size(); ++d) {
    bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (red ? rs : ks).push_back(s[d]);
    (red ? rin : kin).push_back(x.layout.strides[d]);
  }
  const int64_t kn = numel(ks), rn = numel(rs);
  if (kn == 0) {
    env.set(in.out, std::move(out));
    return;
  }
  coalesce(ks, {&kin});
  check_rank("reduction", ks.size());
  Context& c = Context::get();
  if (arg) {
    if (rn == 0) throw Error(absl::StrFormat("%s: cannot reduce over an empty dim", op_name(in.op)));
    KernelSource src = arg_reduce_source(in.op, x.dtype);
    Words w;
    w.p(x.raw());
    w.p(out.raw());
    w.i(kn);
    w.i(rn);
    w.i(rin.empty() ? 0 : rin[0]);
    w.i(static_cast<int64_t>(ks.size()));
    w.arr(ks);
    w.arr(kin);
    launch(src, w, kn * 256, std::min<int64_t>(kn, 65535));
    env.set(in.out, std::move(out));
    return;
  }
  if (rn == 0 && (in.op == OpId::kAmax || in.op == OpId::kAmin))
    throw Error(absl::StrFormat("%s: cannot reduce over an empty dim (no identity)", op_name(in.op)));
  coalesce(rs, {&rin});
  check_rank("reduction", rs.size());
  // Few outputs over long rows: split each row over several blocks, then merge.
  int64_t splits = 1;
  if (kn < 2 * c.sm_count && rn >= 8192)
    splits = std::clamp<int64_t>(std::min<int64_t>(rn / 4096, (4 * c.sm_count + kn - 1) / kn), 1, 1024);
  DeviceData tmp;
  if (splits > 1) tmp = env.alloc({kn * splits}, DType::kInt64);  // 8 bytes per accumulator
  KernelSource src = reduce_source(in.op, x.dtype, in.dtype);
  Words w;
  w.p(x.raw());
  w.p(out.raw());
  w.p(splits > 1 ? tmp.raw() : nullptr);
  w.i(kn);
  w.i(rn);
  w.i(splits);
  w.i(static_cast<int64_t>(ks.size()));
  w.i(static_cast<int64_t>(rs.size()));
  w.arr(ks);
  w.arr(kin);
  w.arr(rs);
  w.arr(rin);
  launch(src, w, 0, std::min<int64_t>(kn * splits, static_cast<int64_t>(c.sm_count) * 32));
  if (splits > 1) {
    KernelSource m = reduce_merge_source(in.op, x.dtype, in.dtype);
    Words mw;
    mw.p(tmp.raw());
    mw.p(out.raw());
    mw.i(kn);
    mw.i(splits);
    launch(m, mw, kn);
  }
  env.set(in.out, std::move(out));
}

// ---- matmul ----------------------------------------------------------------------------------

struct MatArg {
  bool trans = false;
  int64_t ld = 0;
  bool ok = false;
};

MatArg classify(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  MatArg m;
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

void run_matmul(Env& env, const Instr& in) {
  DeviceData a = env.get(in.in[0]);
  DeviceData b = env.get(in.in[1]);
  if (a.dtype != b.dtype || a.dtype != in.dtype || a.layout.shape.empty() || b.layout.shape.empty())
    throw Error("cuda backend: matmul operands do not match the instruction");
  if (in.dtype == DType::kBool) throw Error("matmul: bool tensors are not supported");
  Layout la = a.layout, lb = b.layout;
  if (la.shape.size() == 1) {
    la.shape.insert(la.shape.begin(), 1);
    la.strides.insert(la.strides.begin(), 0);
  }
  if (lb.shape.size() == 1) {
    lb.shape.push_back(1);
    lb.strides.push_back(0);
  }
  const size_t ra = la.shape.size(), rb = lb.shape.size();
  const int64_t m = la.shape[ra - 2], k = la.shape[ra - 1], n = lb.shape[rb - 1];
  Shape ba(la.shape.begin(), la.shape.end() - 2), bb(lb.shape.begin(), lb.shape.end() - 2);
  auto batch_or = broadcast_shapes("matmul", ba, bb);
  if (!batch_or.ok()) throw Error(std::string(batch_or.status().message()));
  const Shape batch = *batch_or;
  const int64_t nb = numel(batch);
  DeviceData out = env.alloc(in.shape, in.dtype);
  const size_t es = dtype_size(in.dtype);
  Context& c = Context::get();
  if (nb == 0 || m == 0 || n == 0) {
    env.set(in.out, std::move(out));
    return;
  }
  if (k == 0) {
    SLOTH_CU(cudaMemsetAsync(out.raw(), 0, nb * m * n * es, c.stream));
    env.set(in.out, std::move(out));
    return;
  }
  const bool fl = is_floating(in.dtype);
  // Operands whose matrices cuBLAS cannot read as they are become contiguous first.
  if (fl && !classify(m, k, la.strides[ra - 2], la.strides[ra - 1]).ok) {
    a = make_contiguous(env, with_layout(a, la), in.dtype);
    la = a.layout;
  }
  if (fl && !classify(k, n, lb.strides[rb - 2], lb.strides[rb - 1]).ok) {
    b = make_contiguous(env, with_layout(b, lb), in.dtype);
    lb = b.layout;
  }
  Strides sa = broadcast_strides(ba, Strides(la.strides.begin(), la.strides.end() - 2), batch);
  Strides sb = broadcast_strides(bb, Strides(lb.strides.begin(), lb.strides.end() - 2), batch);
  Strides sc = contiguous_strides(batch);
  for (int64_t& x : sc) x *= m * n;
  Shape bs = batch;
  coalesce(bs, {&sa, &sb, &sc});
  const int64_t sam = la.strides[ra - 2], sak = la.strides[ra - 1];
  const int64_t sbk = lb.strides[rb - 2], sbn = lb.strides[rb - 1];
  if (!fl) {
    if (bs.size() > static_cast<size_t>(kMatmulMaxBatchDims))
      throw Error("cuda backend: matmul with too many batch dims");
    IntMatmulGeo g;
    g.nd = static_cast<int>(bs.size());
    for (size_t d = 0; d < bs.size(); ++d) {
      g.shape[d] = bs[d];
      g.sa[d] = sa[d];
      g.sb[d] = sb[d];
    }
    g.nb = nb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.sam = sam;
    g.sak = sak;
    g.sbk = sbk;
    g.sbn = sbn;
    SLOTH_CU(launch_int_matmul(in.dtype == DType::kInt64, a.raw(), b.raw(), out.raw(), g,
                               c.sm_count * 32, c.stream));
    env.set(in.out, std::move(out));
    return;
  }
  MatArg ma = classify(m, k, sam, sak), mb = classify(k, n, sbk, sbn);
  // Row-major C = A B is column-major C^T = B^T A^T.
  const cublasOperation_t opb = mb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = ma.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  // The innermost coalesced batch dim is one strided-batched call; outer dims loop.
  const size_t nd = bs.size();
  const int64_t inner = bs[nd - 1];
  const int64_t outer = numel(bs) / inner;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, oa = 0, ob = 0, oc = 0;
    for (int d = static_cast<int>(nd) - 2; d >= 0; --d) {
      int64_t cd = rem % bs[d];
      rem /= bs[d];
      oa += cd * sa[d];
      ob += cd * sb[d];
      oc += cd * sc[d];
    }
    if (in.dtype == DType::kFloat32) {
      const float alpha = 1, beta = 0;
      SLOTH_CUBLAS(cublasSgemmStridedBatched(
          c.blas, opb, opa, n, m, k, &alpha, b.data<float>() + ob, mb.ld, sb[nd - 1],
          a.data<float>() + oa, ma.ld, sa[nd - 1], &beta, out.data<float>() + oc, n, sc[nd - 1],
          inner));
    } else {
      const double alpha = 1, beta = 0;
      SLOTH_CUBLAS(cublasDgemmStridedBatched(
          c.blas, opb, opa, n, m, k, &alpha, b.data<double>() + ob, mb.ld, sb[nd - 1],
          a.data<double>() + oa, ma.ld, sa[nd - 1], &beta, out.data<double>() + oc, n,
          sc[nd - 1], inner));
    }
  }
  env.set(in.out, std::move(out));
}

// ---- views and scatters ----------------------------------------------------------------------

void run_view(Env& env, const Instr& in) {
  const DeviceData& x = env.get(in.in[0]);
  if (in.op == OpId::kSplit || in.op == OpId::kChunk)
    throw Error(absl::StrFormat(
        "cuda backend: %s returns several tensors and must be lowered before planning", op_name(in.op)));
  PrimitiveView pv = lower_view(in.op, x.layout.shape, in.attrs);
  std::optional<Layout> l = apply_view(pv.op, pv.attrs, x.layout);
  if (l) {
    env.set(in.out, with_layout(x, std::move(*l)));
    return;
  }
  DeviceData cc = make_contiguous(env, x, x.dtype);
  l = apply_view(pv.op, pv.attrs, cc.layout);
  if (!l)
    throw Error(absl::StrFormat("cuda backend: %s cannot view %s", op_name(in.op), shape_str(x.layout.shape)));
  env.set(in.out, with_layout(cc, std::move(*l)));
}

void run_scatter(Env& env, const Instr& in) {
  OpId view;
  switch (in.op) {
    case OpId::kSliceScatter: view = OpId::kSlice; break;
    case OpId::kSelectScatter: view = OpId::kSelect; break;
    case OpId::kDiagonalScatter: view = OpId::kDiagonal; break;
    case OpId::kAsStridedScatter: view = OpId::kAsStrided; break;
    default: throw Error(absl::StrFormat("cuda backend: %s is not a scatter op", op_name(in.op)));
  }
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& src = env.get(in.in[1]);
  DeviceData out = make_contiguous(env, base, in.dtype);
  std::optional<Layout> window = apply_view(view, in.attrs, out.layout);
  if (!window)
    throw Error(absl::StrFormat("cuda backend: %s: no window in %s", op_name(in.op), shape_str(out.layout.shape)));
  copy_into(with_layout(out, std::move(*window)), src);
  env.set(in.out, std::move(out));
}

// ---- index ops -------------------------------------------------------------------------------

// Checks every index on the device; only when one is bad are the indices copied to the host
// to name the first one (the CPU backend's message).
void check_indices(Env& env, const Instr& in, const DeviceData& idx, int64_t dim, int64_t size,
                   bool allow_negative, const char* what) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  Shape shape = idx.layout.shape;
  Strides st = idx.layout.strides;
  coalesce(shape, {&st});
  check_rank("index check", shape.size());
  DeviceData err = env.alloc({1}, DType::kInt64);
  Context& c = Context::get();
  SLOTH_CU(cudaMemsetAsync(err.raw(), 0, 8, c.stream));
  Words w;
  w.p(idx.raw());
  w.i(n);
  w.i(static_cast<int64_t>(shape.size()));
  w.arr(shape);
  w.arr(st);
  w.i(size);
  w.i(allow_negative ? 1 : 0);
  w.p(err.raw());
  launch(check_index_source(idx.dtype), w, n);
  int64_t bad = 0;
  staging().to_host(err.raw(), &bad, 8);
  if (!bad) return;
  DeviceData flat = make_contiguous(env, idx, DType::kInt64);
  std::vector<int64_t> v(n);
  staging().to_host(flat.raw(), v.data(), n * 8);
  for (int64_t i : v) {
    if (allow_negative ? (i < -size || i >= size) : (i < 0 || i >= size)) {
      if (std::string(what) == "one_hot")
        throw Error(absl::StrFormat("one_hot: index %d is out of range for num_classes %d (valid: 0 to %d)",
                                    i, size, size - 1));
      if (allow_negative)
        throw Error(absl::StrFormat(
            "%s: index %d is out of range for dim 0 of size %d (valid: %d to %d)", op_name(in.op), i,
            size, -size, size - 1));
      throw Error(absl::StrFormat("%s: index %d is out of range for dim %d of size %d (valid: 0 to %d)",
                                  op_name(in.op), i, dim, size, size - 1));
    }
  }
}

int64_t dim_size(const DeviceData& x, int64_t dim) {
  return x.layout.shape.empty() ? 1 : x.layout.shape[dim];
}

struct IndexLaunch {
  int mode;
  DType dtype;
  const DeviceData* target;
  const DeviceData* other;
  const DeviceData* idx;
  const void* winner = nullptr;
  int64_t dim = 0, dstride = 0, size = 0;
  Shape shape;
  Strides ts, os, is;
};

void launch_index(const IndexLaunch& l) {
  const int64_t n = numel(l.shape);
  if (n == 0) return;
  check_rank("index op", l.shape.size());
  Words w;
  w.p(l.target->raw());
  w.p(l.other->raw());
  w.p(l.idx->raw());
  w.p(l.winner);
  w.i(n);
  w.i(static_cast<int64_t>(l.shape.size()));
  w.i(l.dim);
  w.i(l.dstride);
  w.i(l.size);
  w.arr(l.shape);
  w.arr(l.ts);
  w.arr(l.os);
  w.arr(l.is);
  launch(index_source(l.mode, l.dtype, l.idx->dtype), w, n);
}

// Operand `slot` in dtype `t` (converted copy when it differs).
DeviceData operand_as(Env& env, int slot, DType t) {
  DeviceData d = env.get(slot);
  return d.dtype == t ? d : make_contiguous(env, d, t);
}

void index_select(Env& env, const Instr& in) {
  const int64_t dim = in.attrs.i0;
  DeviceData x = operand_as(env, in.in[0], in.dtype);
  const DeviceData& idx = env.get(in.in[1]);
  check_indices(env, in, idx, dim, dim_size(x, dim), false, "");
  DeviceData out = env.alloc(in.shape, in.dtype);
  if (x.layout.shape.empty()) {
    copy_into(out, x);
  } else {
    IndexLaunch l{2, in.dtype, &x, &out, &idx};
    l.dim = dim;
    l.shape = out.layout.shape;
    l.ts = x.layout.strides;
    l.dstride = l.ts[dim];
    l.ts[dim] = 0;
    l.os = out.layout.strides;
    l.is.assign(l.shape.size(), 0);
    l.is[dim] = idx.layout.shape.empty() ? 0 : idx.layout.strides[0];
    launch_index(l);
  }
  env.set(in.out, std::move(out));
}

template <bool kScatter>
void gather_scatter(Env& env, const Instr& in) {
  const int64_t dim = in.attrs.i0;
  DeviceData x = env.get(in.in[0]);
  const DeviceData& index = env.get(in.in[1]);
  check_indices(env, in, index, dim, dim_size(x, dim), false, "");
  if (!kScatter && x.dtype != in.dtype) x = make_contiguous(env, x, in.dtype);
  DeviceData out = kScatter ? make_contiguous(env, x, in.dtype) : env.alloc(in.shape, in.dtype);
  if (index.numel() == 0) {
    env.set(in.out, std::move(out));
    return;
  }
  DeviceData src;
  if (kScatter) src = operand_as(env, in.in[2], in.dtype);
  const DeviceData& target = kScatter ? out : x;
  const DeviceData& other = kScatter ? src : out;
  IndexLaunch l{kScatter ? 1 : 0, in.dtype, &target, &other, &index};
  l.shape = index.layout.shape;
  l.is = index.layout.strides;
  if (l.shape.empty()) {
    l.shape = {1};
    l.is = {0};
  }
  l.ts = target.layout.strides;
  l.os = other.layout.strides;
  if (l.ts.empty()) l.ts = {0};
  if (l.os.empty()) l.os = {0};
  l.dim = dim;
  l.dstride = l.ts[dim];
  l.ts[dim] = 0;
  launch_index(l);
  env.set(in.out, std::move(out));
}

void index_add(Env& env, const Instr& in) {
  const int64_t dim = in.attrs.i0;
  const DeviceData& base = env.get(in.in[0]);
  const DeviceData& idx = env.get(in.in[1]);
  check_indices(env, in, idx, dim, dim_size(base, dim), false, "");
  DeviceData src = operand_as(env, in.in[2], in.dtype);
  DeviceData out = make_contiguous(env, base, in.dtype);
  if (base.layout.shape.empty()) {
    if (idx.numel() > 0) copy_into(out, src, /*accumulate=*/true);
  } else if (idx.numel() > 0) {
    IndexLaunch l{3, in.dtype, &out, &src, &idx};
    l.dim = dim;
    l.shape = src.layout.shape;
    l.ts = out.layout.strides;
    l.dstride = l.ts[dim];
    l.ts[dim] = 0;
    l.os = src.layout.strides;
    l.is.assign(l.shape.size(), 0);
    l.is[dim] = idx.layout.shape.empty() ? 0 : idx.layout.strides[0];
    launch_index(l);
  }
  env.set(in.out, std::move(out));
}

void index_put(Env& env, const Instr& in) {
  const DeviceData& base = env.get(in.in[0]);
  DeviceData values = operand_as(env, in.in[2], in.dtype);
  const int64_t size = base.layout.shape[0];
  check_indices(env, in, env.get(in.in[1]), 0, size, true, "");
  DeviceData idx = make_contiguous(env, env.get(in.in[1]), DType::kInt64);
  DeviceData out = make_contiguous(env, base, in.dtype);
  const int64_t len = idx.numel();
  if (len > 0) {
    // Last write wins with duplicate indices: winner[row] = the last i with idx[i] == row.
    Context& c = Context::get();
    DeviceData winner = env.alloc({std::max<int64_t>(size, 1)}, DType::kInt64);
    SLOTH_CU(cudaMemsetAsync(winner.raw(), 0xff, std::max<int64_t>(size, 1) * 8, c.stream));
    Words w;
    w.p(idx.raw());
    w.i(len);
    w.i(1);
    w.i(size);
    w.p(winner.raw());
    launch(winner_source(DType::kInt64), w, len);
    Shape target = base.layout.shape;
    target[0] = len;
    IndexLaunch l{4, in.dtype, &out, &values, &idx};
    l.winner = winner.raw();
    l.dim = 0;
    l.size = size;
    l.shape = target;
    l.ts = out.layout.strides;
    l.dstride = l.ts[0];
    l.ts[0] = 0;
    l.os = broadcast_strides(values.layout.shape, values.layout.strides, target);
    l.is.assign(target.size(), 0);
    l.is[0] = 1;
    launch_index(l);
  }
  env.set(in.out, std::move(out));
}

void one_hot(Env& env, const Instr& in) {
  const int64_t classes = in.attrs.i0;
  const DeviceData& idx = env.get(in.in[0]);
  check_indices(env, in, idx, 0, classes, false, "one_hot");
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  Context& c = Context::get();
  SLOTH_CU(cudaMemsetAsync(out.raw(), 0, std::max<int64_t>(out.numel(), 0) * 8, c.stream));
  const int64_t n = idx.numel();
  if (n > 0) {
    Shape shape = idx.layout.shape;
    Strides st = idx.layout.strides;
    if (shape.empty()) {
      shape = {1};
      st = {0};
    }
    check_rank("one_hot", shape.size());
    Words w;
    w.p(idx.raw());
    w.p(out.raw());
    w.i(n);
    w.i(static_cast<int64_t>(shape.size()));
    w.i(classes);
    w.arr(shape);
    w.arr(st);
    launch(one_hot_source(idx.dtype), w, n);
  }
  env.set(in.out, std::move(out));
}

void cat(Env& env, const Instr& in) {
  const int64_t dim = in.attrs.i0;
  DeviceData out = env.alloc(in.shape, in.dtype);
  int64_t at = 0;
  for (int32_t slot : in.in) {
    const DeviceData& x = env.get(slot);
    const int64_t len = x.layout.shape[dim];
    if (len > 0 && x.numel() > 0) {
      Layout w = out.layout;
      w.offset += at * w.strides[dim];
      w.shape[dim] = len;
      copy_into(with_layout(out, w), x);
    }
    at += len;
  }
  env.set(in.out, std::move(out));
}

void run_index(Env& env, const Instr& in) {
  switch (in.op) {
    case OpId::kIndexSelect: return index_select(env, in);
    case OpId::kGather: return gather_scatter<false>(env, in);
    case OpId::kScatterAdd: return gather_scatter<true>(env, in);
    case OpId::kIndexAdd: return index_add(env, in);
    case OpId::kIndexPut: return index_put(env, in);
    case OpId::kOneHot: return one_hot(env, in);
    case OpId::kCat: return cat(env, in);
    case OpId::kClone:
      env.set(in.out, make_contiguous(env, env.get(in.in[0]), in.dtype));
      return;
    default:
      throw Error(absl::StrFormat("cuda backend: %s is not an index or shape op", op_name(in.op)));
  }
}

// ---- factories -------------------------------------------------------------------------------

void run_factory(Env& env, const Instr& in) {
  DeviceData out = env.alloc(in.shape, in.dtype);
  const int64_t n = out.numel();
  KernelSource ks = factory_source(in.op, in.dtype);
  if (ks.name.empty()) throw Error(absl::StrFormat("cuda backend: %s is not a factory", op_name(in.op)));
  double a = 0, b = 0;
  int64_t i0 = 0, i1 = 0;
  switch (in.op) {
    case OpId::kFull: a = env.scalar(in.in[0]); break;
    case OpId::kEye:
      i0 = in.shape.size() > 0 ? in.shape[0] : 0;
      i1 = in.shape.size() > 1 ? in.shape[1] : i0;
      break;
    case OpId::kRandint:
      i0 = in.attrs.i0;
      i1 = in.attrs.i1;
      [[fallthrough]];
    default:
      a = env.scalar(in.in[0]);
      b = env.scalar(in.in[1]);
  }
  if (n > 0) {
    Words w;
    w.p(out.raw());
    w.i(n);
    w.d(a);
    w.d(b);
    w.i(i0);
    w.i(i1);
    launch(ks, w, n);
  }
  env.set(in.out, std::move(out));
}

// ---- executable ------------------------------------------------------------------------------

enum class StepKind : uint8_t { kElementwise, kReduce, kMatmul, kView, kScatter, kIndex, kFactory };

StepKind kind_of(OpId op) {
  switch (op_info(op).category) {
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
      return StepKind::kElementwise;
    case OpCategory::Reduce: return StepKind::kReduce;
    case OpCategory::Matmul: return StepKind::kMatmul;
    case OpCategory::View: return StepKind::kView;
    case OpCategory::Scatter: return StepKind::kScatter;
    case OpCategory::Factory: return StepKind::kFactory;
    default: return StepKind::kIndex;
  }
}

struct Step {
  StepKind kind;
  int32_t instr = -1;
  std::unique_ptr<EwStep> ew;
  std::vector<int32_t> reads;
};

// Splits a plan's kernels into steps (runs of same-shape elementwise instructions, single
// instructions otherwise) and computes when each slot can be released. Same rules as the
// CPU backend.
void build_steps(const Plan& plan, std::vector<std::vector<Step>>* steps,
                 std::vector<std::vector<int32_t>>* release) {
  const size_t nk = plan.kernels.size();
  std::vector<std::vector<int32_t>> readers(plan.slots.size());
  for (size_t i = 0; i < plan.instrs.size(); ++i)
    for (int32_t s : plan.instrs[i].in) readers[s].push_back(static_cast<int32_t>(i));
  std::set<int32_t> plan_out(plan.outputs.begin(), plan.outputs.end());
  steps->resize(nk);
  release->resize(nk);
  std::vector<int> last_use(plan.slots.size(), -1);
  for (size_t k = 0; k < nk; ++k) {
    const lazy::Kernel& kern = plan.kernels[k];
    std::set<int32_t> kout(kern.outputs.begin(), kern.outputs.end());
    std::vector<int32_t> group;
    auto flush = [&] {
      if (group.empty()) return;
      std::set<int32_t> in_group(group.begin(), group.end()), produced;
      std::vector<int32_t> materialize, reads;
      for (int32_t i : group) {
        for (int32_t s : plan.instrs[i].in)
          if (!produced.count(s)) reads.push_back(s);
        produced.insert(plan.instrs[i].out);
      }
      for (int32_t i : group) {
        int32_t s = plan.instrs[i].out;
        bool outside = kout.count(s) || plan_out.count(s);
        for (int32_t r : readers[s]) outside = outside || !in_group.count(r);
        if (outside) materialize.push_back(s);
      }
      Step st{StepKind::kElementwise};
      st.ew = std::make_unique<EwStep>();
      st.ew->k = generate_elementwise(plan, group, materialize);
      st.reads = std::move(reads);
      (*steps)[k].push_back(std::move(st));
      group.clear();
    };
    for (int32_t i : kern.instrs) {
      const Instr& in = plan.instrs[i];
      StepKind sk = kind_of(in.op);
      if (sk == StepKind::kElementwise) {
        if (!group.empty() && plan.instrs[group.back()].shape != in.shape) flush();
        group.push_back(i);
        continue;
      }
      flush();
      Step st{sk};
      st.instr = i;
      st.reads.assign(in.in.begin(), in.in.end());
      (*steps)[k].push_back(std::move(st));
    }
    flush();
    for (int32_t i : kern.instrs) {
      for (int32_t s : plan.instrs[i].in) last_use[s] = std::max(last_use[s], static_cast<int>(k));
      int32_t o = plan.instrs[i].out;
      last_use[o] = std::max(last_use[o], static_cast<int>(k));
    }
  }
  for (size_t s = 0; s < plan.slots.size(); ++s)
    if (last_use[s] >= 0 && !plan_out.count(static_cast<int32_t>(s)))
      (*release)[last_use[s]].push_back(static_cast<int32_t>(s));
}

class CudaExecutable final : public lazy::Executable {
 public:
  explicit CudaExecutable(const Plan& plan) : plan_(plan) {
    build_steps(plan_, &steps_, &release_);
    // Compile every fused kernel now: a cached plan replays without touching NVRTC.
    for (auto& ks : steps_)
      for (Step& st : ks)
        if (st.ew && st.ew->k.error.empty()) st.ew->fn = modules().get(st.ew->k.src);
  }

  absl::Status run(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                   std::vector<DeviceData>* outputs, lazy::RunStats* stats) override {
    try {
      return run_impl(inputs, scalars, outputs, stats);
    } catch (const Error& e) {
      return absl::InternalError(e.what());
    }
  }

 private:
  absl::Status run_impl(absl::Span<const DeviceData> inputs, absl::Span<const double> scalars,
                        std::vector<DeviceData>* outputs, lazy::RunStats* stats) {
    lazy::RunStats local;
    Env env;
    env.plan = &plan_;
    env.scalars = scalars;
    env.stats = stats ? stats : &local;
    env.vals.resize(plan_.slots.size());
    for (size_t s = 0; s < plan_.slots.size(); ++s) {
      const lazy::Slot& slot = plan_.slots[s];
      if (slot.kind == SlotKind::kInput) {
        if (slot.index < 0 || slot.index >= static_cast<int32_t>(inputs.size()))
          return absl::InvalidArgumentError(absl::StrFormat(
              "cuda backend: the plan reads input %d but %d inputs were bound", slot.index, inputs.size()));
        if (!inputs[slot.index].storage->device().is_cuda())
          return absl::InvalidArgumentError(absl::StrFormat(
              "cuda backend: input %d lives on %s; move it with .to(Device::cuda())", slot.index,
              inputs[slot.index].storage->device().str()));
        env.vals[s] = inputs[slot.index];
      } else if (slot.kind == SlotKind::kScalar &&
                 (slot.index < 0 || slot.index >= static_cast<int32_t>(scalars.size()))) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "cuda backend: the plan reads scalar %d but %d scalars were bound", slot.index, scalars.size()));
      }
    }
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (const Step& st : steps_[k]) {
        for (int32_t r : st.reads)
          if (!env.has(r) && plan_.slots[r].kind != SlotKind::kScalar)
            return absl::InternalError(absl::StrFormat(
                "cuda backend: kernel %d reads slot %d before it is computed", k, r));
        execute(env, st);
      }
      if (!steps_[k].empty()) ++env.stats->kernels_launched;
      for (int32_t s : release_[k]) env.vals[s] = DeviceData();
    }
    outputs->clear();
    for (int32_t s : plan_.outputs) {
      const DeviceData& d = env.get(s);
      if (!d.storage)
        return absl::InternalError(absl::StrFormat("cuda backend: output slot %d was never computed", s));
      outputs->push_back(d);
    }
    // Kernel faults surface here rather than at some later copy.
    SLOTH_CU(cudaGetLastError());
    return absl::OkStatus();
  }

  void execute(Env& env, const Step& st) {
    if (st.kind == StepKind::kElementwise) return run_elementwise(env, *st.ew);
    const Instr& in = plan_.instrs[st.instr];
    switch (st.kind) {
      case StepKind::kReduce: return run_reduce(env, in);
      case StepKind::kMatmul: return run_matmul(env, in);
      case StepKind::kView: return run_view(env, in);
      case StepKind::kScatter: return run_scatter(env, in);
      case StepKind::kFactory: return run_factory(env, in);
      default: return run_index(env, in);
    }
  }

  Plan plan_;
  std::vector<std::vector<Step>> steps_;
  std::vector<std::vector<int32_t>> release_;
};

class CudaBackend final : public lazy::Backend {
 public:
  Device device() const override { return Device::cuda(0); }
  Allocator* allocator() override { return &cuda::allocator(); }
  std::unique_ptr<lazy::Executable> compile(const Plan& plan) override {
    return std::make_unique<CudaExecutable>(plan);
  }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) staging().to_host(src, dst, bytes);
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) staging().to_device(src, dst, bytes);
  }
};

const bool kRegistered = [] {
  if (!probe().empty()) return false;  // no device or no driver: CUDA stays unavailable
  static CudaBackend backend;
  lazy::register_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace

std::string device_status() { return probe(); }

AllocatorStats allocator_stats() { return allocator().stats(); }

void empty_cache() {
  if (device_available()) allocator().empty();
}

absl::Status compile_plan_sources(const Plan& plan, const std::string& arch, int* kernels) {
  std::vector<std::vector<Step>> steps;
  std::vector<std::vector<int32_t>> release;
  build_steps(plan, &steps, &release);
  int count = 0;
  for (auto& ks : steps)
    for (Step& st : ks) {
      if (!st.ew) continue;
      if (!st.ew->k.error.empty()) return absl::InternalError(st.ew->k.error);
      auto code = nvrtc_compile(st.ew->k.src.source, st.ew->k.src.name, arch);
      if (!code.ok()) return code.status();
      ++count;
    }
  if (kernels) *kernels = count;
  return absl::OkStatus();
}

}  // namespace sloth::cuda
