// The tile interpreter. A run of elementwise instructions compiles to a short program of
// steps (load an operand tile, convert a tile, apply one op to whole tiles). The loop space is
// cut into tiles of kTile elements that stay in L1; per tile each step runs one tight typed
// loop chosen at compile time, so dispatch costs one indirect call per step per tile and
// intermediates never touch memory. Operands that are contiguous in the loop's order and
// already of the right dtype are read in place, and materialized results are written straight
// into their output buffers.
#include <cstring>
#include <map>

#include "absl/strings/str_format.h"
#include "backends/cpu/ew_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/thread_pool.h"

namespace sloth::cpu {
namespace {

constexpr int64_t kTile = 512;
constexpr int64_t kRegBytes = kTile * 8;

using OpFn = void (*)(void* out, const void* a, const void* b, const void* c, int64_t n);
using ConvFn = void (*)(void* out, const void* in, int64_t n);

template <OpId op, typename T>
void unary_fn(void* o, const void* a, const void*, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  for (int64_t i = 0; i < n; ++i) out[i] = ew::unary<op, T>(x[i]);
}
template <OpId op, typename T>
void binary_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = ew::binary<op, T>(x[i], y[i]);
}
template <OpId op, typename T>
void compare_fn(void* o, const void* a, const void* b, const void*, int64_t n) {
  bool* out = static_cast<bool*>(o);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = ew::compare<op, T>(x[i], y[i]);
}
template <typename T>
void where_fn(void* o, const void* c, const void* a, const void* b, int64_t n) {
  T* out = static_cast<T*>(o);
  const bool* cond = static_cast<const bool*>(c);
  const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) out[i] = cond[i] ? x[i] : y[i];
}
template <typename T>
void clamp_fn(void* o, const void* a, const void* b, const void* c, int64_t n) {
  T* out = static_cast<T*>(o);
  const T *x = static_cast<const T*>(a), *lo = static_cast<const T*>(b),
          *hi = static_cast<const T*>(c);
  for (int64_t i = 0; i < n; ++i) out[i] = ew::min_<T>(ew::max_<T>(x[i], lo[i]), hi[i]);
}

OpFn op_fn(OpId op, DType t) {
  return visit_dtype(t, [&](auto z) -> OpFn {
    using T = decltype(z);
    switch (op) {
#define U(X) case OpId::k##X: return &unary_fn<OpId::k##X, T>;
      U(Neg) U(Abs) U(Exp) U(Log) U(Log1p) U(Sqrt) U(Rsqrt) U(Sin) U(Cos) U(Tanh) U(Sigmoid)
      U(Relu) U(Gelu) U(Silu) U(Erf) U(Square) U(Reciprocal) U(Sign) U(Floor) U(Ceil)
      U(Round) U(LogicalNot) U(Cast)
#undef U
#define B(X) case OpId::k##X: return &binary_fn<OpId::k##X, T>;
      B(Add) B(Sub) B(Mul) B(Div) B(Pow) B(Maximum) B(Minimum) B(LogicalAnd) B(LogicalOr)
#undef B
#define C(X) case OpId::k##X: return &compare_fn<OpId::k##X, T>;
      C(Eq) C(Ne) C(Lt) C(Le) C(Gt) C(Ge)
#undef C
      case OpId::kWhere: return &where_fn<T>;
      case OpId::kClamp: return &clamp_fn<T>;
      default: return nullptr;
    }
  });
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

// The dtype operand i is read in: an instruction computes in its own dtype, except that
// comparisons compare in attrs.dtype, logical ops read truth values and where's condition is
// bool.
DType operand_dtype(const Instr& in, int i) {
  switch (in.op) {
    case OpId::kEq: case OpId::kNe: case OpId::kLt: case OpId::kLe: case OpId::kGt:
    case OpId::kGe:
      return in.attrs.dtype;
    case OpId::kLogicalAnd: case OpId::kLogicalOr: case OpId::kLogicalNot:
      return DType::kBool;
    case OpId::kWhere:
      return i == 0 ? DType::kBool : in.dtype;
    default:
      return in.dtype;
  }
}

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
                      D v = static_cast<D>(s[0]);
                      for (int64_t j = 0; j < run; ++j) dst[j] = v;
                    } else if (is == 1) {
                      for (int64_t j = 0; j < run; ++j) dst[j] = static_cast<D>(s[j]);
                    } else {
                      for (int64_t j = 0; j < run; ++j) dst[j] = static_cast<D>(s[j * is]);
                    }
                    dst += run;
                  });
}
LoadFn load_for(DType from, DType to) {
  return visit_dtype(from, [&](auto s) {
    return visit_dtype(to, [&](auto d) -> LoadFn {
      return &load_strided<decltype(s), decltype(d)>;
    });
  });
}

template <typename T> void fill_typed(void* p, double v, int64_t n) {
  T* o = static_cast<T*>(p);
  T x = static_cast<T>(v);
  for (int64_t i = 0; i < n; ++i) o[i] = x;
}
void fill(void* p, DType t, double v, int64_t n) {
  visit_dtype(t, [&](auto z) { fill_typed<decltype(z)>(p, v, n); });
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
  };

  Program(const Plan& plan, const std::vector<int32_t>& instrs,
          const std::vector<int32_t>& materialize) {
    shape_ = plan.instrs[instrs.back()].shape;
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
      st.fn = op_fn(in.op, operand_dtype(in, in.op == OpId::kWhere ? 1 : 0));
      if (!st.fn || in.in.size() > 3 || !is_elementwise(in.op))
        error_ = absl::StrFormat("cpu backend: %s is not an elementwise op", op_name(in.op));
      steps_.push_back(st);
      internal[in.out] = st.out;
      for (int32_t m : materialize)
        if (m == in.out) {
          vals_[st.out].out = static_cast<int>(outs_.size());
          outs_.push_back({in.out, st.out});
        }
    }
    allocate_registers();
  }

  absl::Status run(Env& env) const override {
    if (!error_.empty()) return absl::InternalError(error_);
    const int64_t n = numel(shape_);
    std::vector<DeviceData> outs;
    for (const Out& o : outs_) outs.push_back(env.alloc(shape_, vals_[o.val].dtype));
    if (n > 0) {
      // Bind this run's layouts, then coalesce the loop space over all operands.
      Shape geo = shape_;
      std::vector<Strides> st(exts_.size() + 1);
      std::vector<const DeviceData*> data(exts_.size());
      for (size_t e = 0; e < exts_.size(); ++e) {
        data[e] = &env.get(exts_[e].slot);
        st[e] = broadcast_strides(data[e]->layout.shape, data[e]->layout.strides, shape_);
      }
      st.back() = contiguous_strides(shape_);
      std::vector<Strides*> sp;
      for (auto& s : st) sp.push_back(&s);
      coalesce(geo, sp);
      const Strides& lin = st.back();
      std::vector<Bound> bound(exts_.size());
      for (size_t e = 0; e < exts_.size(); ++e) {
        Bound& b = bound[e];
        b.args = {ptr(*data[e]), geo.data(), st[e].data(), static_cast<int>(geo.size())};
        b.linear = st[e] == lin;
        b.direct = b.linear && data[e]->dtype == exts_[e].dtype;
        b.src_size = dtype_size(data[e]->dtype);
        b.load = load_for(data[e]->dtype, exts_[e].dtype);
        b.conv = conv_for(data[e]->dtype, exts_[e].dtype);
      }
      std::vector<double> cv(consts_.size());
      for (size_t c = 0; c < consts_.size(); ++c) cv[c] = env.scalar(consts_[c].slot);
      auto chunk = [&](int64_t b, int64_t e) { run_chunk(b, e, bound, cv, outs); };
      if (n >= kParallelThreshold) parallel_for(n, kTile * 8, chunk);
      else chunk(0, n);
    }
    for (size_t o = 0; o < outs_.size(); ++o) env.set(outs_[o].slot, std::move(outs[o]));
    return absl::OkStatus();
  }

 private:
  struct Bound {
    LoadArgs args;
    bool linear = false, direct = false;
    size_t src_size = 0;
    LoadFn load = nullptr;
    ConvFn conv = nullptr;
  };

  void run_chunk(int64_t begin, int64_t end, const std::vector<Bound>& bound,
                 const std::vector<double>& cv, const std::vector<DeviceData>& outs) const {
    char* regs = scratch(static_cast<size_t>(num_regs_) * kRegBytes);
    void* p[256];
    std::vector<void*> heap;
    void** ptrs = p;
    if (vals_.size() > 256) {
      heap.resize(vals_.size());
      ptrs = heap.data();
    }
    for (size_t v = 0; v < vals_.size(); ++v)
      ptrs[v] = vals_[v].reg >= 0 ? regs + vals_[v].reg * kRegBytes : nullptr;
    for (size_t c = 0; c < consts_.size(); ++c) {
      const Val& v = vals_[consts_[c].val];
      fill(ptrs[consts_[c].val], v.dtype, cv[c], kTile);
    }
    for (int64_t t = begin; t < end; t += kTile) {
      const int64_t n = std::min(kTile, end - t);
      for (size_t o = 0; o < outs_.size(); ++o)
        ptrs[outs_[o].val] = ptr(outs[o]) + t * dtype_size(outs[o].dtype);
      for (const Step& s : steps_) {
        switch (s.kind) {
          case Kind::kLoad: {
            const Bound& b = bound[s.ext];
            const char* src = b.args.base + t * b.src_size;
            if (b.direct) ptrs[s.out] = const_cast<char*>(src);
            else if (b.linear) b.conv(ptrs[s.out], src, n);
            else b.load(b.args, t, n, ptrs[s.out]);
            break;
          }
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
  }

  // Linear scan over the steps: a value holds a register from its defining step to its last
  // use. Constants keep theirs for the whole chunk (filled once); outputs need none.
  void allocate_registers() {
    std::vector<int> last(vals_.size(), -1);
    for (size_t s = 0; s < steps_.size(); ++s)
      for (int i : steps_[s].in)
        if (i >= 0) last[i] = static_cast<int>(s);
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
      if (out.out < 0) out.reg = take();  // loads may turn direct at run time; harmless
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
  bool is_const(int v) const {
    for (const Const& c : consts_)
      if (c.val == v) return true;
    return false;
  }

  Shape shape_;
  std::vector<Val> vals_;
  std::vector<Ext> exts_;
  std::vector<Const> consts_;
  std::vector<Out> outs_;
  std::vector<Step> steps_;
  int num_regs_ = 0;
  std::string error_;
};

}  // namespace

std::unique_ptr<ElementwiseProgram> compile_elementwise(const Plan& plan,
                                                        const std::vector<int32_t>& instrs,
                                                        const std::vector<int32_t>& materialize) {
  return std::make_unique<Program>(plan, instrs, materialize);
}

}  // namespace sloth::cpu
