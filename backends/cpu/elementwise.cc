// The tile interpreter. A run of elementwise instructions compiles to a short program of
// steps (load an operand tile, convert a tile, apply one op to whole tiles). The loop space is
// cut into tiles of kTile elements that stay in L1; per tile each step runs one tight typed
// loop chosen at compile time, so dispatch costs one indirect call per step per tile and
// intermediates never touch memory. Operands that are contiguous in the loop's order and
// already of the right dtype are read in place, and materialized results are written straight
// into their output buffers.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#define SLOTH_EW_TABLE op_table_base
#include "backends/cpu/ew_codegen.h"
#include "backends/cpu/ew_loops.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/minmax.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/tile_io.h"
#include "core/error.h"

namespace sloth::cpu {
namespace ew {
OpFn op_fn_avx512(OpId op, DType t, Mode mode);  // ew_avx512.cc
}
namespace {

// Elements per tile; SLOTH_TILE overrides it (a power of two, 64 .. 16384), for measurements.
const int64_t kTile = [] {
  const char* v = std::getenv("SLOTH_TILE");
  int64_t t = v ? std::atoll(v) : 512;
  return (t >= 64 && t <= 16384 && (t & (t - 1)) == 0) ? t : int64_t{512};
}();
// Scratch registers are kRegStride apart, not kRegBytes: at a power-of-two stride every
// register's tile falls into the same L1 sets (and so do the operand tiles, which share their
// offsets), and chains with many live registers missed L1 on set conflicts. The extra
// quarter tile plus one line staggers consecutive registers over the sets.
const int64_t kRegBytes = kTile * 8;
const int64_t kRegStride = kRegBytes + kTile * 2 + 64;
// How far ahead (in tiles) run_chunk prefetches operands; SLOTH_PREFETCH_TILES overrides it
// (0 disables), for measurements.
const int64_t kPrefetchTiles = [] {
  const char* v = std::getenv("SLOTH_PREFETCH_TILES");
  return v ? std::max<int64_t>(0, std::atoll(v)) : int64_t{0};
}();

using ew::OpFn;
using ConvFn = void (*)(void* out, const void* in, int64_t n);
using tile::LoadArgs;
using tile::LoadFn;
using tile::load_for;
using tile::fill;
using tile::SumAcc;
using tile::ProdAcc;
using tile::MaxAcc;
using tile::MinAcc;

// Op loops per ISA (ew_loops.h): the baseline (AVX2) table compiled here, the AVX-512 one in
// ew_avx512.cc. AVX-512 is opt-in (SLOTH_EW_ISA=avx512, when the CPU has it): on the Zen 5
// VMs measured (tests/fusion_bandwidth, 1 thread) it was slower than AVX2 at every k
// (k=1 8.9 vs 6.4 ms, k=8 29-32 vs 20-22 ms over 16M floats).
bool use_avx512() {
  static const bool v = [] {
    const char* e = std::getenv("SLOTH_EW_ISA");
    if (!e || std::strcmp(e, "avx512") != 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return v;
}
OpFn op_fn(OpId op, DType t, ew::Mode mode = ew::Mode::kVec) {
  return use_avx512() ? ew::op_fn_avx512(op, t, mode) : ew::op_table_base(op, t, mode);
}

template <typename S, typename D>
void conv_fn(void* o, const void* i, int64_t n) {
  D* out = static_cast<D*>(o);
  const S* in = static_cast<const S*>(i);
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<D>(in[j]);
}
ConvFn conv_for(DType from, DType to) {
  return visit_dtype(from, [&](auto s) {
    return visit_dtype(to, [&](auto d) -> ConvFn { return &conv_fn<decltype(s), decltype(d)>; });
  });
}

// Outputs at least this large (all outputs of a run together) are written with streaming
// stores: about the size of the last-level cache share of one core.
// SLOTH_STREAM_MB overrides it (0 disables streaming), for measurements.
const int64_t kStreamBytes = [] {
  const char* v = std::getenv("SLOTH_STREAM_MB");
  int64_t mb = v ? std::atoll(v) : 8;
  return mb <= 0 ? std::numeric_limits<int64_t>::max() : mb << 20;
}();

void stream_copy(char* dst, const char* src, size_t bytes) {
  size_t k = 0;
  if ((reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
    for (; k + 32 <= bytes; k += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + k),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(src + k)));
  }
  if (k < bytes) std::memcpy(dst + k, src + k, bytes - k);
}

// Scratch registers are per thread: tiles of one chunk reuse them, chunks on other threads
// have their own.
char* scratch(size_t bytes) {
  thread_local std::vector<char> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<char*>((p + 63) & ~uintptr_t{63});
}

class Program final : public ElementwiseProgram {
 public:
  using TileFn = void (*)(void* const*, int64_t);  // a run-time compiled tile kernel (jit.h)
  struct Val {
    DType dtype;
    int reg = -1;  // scratch register, when not in memory
    int out = -1;  // index into outs_: written straight to that output buffer
  };
  struct Ext {     // operand from memory, read as `dtype` into value `val`
    int slot;
    DType dtype;
    int val;
  };
  struct Const {   // operand from a scalar slot: one value broadcast over the tile
    int slot;
    int val;
  };
  struct Out {
    int slot;
    int val;
  };
  enum class Kind : uint8_t { kLoad, kConvert, kOp };
  struct Step {
    Kind kind;
    int out;
    int in[3] = {-1, -1, -1};
    int ext = -1;
    OpFn fn = nullptr;
    ConvFn conv = nullptr;
    OpId op;
    DType compute = DType::kFloat32;  // kOp: the type the op computes in
  };

  Program(const Plan& plan, const std::vector<int32_t>& instrs,
          const std::vector<int32_t>& materialize, const ProgramOptions& opt) {
    if (opt.reduce) {
      red_ = *opt.reduce;
      shape_ = plan.slots[red_.in[0]].shape;
    } else {
      shape_ = plan.instrs[instrs.back()].shape;
    }
    std::map<int, int> internal;                       // slot -> value
    std::map<std::pair<int, DType>, int> loaded;       // (slot, dtype) -> value
    std::map<std::pair<int, DType>, int> converted;    // (value, dtype) -> value
    auto new_val = [&](DType t) {
      vals_.push_back({t});
      return static_cast<int>(vals_.size()) - 1;
    };
    for (int32_t ii : instrs) {
      const Instr& in = plan.instrs[ii];
      Step st{Kind::kOp, -1};
      st.op = in.op;
      for (size_t i = 0; i < in.in.size() && i < 3; ++i) {
        int slot = in.in[i];
        DType t = operand_dtype(in, static_cast<int>(i));
        int v;
        auto it = internal.find(slot);
        if (it != internal.end()) {
          v = it->second;
          if (vals_[v].dtype != t) {
            auto key = std::make_pair(v, t);
            auto c = converted.find(key);
            if (c == converted.end()) {
              int cv = new_val(t);
              Step cs{Kind::kConvert, cv};
              cs.in[0] = v;
              cs.conv = conv_for(vals_[v].dtype, t);
              steps_.push_back(cs);
              c = converted.emplace(key, cv).first;
            }
            v = c->second;
          }
        } else {
          auto key = std::make_pair(slot, t);
          auto l = loaded.find(key);
          if (l == loaded.end()) {
            int lv = new_val(t);
            if (plan.slots[slot].kind == lazy::SlotKind::kScalar) {
              consts_.push_back({slot, lv});
            } else {
              exts_.push_back({slot, t, lv});
              Step ls{Kind::kLoad, lv};
              ls.ext = static_cast<int>(exts_.size()) - 1;
              steps_.push_back(ls);
            }
            l = loaded.emplace(key, lv).first;
          }
          v = l->second;
        }
        st.in[i] = v;
      }
      st.out = new_val(in.dtype);
      const DType ct = operand_dtype(in, in.op == OpId::kWhere ? 1 : 0);
      st.compute = ct;
      st.fn = op_fn(in.op, ct);
      // A binary op with one scalar operand reads the scalar once (no tile of copies).
      if (in.in.size() == 2 && st.in[0] != st.in[1]) {
        OpFn f = nullptr;
        if (is_const_val(st.in[1]) && !is_const_val(st.in[0])) f = op_fn(in.op, ct, ew::Mode::kVS);
        else if (is_const_val(st.in[0]) && !is_const_val(st.in[1]))
          f = op_fn(in.op, ct, ew::Mode::kSV);
        if (f) st.fn = f;
      }
      if (!st.fn || in.in.size() > 3 || !is_elementwise(in.op))
        error_ = absl::StrFormat("cpu backend: %s is not an elementwise op", op_name(in.op));
      steps_.push_back(st);
      internal[in.out] = st.out;
      def_step_[st.out] = static_cast<int>(steps_.size()) - 1;
      for (int32_t m : materialize)
        if (m == in.out) {
          vals_[st.out].out = static_cast<int>(outs_.size());
          outs_.push_back({in.out, st.out});
        }
    }
    if (opt.reduce) {
      auto it = internal.find(red_.in[0]);
      if (it != internal.end()) {
        sink_ = it->second;
      } else if (instrs.empty() && plan.slots[red_.in[0]].kind != lazy::SlotKind::kScalar) {
        // A reduction with no prologue: its input is read from memory tile by tile.
        const int slot = red_.in[0];
        const int lv = new_val(plan.slots[slot].dtype);
        exts_.push_back({slot, plan.slots[slot].dtype, lv});
        Step ls{Kind::kLoad, lv};
        ls.ext = static_cast<int>(exts_.size()) - 1;
        steps_.push_back(ls);
        sink_ = lv;
      } else {
        error_ = "cpu backend: fused reduction input is not in its prologue";
      }
    }
    // In-place candidates: operands dead after this program whose buffer an output may take
    // over. Safe only if every step reading the operand runs no later than the step that
    // writes the output (a tile is read before it is overwritten) and the read is in lockstep
    // (checked at run time: same dtype, same linear layout, nothing else holds the storage).
    for (int32_t d : opt.donatable)
      for (size_t e = 0; e < exts_.size(); ++e)
        if (exts_[e].slot == d) {
          int last = -1;
          for (size_t k = 0; k < steps_.size(); ++k)
            for (int i : steps_[k].in)
              if (i == exts_[e].val) last = static_cast<int>(k);
          donors_.push_back({static_cast<int>(e), last});
        }
    allocate_registers();
    for (size_t k = 0; k < steps_.size(); ++k)
      if (steps_[k].kind == Kind::kLoad) load_steps_.push_back(static_cast<int>(k));
      else ++compute_steps_;
    // Compiled layout: constants, loaded operands and stored values each own a register
    // (the compiled loop keeps everything else in machine registers).
    interp_regs_.assign(vals_.size(), -1);
    jit_regs_.assign(vals_.size(), -1);
    for (size_t v = 0; v < vals_.size(); ++v) {
      interp_regs_[v] = vals_[v].reg;
      if (vals_[v].reg >= 0 && (is_const(static_cast<int>(v)) || vals_[v].out >= 0 ||
                                static_cast<int>(v) == sink_))
        jit_regs_[v] = num_jit_regs_++;
    }
    for (int k : load_steps_) jit_regs_[steps_[k].out] = num_jit_regs_++;
    if (error_.empty()) jit_ = std::make_shared<jit::Slot>();
    n_ = numel(shape_);
    for (const Out& o : outs_) {
      out_def_.push_back(def_step_.at(o.val));
      out_es_.push_back(dtype_size(vals_[o.val].dtype));
      out_bytes_ += n_ * static_cast<int64_t>(out_es_.back());
    }
  }

  absl::Status run(Env& env) const override {
    if (!error_.empty()) return absl::InternalError(error_);
    // Per-run state lives in the program and is reused (no allocation in steady state); a
    // concurrent run of the same program (not expected) binds into a local copy.
    const bool mine = !busy_.exchange(true, std::memory_order_acquire);
    Bind local;
    Bind& b = mine ? bind_ : local;
    struct Unbusy {
      std::atomic<bool>* f;
      ~Unbusy() { if (f) f->store(false, std::memory_order_release); }
    } unbusy{mine ? &busy_ : nullptr};
    SLOTH_RETURN_IF_ERROR(prepare(env, b));
    const int64_t n = n_;
    if (sink_ >= 0) return run_reduce(n, b, -1, -1);
    if (n >= kParallelThreshold) {
      parallel_for(n, kTile * 8, [&](int64_t lo, int64_t hi) {
        run_chunk<NoSink>(lo, hi, b, nullptr, b.jit);
      });
    } else if (n > 0) {
      run_chunk<NoSink>(0, n, b, nullptr, b.jit);
    }
    return absl::OkStatus();
  }

  const Shape& loop_shape() const override { return shape_; }
  bool row_blockable() const override {
    if (!error_.empty() || shape_.size() < 2 || n_ == 0) return false;
    if (sink_ < 0) return true;
    // A reduction over trailing dims that keeps dim 0: each row of dim 0 reduces on its own.
    return !red_.attrs.dims.empty() &&
           *std::min_element(red_.attrs.dims.begin(), red_.attrs.dims.end()) >= 1;
  }
  absl::Status begin_rows(Env& env) const override {
    if (!error_.empty()) return absl::InternalError(error_);
    // No donation: another step of the group may still read the donor's rows of later
    // blocks through a layout that is not row-aligned with this loop.
    return prepare(env, bind_, /*donate=*/false);
  }
  void run_rows(int64_t r0, int64_t r1) const override {
    if (sink_ >= 0) {
      const int64_t per_row = numel(red_.shape) / shape_[0];  // reduced outputs per row
      run_reduce(n_, bind_, r0 * per_row, r1 * per_row).IgnoreError();  // checked in prepare
    } else {
      const int64_t inner = n_ / shape_[0];
      run_chunk<NoSink>(r0 * inner, r1 * inner, bind_, nullptr, bind_.jit);
    }
  }

 private:
  struct Bound {
    LoadArgs args;
    bool linear = false, direct = false;
    size_t src_size = 0;
    LoadFn load = nullptr;
    ConvFn conv = nullptr;
  };
  // What a run binds: the coalesced loop space and how each operand is read. It depends only
  // on the operands' dtypes, shapes and strides (fixed per plan in practice), so it is
  // computed on the first run and recomputed only when a layout changes.
  struct Bind {
    bool valid = false;
    std::vector<DType> key_dtype;
    std::vector<Shape> key_shape;
    std::vector<Strides> key_strides;
    Shape geo;
    std::vector<Strides> st;
    std::vector<Bound> bound;  // args.base set per run
    std::vector<double> cv;
    std::vector<char*> outp;
    std::vector<char> donated;
    TileFn jit = nullptr;      // the compiled tile kernel for this run, if ready
    char* red_out = nullptr;   // the fused reduction's output
  };
  struct NoSink {
    void operator()(const void*, int64_t, int64_t) {}
  };

  // Outputs allocated (or donated buffers taken over), operands bound, scalars read, the
  // reduction's output allocated: everything a run needs before its loops.
  absl::Status prepare(Env& env, Bind& b, bool donate = true) const {
    const int64_t n = n_;
    b.donated.assign(exts_.size(), 0);
    b.outp.resize(outs_.size());
    for (size_t o = 0; o < outs_.size(); ++o) {
      const DType t = vals_[outs_[o].val].dtype;
      bool done = false;
      for (const Donor& d : donors_) {
        if (!donate) break;
        if (b.donated[d.ext] || d.last_read > out_def_[o]) continue;
        const DeviceData& x = env.get(exts_[d.ext].slot);
        if (x.dtype != t || x.storage->use_count() != 1 || x.layout.shape != shape_ ||
            !x.is_contiguous() || x.numel() != n)
          continue;
        b.donated[d.ext] = 1;
        env.set_view(outs_[o].slot, x);  // shares the storage; the slot is released after this kernel
        done = true;
        break;
      }
      if (!done) env.alloc_to(outs_[o].slot, shape_, t);
      b.outp[o] = ptr(env.vals[outs_[o].slot]);
    }
    b.jit = nullptr;
    if (n > 0) {
      bool hit = b.valid;
      for (size_t e = 0; e < exts_.size() && hit; ++e) {
        const DeviceData& x = env.get(exts_[e].slot);
        hit = x.dtype == b.key_dtype[e] && x.layout.shape == b.key_shape[e] &&
              x.layout.strides == b.key_strides[e];
      }
      if (!hit) rebind(env, b);
      b.jit = jit_fn(n);
      if (b.jit != nullptr) jit::note_compiled_run();
      for (size_t e = 0; e < exts_.size(); ++e) b.bound[e].args.base = ptr(env.get(exts_[e].slot));
      b.cv.resize(consts_.size());
      for (size_t c = 0; c < consts_.size(); ++c) b.cv[c] = env.scalar(consts_[c].slot);
    }
    if (sink_ >= 0) {
      const int64_t kn = numel(red_.shape);
      if (kn > 0 && n == 0 && (red_.op == OpId::kAmax || red_.op == OpId::kAmin))
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: cannot reduce over an empty dim (no identity)", op_name(red_.op)));
      b.red_out = ptr(env.alloc_to(red_.out, red_.shape, red_.dtype));
    }
    return absl::OkStatus();
  }

  void rebind(Env& env, Bind& b) const {
    const size_t ne = exts_.size();
    b.key_dtype.resize(ne);
    b.key_shape.resize(ne);
    b.key_strides.resize(ne);
    b.st.resize(ne + 1);
    b.geo = shape_;
    std::vector<const DeviceData*> data(ne);
    for (size_t e = 0; e < ne; ++e) {
      data[e] = &env.get(exts_[e].slot);
      b.key_dtype[e] = data[e]->dtype;
      b.key_shape[e] = data[e]->layout.shape;
      b.key_strides[e] = data[e]->layout.strides;
      b.st[e] = broadcast_strides(data[e]->layout.shape, data[e]->layout.strides, shape_);
    }
    b.st.back() = contiguous_strides(shape_);
    std::vector<Strides*> sp;
    for (auto& x : b.st) sp.push_back(&x);
    coalesce(b.geo, sp);
    const Strides& lin = b.st.back();
    b.bound.assign(ne, Bound{});
    for (size_t e = 0; e < ne; ++e) {
      Bound& x = b.bound[e];
      x.args = {nullptr, b.geo.data(), b.st[e].data(), static_cast<int>(b.geo.size())};
      x.linear = b.st[e] == lin;
      x.direct = x.linear && data[e]->dtype == exts_[e].dtype;
      x.src_size = dtype_size(data[e]->dtype);
      x.load = load_for(data[e]->dtype, exts_[e].dtype);
      x.conv = conv_for(data[e]->dtype, exts_[e].dtype);
    }
    b.valid = true;
  }

  // The fused reduction: the prologue runs tile by tile over the reduction's input space in
  // row-major order, and each tile of the reduced value goes straight into accumulators (no
  // intermediate buffer). The reduced dims are the trailing ones (the planner checks), so
  // each output owns one contiguous stretch of rn elements of that order.
  // The fused reduction over all outputs (row_lo < 0, split over threads when large) or over
  // outputs [row_lo, row_hi) on this thread.
  absl::Status run_reduce(int64_t n, const Bind& b, int64_t row_lo, int64_t row_hi) const {
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
  void reduce_as(int64_t n, int64_t kn, int64_t rn, const Bind& b, O* o, int64_t row_lo,
                 int64_t row_hi) const {
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

  template <typename SinkF>
  void run_chunk(int64_t begin, int64_t end, const Bind& b, SinkF* sink, TileFn jit) const {
    // Large outputs bypass the cache (non-temporal stores): no write-allocate read of the
    // destination, and the inputs of the next tiles are not evicted. Results are computed
    // into L1 registers, then streamed.
    const bool stream = out_bytes_ >= kStreamBytes;
    // The compiled path runs every load before any computing step, so the interpreter's
    // register sharing (by step order) does not hold there: it has a layout of its own.
    const std::vector<int>& reg_of = jit ? jit_regs_ : interp_regs_;
    char* regs = scratch(static_cast<size_t>(jit ? num_jit_regs_ : num_regs_) * kRegStride);
    void* p[256];
    std::vector<void*> heap;
    void** ptrs = p;
    if (vals_.size() > 256) {
      heap.resize(vals_.size());
      ptrs = heap.data();
    }
    for (size_t v = 0; v < vals_.size(); ++v)
      ptrs[v] = reg_of[v] >= 0 ? regs + reg_of[v] * kRegStride : nullptr;
    const int64_t fill_n = std::min(kTile, end - begin);
    for (size_t c = 0; c < consts_.size(); ++c) {
      const Val& v = vals_[consts_[c].val];
      fill(ptrs[consts_[c].val], v.dtype, b.cv[c], fill_n);
    }
    const Bound* bound = b.bound.data();
    char* const* outp = b.outp.data();
    const size_t nouts = outs_.size();
    // Operands read linearly are prefetched kPrefetchTiles tiles ahead: each step reads its
    // operand tile in one short burst, too short for the hardware prefetchers to keep
    // several streams in flight, so without this every burst waits on DRAM latency.
    const int64_t pf = kPrefetchTiles * kTile;
    const size_t nexts = exts_.size();
    for (int64_t t = begin; t < end; t += kTile) {
      const int64_t n = std::min(kTile, end - t);
      if (pf > 0 && t + pf < end) {
        const int64_t pn = std::min(kTile, end - t - pf);
        for (size_t e = 0; e < nexts; ++e) {
          const Bound& x = bound[e];
          if (!x.linear) continue;
          const char* p0 = x.args.base + (t + pf) * x.src_size;
          const char* p1 = p0 + pn * x.src_size;
          for (const char* q = p0; q < p1; q += 64) _mm_prefetch(q, _MM_HINT_T0);
        }
      }
      if (!stream)
        for (size_t o = 0; o < nouts; ++o) ptrs[outs_[o].val] = outp[o] + t * out_es_[o];
      auto load = [&](const Step& s) {
        const Bound& x = bound[s.ext];
        const char* src = x.args.base + t * x.src_size;
        if (x.direct) ptrs[s.out] = const_cast<char*>(src);
        else if (x.linear) x.conv(ptrs[s.out], src, n);
        else x.load(x.args, t, n, ptrs[s.out]);
      };
      if (jit != nullptr) {  // loads as interpreted, then every computing step in one loop
        for (int k : load_steps_) load(steps_[k]);
        jit(ptrs, n);
      } else {
        for (const Step& s : steps_) {
        switch (s.kind) {
          case Kind::kLoad:
            load(s);
            break;
          case Kind::kConvert:
            s.conv(ptrs[s.out], ptrs[s.in[0]], n);
            break;
          case Kind::kOp:
            s.fn(ptrs[s.out], s.in[0] >= 0 ? ptrs[s.in[0]] : nullptr,
                 s.in[1] >= 0 ? ptrs[s.in[1]] : nullptr, s.in[2] >= 0 ? ptrs[s.in[2]] : nullptr,
                 n);
            break;
        }
        }
      }
      if (stream)
        for (size_t o = 0; o < nouts; ++o)
          stream_copy(outp[o] + t * out_es_[o], static_cast<const char*>(ptrs[outs_[o].val]),
                      n * out_es_[o]);
      if constexpr (!std::is_same_v<SinkF, NoSink>) (*sink)(ptrs[sink_], t, n);
    }
    if (stream) _mm_sfence();
  }

  // Linear scan over the steps: a value holds a register from its defining step to its last
  // use. Constants keep theirs for the whole chunk (filled once); outputs need none.
  void allocate_registers() {
    std::vector<int> last(vals_.size(), -1);
    for (size_t s = 0; s < steps_.size(); ++s)
      for (int i : steps_[s].in)
        if (i >= 0) last[i] = static_cast<int>(s);
    if (sink_ >= 0) last[sink_] = static_cast<int>(steps_.size());  // read after the last step
    std::vector<int> free_regs;
    int next = 0;
    auto take = [&] {
      if (!free_regs.empty()) {
        int r = free_regs.back();
        free_regs.pop_back();
        return r;
      }
      return next++;
    };
    for (const Const& c : consts_) vals_[c.val].reg = take();
    for (size_t s = 0; s < steps_.size(); ++s) {
      Val& out = vals_[steps_[s].out];
      // Loads may turn direct at run time (harmless); outputs get a register too, used when
      // a large run streams its results out with non-temporal stores.
      out.reg = take();
      if (out.out >= 0) last[steps_[s].out] = static_cast<int>(steps_.size());
      for (int i : steps_[s].in)
        if (i >= 0 && last[i] == static_cast<int>(s) && vals_[i].reg >= 0 &&
            !is_const(i)) {
          free_regs.push_back(vals_[i].reg);
          last[i] = -2;  // freed once even if it is read twice by this step
        }
      if (last[steps_[s].out] == -1 && out.reg >= 0) free_regs.push_back(out.reg);
    }
    num_regs_ = next;
  }
  bool is_const_val(int v) const { return v >= 0 && is_const(v); }
  bool is_const(int v) const {
    for (const Const& c : consts_)
      if (c.val == v) return true;
    return false;
  }

  // The compiled form of the program once it is ready (nullptr: interpret). A program is
  // compiled when it is hot: run again after its first run (it sits in a loop) with enough
  // work per run to amortize a compile; SLOTH_JIT=sync compiles every program on first use.
  static constexpr int64_t kJitMinRuns = 2;
  static constexpr int64_t kJitMinWork = int64_t{1} << 18;  // elements x computing steps
  TileFn jit_fn(int64_t n) const {
    if (!jit_ || compute_steps_ == 0 || jit::mode() == jit::Mode::kOff) return nullptr;
    void* f = jit_->fn.load(std::memory_order_acquire);
    if (f == nullptr && !jit_->requested.load(std::memory_order_relaxed)) {
      const int64_t runs = runs_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (jit::mode() == jit::Mode::kSync ||
          (runs >= kJitMinRuns && n * compute_steps_ >= kJitMinWork)) {
        request_jit();
        f = jit_->fn.load(std::memory_order_acquire);
      }
    }
    return reinterpret_cast<TileFn>(f);
  }
  // Describes the program to the code generator; the description is copied into the request,
  // so the program may be destroyed while its compile waits in the queue.
  void request_jit() const {
    using Role = jit::TileValue::Role;
    std::vector<jit::TileValue> tv(vals_.size());
    for (size_t v = 0; v < vals_.size(); ++v)
      tv[v] = {vals_[v].dtype, Role::kLocal, vals_[v].out >= 0 || static_cast<int>(v) == sink_};
    for (const Const& c : consts_) tv[c.val].role = Role::kConst;
    std::vector<jit::TileStep> ts;
    for (const Step& s : steps_) {
      if (s.kind == Kind::kLoad) {
        tv[s.out].role = Role::kMemory;
        continue;
      }
      jit::TileStep t{.convert = s.kind == Kind::kConvert, .op = s.op, .compute = s.compute,
                      .out = s.out};
      std::copy(std::begin(s.in), std::end(s.in), t.in);
      ts.push_back(t);
    }
    jit::request(jit_, [tv = std::move(tv), ts = std::move(ts)] {
      return jit::tile_kernel_source(tv, ts, "sloth_ew_tile");
    }, "sloth_ew_tile");
  }

  struct Donor {
    int ext;
    int last_read;  // last step reading the operand's loaded value
  };
  Shape shape_;
  Instr red_{};        // fused reduction (sink_ >= 0)
  int sink_ = -1;      // value reduced by red_
  std::map<int, int> def_step_;  // value -> defining step
  std::vector<int> out_def_;     // per output: its defining step
  std::vector<size_t> out_es_;   // per output: element size
  int64_t n_ = 0;                // numel(shape_)
  int64_t out_bytes_ = 0;        // all outputs together
  mutable Bind bind_;
  mutable std::atomic<bool> busy_{false};
  std::vector<Donor> donors_;
  std::vector<Val> vals_;
  std::vector<Ext> exts_;
  std::vector<Const> consts_;
  std::vector<Out> outs_;
  std::vector<Step> steps_;
  int num_regs_ = 0;
  std::vector<int> load_steps_;  // the kLoad steps, in order
  std::vector<int> interp_regs_, jit_regs_;  // value -> scratch register (-1: none)
  int num_jit_regs_ = 0;
  int64_t compute_steps_ = 0;    // kOp and kConvert steps
  std::shared_ptr<jit::Slot> jit_;  // null when SLOTH_JIT=off or the program cannot run
  mutable std::atomic<int64_t> runs_{0};
  std::string error_;
};

}  // namespace

std::unique_ptr<ElementwiseProgram> compile_elementwise(const Plan& plan,
                                                        const std::vector<int32_t>& instrs,
                                                        const std::vector<int32_t>& materialize,
                                                        const ProgramOptions& options) {
  return std::make_unique<Program>(plan, instrs, materialize, options);
}

}  // namespace sloth::cpu
