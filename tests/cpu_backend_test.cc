// The CPU backend against hand-computed values: plans are built here instruction by
// instruction (shapes and attrs come from the op table's rules, as the scheduler would make
// them) and run through the registered backend.
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/op_attrs.h"
#include "core/op_table.h"
#include "core/storage.h"
#include "gtest/gtest.h"
#include "lazy/backend.h"

namespace sloth::lazy {
namespace {

using F = float;

template <typename T>
DeviceData make(const Shape& shape, const std::vector<T>& v) {
  DeviceData d = allocate_data(cpu_allocator(), shape, DTypeOf<T>::value);
  EXPECT_EQ(static_cast<int64_t>(v.size()), d.numel());
  for (size_t i = 0; i < v.size(); ++i) d.data<T>()[i] = v[i];
  return d;
}
template <typename T>
std::vector<T> iota_vec(int64_t n, double start = 0, double step = 1) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + i * step);
  return v;
}
// Reads any view in row-major order (independent of the backend's strided code).
template <typename T>
std::vector<T> values(const DeviceData& d) {
  EXPECT_EQ(d.dtype, DTypeOf<T>::value);
  std::vector<T> out;
  const Shape& s = d.layout.shape;
  int64_t n = d.numel();
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < s.size(); ++k) off += idx[k] * d.layout.strides[k];
    out.push_back(d.data<T>()[off]);
    for (int k = static_cast<int>(s.size()) - 1; k >= 0; --k) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}
// A transposed view of a fresh [cols, rows] buffer holding `rowmajor` ([rows, cols]).
template <typename T>
DeviceData transposed(int64_t rows, int64_t cols, const std::vector<T>& rowmajor) {
  std::vector<T> t(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = rowmajor[i * cols + j];
  DeviceData d = make<T>({cols, rows}, t);
  d.layout.shape = {rows, cols};
  d.layout.strides = {1, rows};
  return d;
}

struct Builder {
  Plan p;
  int input(DType t, Shape s) {
    p.input_strides.push_back(contiguous_strides(s));
    p.slots.push_back({SlotKind::kInput, t, p.num_inputs++, s});
    return static_cast<int>(p.slots.size()) - 1;
  }
  int scalar(DType t) {
    p.slots.push_back({SlotKind::kScalar, t, p.num_scalars++, {}});
    return static_cast<int>(p.slots.size()) - 1;
  }
  // Runs the op's rule (which normalizes attrs) and appends the instruction.
  int op(OpId op, std::vector<int> in, Attrs a = {}) {
    std::vector<TensorMeta> metas;
    std::vector<Shape> shapes;  // TensorMeta points at a Shape; slots hold Dims
    shapes.reserve(in.size());
    for (int s : in) shapes.push_back(p.slots[s].shape.to_shape());
    for (int s : in)
      metas.push_back({&shapes[metas.size()], p.slots[s].dtype,
                       p.slots[s].kind == SlotKind::kScalar});
    OutputMeta out;
    absl::Status st = infer(op, metas, a, &out);
    EXPECT_TRUE(st.ok()) << st;
    p.slots.push_back({SlotKind::kValue, out.dtype, 0, out.shape});
    int slot = static_cast<int>(p.slots.size()) - 1;
    Instr ins{op, out.dtype, out.shape, a, {}, slot};
    for (int s : in) ins.in.push_back(s);
    p.instrs.push_back(ins);
    return slot;
  }
  int instr_of(int slot) const {
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (p.instrs[i].out == slot) return static_cast<int>(i);
    return -1;
  }
  void kernel(KernelKind kind, std::vector<int> slots, std::vector<int> outputs) {
    Kernel k;
    k.kind = kind;
    for (int s : slots) k.instrs.push_back(instr_of(s));
    k.outputs.assign(outputs.begin(), outputs.end());
    p.kernels.push_back(k);
  }
  // One kernel per instruction not yet in a kernel, of its natural kind.
  void auto_kernels() {
    std::vector<bool> used(p.instrs.size());
    for (auto& k : p.kernels)
      for (int i : k.instrs) used[i] = true;
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      if (used[i]) continue;
      KernelKind kind = KernelKind::kOther;
      switch (op_info(p.instrs[i].op).category) {
        case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
          kind = KernelKind::kElementwise; break;
        case OpCategory::Reduce: kind = KernelKind::kReduce; break;
        case OpCategory::Matmul: kind = KernelKind::kMatmul; break;
        case OpCategory::View: kind = KernelKind::kView; break;
        default: break;
      }
      p.kernels.push_back({kind, {static_cast<int32_t>(i)}, {p.instrs[i].out}});
    }
  }
  std::vector<DeviceData> run(std::vector<int> outputs, std::vector<DeviceData> inputs,
                              std::vector<double> scalars = {}, RunStats* stats = nullptr,
                              absl::Status* status = nullptr) {
    if (p.kernels.empty()) auto_kernels();
    p.outputs.assign(outputs.begin(), outputs.end());
    p.free_after.assign(p.kernels.size(), {});
    Backend* be = backend_for(Device::cpu());
    EXPECT_NE(be, nullptr);
    auto exe = be->compile(p);
    std::vector<DeviceData> out;
    RunStats local;
    absl::Status st = exe->run(inputs, scalars, &out, stats ? stats : &local);
    if (status) *status = st;
    else EXPECT_TRUE(st.ok()) << st;
    return out;
  }
};

Attrs dims_attr(std::vector<int64_t> d, bool keep = false) {
  return ReduceAttrs{.dims = attr_dims(d), .keepdim = keep};
}
Attrs factory(Shape s, DType t) {
  Attrs a;
  a.dims.assign(s.begin(), s.end());
  a.dtype = t;
  return a;
}

TEST(CpuBackend, IsRegistered) { EXPECT_TRUE(has_backend(DeviceType::kCPU)); }

// ---- elementwise -----------------------------------------------------------------------------

TEST(CpuElementwise, BroadcastMixedDtypes) {
  Builder b;
  int x = b.input(kFloat32, {2, 3}), y = b.input(kInt32, {3}), z = b.input(kInt64, {2, 1});
  int s = b.op(OpId::kAdd, {x, y});
  int m = b.op(OpId::kMul, {y, z});  // int32 * int64 -> int64, [2, 3]
  auto out = b.run({s, m}, {make<F>({2, 3}, {0.5, 1.5, 2.5, 3.5, 4.5, 5.5}),
                            make<int32_t>({3}, {1, 2, 3}), make<int64_t>({2, 1}, {10, -1})});
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{1.5, 3.5, 5.5, 4.5, 6.5, 8.5}));
  EXPECT_EQ(out[1].dtype, kInt64);
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{10, 20, 30, -1, -2, -3}));
}

TEST(CpuElementwise, FusedChainStridedInputAndScalar) {
  // One kernel: t = relu(xT * s + bias); mask = t > s; y = where(mask, t, -1). xT is a
  // transposed view, s a bound float scalar, bias int32 broadcast along rows. Only t and y
  // are outputs: the products and the mask must stay in registers.
  const int64_t R = 3, C = 4;
  std::vector<F> xv = iota_vec<F>(R * C, -5, 1);  // [R, C] row-major
  Builder b;
  int x = b.input(kFloat32, {R, C}), bias = b.input(kInt32, {C}), s = b.scalar(kFloat32);
  int neg1 = b.scalar(kFloat32);
  int mul = b.op(OpId::kMul, {x, s});
  int add = b.op(OpId::kAdd, {mul, bias});
  int t = b.op(OpId::kRelu, {add});
  int mask = b.op(OpId::kGt, {t, s});
  int y = b.op(OpId::kWhere, {mask, t, neg1});
  b.kernel(KernelKind::kElementwise, {mul, add, t, mask, y}, {t, y});
  RunStats stats;
  auto out = b.run({t, y}, {transposed<F>(R, C, xv), make<int32_t>({C}, {1, -2, 3, 0})},
                   {2.0, -1.0}, &stats);
  std::vector<F> te, ye;
  int bv[4] = {1, -2, 3, 0};
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      F v = std::max<F>(xv[i * C + j] * 2 + bv[j], 0);
      te.push_back(v);
      ye.push_back(v > 2 ? v : -1);
    }
  EXPECT_EQ(values<F>(out[0]), te);
  EXPECT_EQ(values<F>(out[1]), ye);
  EXPECT_EQ(stats.kernels_launched, 1);
  EXPECT_EQ(stats.bytes_allocated, 2 * R * C * 4);  // the two outputs, nothing else
}

TEST(CpuElementwise, LargeFusedChainMatchesNaive) {
  // Big enough for several tiles and threads, with a broadcast column and a strided input.
  const int64_t R = 300, C = 257;
  std::vector<F> av = iota_vec<F>(R * C, -1, 1e-4), cv = iota_vec<F>(R, 3, -0.01);
  std::vector<double> dv = iota_vec<double>(R * C, 0.5, 1e-3);
  Builder b;
  int a = b.input(kFloat32, {R, C}), c = b.input(kFloat32, {R, 1}), d = b.input(kFloat64, {R, C});
  int e1 = b.op(OpId::kMul, {a, c});
  int e2 = b.op(OpId::kSub, {e1, d});  // -> float64
  int e3 = b.op(OpId::kTanh, {e2});
  int e4 = b.op(OpId::kCast, {e3}, [] { Attrs x; x.dtype = kFloat32; return x; }());
  b.kernel(KernelKind::kElementwise, {e1, e2, e3, e4}, {e4});
  auto out = b.run({e4}, {transposed<F>(R, C, av), make<F>({R, 1}, cv), make<double>({R, C}, dv)});
  auto got = values<F>(out[0]);
  ASSERT_EQ(got.size(), static_cast<size_t>(R * C));
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float want = static_cast<float>(std::tanh(static_cast<double>(av[i * C + j] * cv[i]) - dv[i * C + j]));
      ASSERT_FLOAT_EQ(got[i * C + j], want) << i << "," << j;
    }
}

TEST(CpuElementwise, OpSemantics) {
  Builder b;
  const float nan = std::nanf("");
  int x = b.input(kFloat32, {6}), y = b.input(kFloat32, {6}), i = b.input(kInt32, {6});
  int bo = b.input(kBool, {6});
  Attrs to_bool; to_bool.dtype = kBool;
  Attrs to_int; to_int.dtype = kInt32;
  int round = b.op(OpId::kRound, {x});
  int sign = b.op(OpId::kSign, {x});
  int cb = b.op(OpId::kCast, {x}, to_bool);
  int ci = b.op(OpId::kCast, {x}, to_int);
  int mx = b.op(OpId::kMaximum, {x, y});
  int mn = b.op(OpId::kMinimum, {x, y});
  int gelu = b.op(OpId::kGelu, {x});
  int silu = b.op(OpId::kSilu, {x});
  int div = b.op(OpId::kDiv, {i, i});          // int / int -> float32 true division
  int pw = b.op(OpId::kPow, {i, i});           // integer power
  int relu_i = b.op(OpId::kRelu, {i});
  int addb = b.op(OpId::kAdd, {bo, bo});       // logical or
  int mulb = b.op(OpId::kMul, {bo, cb});       // logical and
  int lt = b.op(OpId::kLt, {i, x});            // compared in float32
  int cl = b.op(OpId::kClamp, {x, y, i});      // lo = y, hi = i (float)
  int nt = b.op(OpId::kLogicalNot, {i});
  int sq = b.op(OpId::kSquare, {i});
  auto out = b.run({round, sign, cb, ci, mx, mn, gelu, silu, div, pw, relu_i, addb, mulb, lt, cl,
                    nt, sq},
                   {make<F>({6}, {0.5, 1.5, 2.5, -2.5, 0.0, nan}),
                    make<F>({6}, {1, 1, nan, -3, -0.5, 0}),
                    make<int32_t>({6}, {-2, 3, 0, 2, 1, -1}),
                    make<bool>({6}, {true, false, true, false, true, false})});
  auto r = values<F>(out[0]);
  EXPECT_EQ(r[0], 0); EXPECT_EQ(r[1], 2); EXPECT_EQ(r[2], 2); EXPECT_EQ(r[3], -2);
  auto sg = values<F>(out[1]);
  EXPECT_EQ(sg[0], 1); EXPECT_EQ(sg[3], -1); EXPECT_EQ(sg[4], 0);
  EXPECT_EQ(values<bool>(out[2]), (std::vector<bool>{true, true, true, true, false, true}));
  EXPECT_EQ(values<int32_t>(out[3])[3], -2);
  auto mxv = values<F>(out[4]), mnv = values<F>(out[5]);
  EXPECT_EQ(mxv[0], 1); EXPECT_TRUE(std::isnan(mxv[2])); EXPECT_TRUE(std::isnan(mxv[5]));
  EXPECT_EQ(mnv[0], 0.5); EXPECT_TRUE(std::isnan(mnv[2])); EXPECT_EQ(mnv[3], -3);
  EXPECT_NEAR(values<F>(out[6])[1], 0.5 * 1.5 * (1 + std::erf(1.5 / std::sqrt(2.0))), 1e-6);
  EXPECT_NEAR(values<F>(out[7])[3], -2.5 / (1 + std::exp(2.5)), 1e-6);
  EXPECT_EQ(out[8].dtype, kFloat32);
  auto dv = values<F>(out[8]);
  EXPECT_EQ(dv[0], 1); EXPECT_TRUE(std::isnan(dv[2]));
  EXPECT_EQ(values<int32_t>(out[9]), (std::vector<int32_t>{0, 27, 1, 4, 1, -1}));
  EXPECT_EQ(values<int32_t>(out[10]), (std::vector<int32_t>{0, 3, 0, 2, 1, 0}));
  EXPECT_EQ(values<bool>(out[11]), (std::vector<bool>{true, false, true, false, true, false}));
  EXPECT_EQ(values<bool>(out[12]), (std::vector<bool>{true, false, true, false, false, false}));
  EXPECT_EQ(values<bool>(out[13]), (std::vector<bool>{true, false, true, false, false, false}));
  auto clv = values<F>(out[14]);
  EXPECT_EQ(clv[0], -2); EXPECT_EQ(clv[1], 1.5); EXPECT_TRUE(std::isnan(clv[2]));
  EXPECT_EQ(clv[3], -2.5); EXPECT_EQ(clv[4], 0); EXPECT_TRUE(std::isnan(clv[5]));
  EXPECT_EQ(values<bool>(out[15]), (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_EQ(values<int32_t>(out[16]), (std::vector<int32_t>{4, 9, 0, 4, 1, 1}));
}

// ---- reductions ------------------------------------------------------------------------------

TEST(CpuReduce, SumMultipleDimsKeepdim) {
  Builder b;
  int x = b.input(kFloat32, {2, 3, 4});
  int s = b.op(OpId::kSum, {x}, dims_attr({0, 2}, true));
  int s2 = b.op(OpId::kSum, {x}, dims_attr({1}));
  int all = b.op(OpId::kSum, {x}, dims_attr({}));
  auto out = b.run({s, s2, all}, {make<F>({2, 3, 4}, iota_vec<F>(24))});
  EXPECT_EQ(out[0].shape(), (Shape{1, 3, 1}));
  // sum over i, k of (12 i + 4 j + k) = 2*(6) + 4*... : direct
  std::vector<F> want(3, 0), want2(8, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        want[j] += 12 * i + 4 * j + k;
        want2[i * 4 + k] += 12 * i + 4 * j + k;
      }
  EXPECT_EQ(values<F>(out[0]), want);
  EXPECT_EQ(out[1].shape(), (Shape{2, 4}));
  EXPECT_EQ(values<F>(out[1]), want2);
  EXPECT_EQ(values<F>(out[2]), std::vector<F>{276});
}

TEST(CpuReduce, IntBoolProdAmaxAminArg) {
  const float nan = std::nanf("");
  Builder b;
  int i = b.input(kInt32, {2, 3}), bo = b.input(kBool, {4}), f = b.input(kFloat32, {2, 4});
  int si = b.op(OpId::kSum, {i}, dims_attr({1}));
  int sb = b.op(OpId::kSum, {bo}, dims_attr({}));
  int pr = b.op(OpId::kProd, {i}, dims_attr({0}, true));
  int amax = b.op(OpId::kAmax, {f}, dims_attr({1}));
  int amin = b.op(OpId::kAmin, {f}, dims_attr({0}));
  int argmax = b.op(OpId::kArgmax, {f}, ArgReduceAttrs{.dim = 1});
  int argmin = b.op(OpId::kArgmin, {f}, ArgReduceAttrs{.dim = 1, .keepdim = true});
  auto out = b.run({si, sb, pr, amax, amin, argmax, argmin},
                   {make<int32_t>({2, 3}, {1, 2, 3, -4, 5, 6}),
                    make<bool>({4}, {true, false, true, true}),
                    make<F>({2, 4}, {1, 7, 7, -2, 3, nan, 9, -5})});
  EXPECT_EQ(out[0].dtype, kInt64);
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(values<int64_t>(out[1]), std::vector<int64_t>{3});
  EXPECT_EQ(out[2].shape(), (Shape{1, 3}));
  EXPECT_EQ(values<int64_t>(out[2]), (std::vector<int64_t>{-4, 10, 18}));
  auto mx = values<F>(out[3]);
  EXPECT_EQ(mx[0], 7); EXPECT_TRUE(std::isnan(mx[1]));
  auto mn = values<F>(out[4]);
  EXPECT_EQ(mn[0], 1); EXPECT_TRUE(std::isnan(mn[1])); EXPECT_EQ(mn[2], 7); EXPECT_EQ(mn[3], -5);
  EXPECT_EQ(values<int64_t>(out[5]), (std::vector<int64_t>{1, 1}));  // first max; NaN wins
  EXPECT_EQ(out[6].shape(), (Shape{2, 1}));
  EXPECT_EQ(values<int64_t>(out[6]), (std::vector<int64_t>{3, 1}));
}

// Argmax/argmin over a dim that is not the last (a pooling window's dim of [N, C, kk, L]): the
// column path compares whole rows. First extreme wins, the first NaN wins, across a row
// longer than one block (300 > 256), against a naive loop.
TEST(CpuReduce, ArgOverMiddleDimMatchesNaive) {
  const int64_t A = 3, K = 5, L = 300;
  std::vector<F> v(A * K * L);
  for (int64_t e = 0; e < A * K * L; ++e) v[e] = static_cast<F>((e * 7919) % 7) - 3;  // ties
  v[1 * K * L + 2 * L + 17] = std::nanf("");
  v[1 * K * L + 4 * L + 17] = std::nanf("");
  v[2 * K * L + 0 * L + 299] = std::nanf("");
  Builder b;
  int x = b.input(kFloat32, {A, K, L});
  int amx = b.op(OpId::kArgmax, {x}, ArgReduceAttrs{.dim = 1});
  int amn = b.op(OpId::kArgmin, {x}, ArgReduceAttrs{.dim = 1, .keepdim = true});
  auto out = b.run({amx, amn}, {make<F>({A, K, L}, v)});
  EXPECT_EQ(out[1].shape(), (Shape{A, 1, L}));
  std::vector<int64_t> want_max(A * L), want_min(A * L);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t l = 0; l < L; ++l) {
      int64_t bx = 0, bn = 0;
      for (int64_t k = 0; k < K; ++k) {
        const F cur = v[a * K * L + k * L + l];
        if (std::isnan(cur)) { bx = bn = k; break; }
        if (cur > v[a * K * L + bx * L + l]) bx = k;
        if (cur < v[a * K * L + bn * L + l]) bn = k;
      }
      want_max[a * L + l] = bx;
      want_min[a * L + l] = bn;
    }
  EXPECT_EQ(values<int64_t>(out[0]), want_max);
  EXPECT_EQ(values<int64_t>(out[1]), want_min);
  EXPECT_EQ(want_max[1 * L + 17], 2);  // the first NaN
  EXPECT_EQ(want_max[2 * L + 299], 0);
}

TEST(CpuReduce, LargeRowColumnAndStridedMatchNaive) {
  const int64_t R = 1000, C = 37;
  std::vector<F> v(R * C);
  for (int64_t k = 0; k < R * C; ++k) v[k] = static_cast<F>((k * 7919) % 1000) / 100.0f - 5;
  Builder b;
  int x = b.input(kFloat32, {R, C}), xt = b.input(kFloat32, {C, R});
  int col = b.op(OpId::kSum, {x}, dims_attr({0}));      // column reduction
  int row = b.op(OpId::kSum, {x}, dims_attr({1}));      // contiguous rows
  int tsum = b.op(OpId::kSum, {xt}, dims_attr({1}));    // transposed view: strided rows
  int all = b.op(OpId::kSum, {x}, dims_attr({}));
  int mx = b.op(OpId::kAmax, {xt}, dims_attr({0}));
  DeviceData xtd = make<F>({R, C}, v);
  xtd.layout.shape = {C, R};
  xtd.layout.strides = {1, C};
  auto out = b.run({col, row, tsum, all, mx}, {make<F>({R, C}, v), xtd});
  std::vector<double> cs(C, 0), rs(R, 0);
  std::vector<F> rm(R, -1e30f);
  double tot = 0;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      cs[j] += v[i * C + j];
      rs[i] += v[i * C + j];
      rm[i] = std::max(rm[i], v[i * C + j]);
      tot += v[i * C + j];
    }
  auto c = values<F>(out[0]), r = values<F>(out[1]), t = values<F>(out[2]), m = values<F>(out[4]);
  for (int64_t j = 0; j < C; ++j) {
    EXPECT_NEAR(c[j], cs[j], 1e-3);
    EXPECT_NEAR(t[j], cs[j], 1e-3);
  }
  for (int64_t i = 0; i < R; ++i) {
    EXPECT_NEAR(r[i], rs[i], 1e-3);
    EXPECT_EQ(m[i], rm[i]);
  }
  EXPECT_NEAR(values<F>(out[3])[0], tot, 1e-2);
}

TEST(CpuReduce, PrologueAndEpilogue) {
  // sqrt(sum(x * x, dim 1)) as one kReduce kernel.
  Builder b;
  int x = b.input(kFloat32, {2, 3});
  int sq = b.op(OpId::kMul, {x, x});
  int s = b.op(OpId::kSum, {sq}, dims_attr({1}));
  int r = b.op(OpId::kSqrt, {s});
  b.kernel(KernelKind::kReduce, {sq, s, r}, {r});
  auto out = b.run({r}, {make<F>({2, 3}, {1, 2, 2, 0, 3, 4})});
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{3, 5}));
}

// ---- matmul -----------------------------------------------------------------------------------

template <typename T>
std::vector<T> naive_mm(const std::vector<T>& a, const std::vector<T>& b, int64_t B, int64_t m,
                        int64_t k, int64_t n, bool a_batched, bool b_batched) {
  std::vector<T> c(B * m * n, 0);
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += a[(a_batched ? z * m * k : 0) + i * k + p] * b[(b_batched ? z * k * n : 0) + p * n + j];
        c[z * m * n + i * n + j] = acc;
      }
  return c;
}

void expect_near(const std::vector<F>& got, const std::vector<F>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
}

TEST(CpuMatmul, TwoDBatchedAndOneD) {
  auto a = iota_vec<F>(2 * 3 * 4, -3, 0.25), b2 = iota_vec<F>(4 * 5, 1, -0.5);
  auto bb = iota_vec<F>(2 * 4 * 5, 0.5, 0.1);
  Builder b;
  int A2 = b.input(kFloat32, {3, 4}), B2 = b.input(kFloat32, {4, 5});
  int A3 = b.input(kFloat32, {2, 3, 4}), B3 = b.input(kFloat32, {2, 4, 5});
  int v4 = b.input(kFloat32, {4});
  int mm = b.op(OpId::kMatmul, {A2, B2});
  int fold = b.op(OpId::kMatmul, {A3, B2});   // shared rhs: batch folded into rows
  int bat = b.op(OpId::kMatmul, {A3, B3});
  int bcast = b.op(OpId::kMatmul, {A2, B3});  // lhs broadcast over the batch
  int vm = b.op(OpId::kMatmul, {v4, B2});     // [4] @ [4, 5] -> [5]
  int mv = b.op(OpId::kMatmul, {A2, v4});     // [3, 4] @ [4] -> [3]
  int vv = b.op(OpId::kMatmul, {v4, v4});     // dot -> []
  std::vector<F> a2(a.begin(), a.begin() + 12), v(b2.begin(), b2.begin() + 4);
  auto out = b.run({mm, fold, bat, bcast, vm, mv, vv},
                   {make<F>({3, 4}, a2), make<F>({4, 5}, b2), make<F>({2, 3, 4}, a),
                    make<F>({2, 4, 5}, bb), make<F>({4}, v)});
  expect_near(values<F>(out[0]), naive_mm(a2, b2, 1, 3, 4, 5, false, false));
  EXPECT_EQ(out[1].shape(), (Shape{2, 3, 5}));
  expect_near(values<F>(out[1]), naive_mm(a, b2, 2, 3, 4, 5, true, false));
  expect_near(values<F>(out[2]), naive_mm(a, bb, 2, 3, 4, 5, true, true));
  expect_near(values<F>(out[3]), naive_mm(a2, bb, 2, 3, 4, 5, false, true));
  EXPECT_EQ(out[4].shape(), (Shape{5}));
  expect_near(values<F>(out[4]), naive_mm(v, b2, 1, 1, 4, 5, false, false));
  EXPECT_EQ(out[5].shape(), (Shape{3}));
  expect_near(values<F>(out[5]), naive_mm(a2, v, 1, 3, 4, 1, false, false));
  EXPECT_EQ(out[6].shape(), Shape{});
  expect_near(values<F>(out[6]), naive_mm(v, v, 1, 1, 4, 1, false, false));
}

// A batch of many small products (a convolution's per-sample GEMMs): with more than one
// thread these run one whole GEMM per pool task with OpenBLAS held at one thread; each
// sample's product must land in its own slot.
TEST(CpuMatmul, ManySmallBatchedProductsMatchNaive) {
  const int64_t nb = 16, m = 7, k = 9, n = 11;
  auto a = iota_vec<F>(m * k, -1, 0.03), bb = iota_vec<F>(nb * k * n, 2, -0.01);
  Builder b;
  int A = b.input(kFloat32, {m, k}), B = b.input(kFloat32, {nb, k, n});
  int bcast = b.op(OpId::kMatmul, {A, B});
  auto out = b.run({bcast}, {make<F>({m, k}, a), make<F>({nb, k, n}, bb)});
  EXPECT_EQ(out[0].shape(), (Shape{nb, m, n}));
  expect_near(values<F>(out[0]), naive_mm(a, bb, nb, m, k, n, false, true));
}

// One GEMM large enough to be split across the pool (m*n*k >= 2^20): by rows when there are
// many, by columns when few; ragged edges (rows not a multiple of 8, columns not of 16).
TEST(CpuMatmul, LargeGemmSplitByRowsOrColumnsMatchesNaive) {
  struct Case { int64_t m, k, n; };
  for (Case c : {Case{101, 150, 77}, Case{5, 700, 333}}) {
    auto a = iota_vec<F>(c.m * c.k, -1, 0.0007), bb = iota_vec<F>(c.k * c.n, 0.5, -0.0003);
    Builder b;
    int A = b.input(kFloat32, {c.m, c.k}), B = b.input(kFloat32, {c.k, c.n});
    int mm = b.op(OpId::kMatmul, {A, B});
    auto out = b.run({mm}, {make<F>({c.m, c.k}, a), make<F>({c.k, c.n}, bb)});
    const auto got = values<F>(out[0]), want = naive_mm(a, bb, 1, c.m, c.k, c.n, false, false);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)  // float sums of k products: relative tolerance
      ASSERT_NEAR(got[i], want[i], 1e-3 + 1e-5 * std::abs(want[i])) << c.m << " " << i;
  }
}

TEST(CpuMatmul, TransposedStridedIntAndEpilogue) {
  const int64_t m = 5, k = 7, n = 3;
  auto av = iota_vec<double>(m * k, -1, 0.3), bv = iota_vec<double>(k * n, 2, -0.2);
  // b as a non-BLAS layout: every other column of a [k, 2n] buffer.
  std::vector<double> wide(k * 2 * n);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) wide[p * 2 * n + 2 * j] = bv[p * n + j];
  DeviceData bs = make<double>({k, 2 * n}, wide);
  bs.layout.shape = {k, n};
  bs.layout.strides = {2 * n, 2};
  Builder b;
  int A = b.input(kFloat64, {m, k}), B = b.input(kFloat64, {k, n});
  int bias = b.input(kFloat64, {n});
  int mm = b.op(OpId::kMatmul, {A, B});
  int add = b.op(OpId::kAdd, {mm, bias});
  int relu = b.op(OpId::kRelu, {add});
  b.kernel(KernelKind::kMatmul, {mm, add, relu}, {relu});
  Builder bi;
  int Ai = bi.input(kInt32, {2, 3}), Bi = bi.input(kInt32, {3, 2});
  int mi = bi.op(OpId::kMatmul, {Ai, Bi});
  auto out = b.run({relu}, {transposed<double>(m, k, av), bs, make<double>({n}, {0.5, -1, 2})});
  auto ref = naive_mm(av, bv, 1, m, k, n, false, false);
  double bb[3] = {0.5, -1, 2};
  auto got = values<double>(out[0]);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(got[i * n + j], std::max(ref[i * n + j] + bb[j], 0.0), 1e-9);
  auto outi = bi.run({mi}, {make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}),
                            transposed<int32_t>(3, 2, {1, -1, 0, 2, 3, 1})});
  EXPECT_EQ(values<int32_t>(outi[0]), (std::vector<int32_t>{10, 6, 22, 12}));
}

// ---- views ------------------------------------------------------------------------------------

TEST(CpuView, EveryViewOpSharesStorage) {
  Builder b;
  int x = b.input(kFloat32, {2, 3, 4});
  Attrs perm = dims_attr({2, 0, 1});
  int p = b.op(OpId::kPermute, {x}, perm);
  int r = b.op(OpId::kReshape, {x}, dims_attr({6, 4}));
  int sl = b.op(OpId::kSlice, {x}, SliceAttrs{.dim = 2, .start = 1, .end = 4, .step = 2});
  int se = b.op(OpId::kSelect, {x}, SelectAttrs{.dim = 1, .index = -1});
  int dg = b.op(OpId::kDiagonal, {x}, DiagonalAttrs{.offset = 1, .dim1 = 1, .dim2 = 2});
  int ex = b.op(OpId::kExpand, {se}, dims_attr({3, 2, 4}));
  const Attrs as = AsStridedAttrs{.size = {2, 2}, .stride = {5, 1}, .offset = 3};
  int ast = b.op(OpId::kAsStrided, {x}, as);
  DeviceData in = make<F>({2, 3, 4}, iota_vec<F>(24));
  auto out = b.run({p, r, sl, se, dg, ex, ast}, {in});
  for (auto& o : out) EXPECT_EQ(o.storage.get(), in.storage.get());
  EXPECT_EQ(out[0].shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(values<F>(out[0])[3], 12);  // out[a,b,c] = x[b,c,a]: [0,1,0] -> x[1,0,0]
  EXPECT_EQ(values<F>(out[0])[1], 4);   // [0,0,1] -> x[0,1,0]
  EXPECT_EQ(values<F>(out[1]), iota_vec<F>(24));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(values<F>(out[3]), (std::vector<F>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(values<F>(out[4]), (std::vector<F>{1, 6, 11, 13, 18, 23}));  // offset 1 of dims 1,2
  EXPECT_EQ(out[5].shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(values<F>(out[5])[13], 21);
  EXPECT_EQ(values<F>(out[6]), (std::vector<F>{3, 4, 8, 9}));
}

TEST(CpuView, NonViewableReshapeAndAsStridedCopy) {
  Builder b;
  int x = b.input(kFloat32, {2, 3});
  int r = b.op(OpId::kReshape, {x}, dims_attr({6}));
  const Attrs as = AsStridedAttrs{.size = {2}, .stride = {2}, .offset = 1};
  int ast = b.op(OpId::kAsStrided, {x}, as);
  DeviceData t = transposed<F>(2, 3, {0, 1, 2, 3, 4, 5});
  auto out = b.run({r, ast}, {t});
  EXPECT_NE(out[0].storage.get(), t.storage.get());
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values<F>(out[1]), (std::vector<F>{1, 3}));  // of the contiguous copy
}

TEST(CpuView, OutputCanBeAnInput) {
  Builder b;
  int x = b.input(kFloat32, {2});
  DeviceData in = make<F>({2}, {1, 2});
  auto out = b.run({x}, {in});
  EXPECT_EQ(out[0].storage.get(), in.storage.get());
}

// ---- scatters ---------------------------------------------------------------------------------

TEST(CpuScatter, AllFour) {
  Builder b;
  int base = b.input(kFloat32, {3, 3});
  int s1 = b.input(kFloat32, {3, 1}), s2 = b.input(kFloat32, {3}), s3 = b.input(kFloat32, {3});
  int s4 = b.input(kFloat32, {2});
  int sl = b.op(OpId::kSliceScatter, {base, s1}, SliceAttrs{.dim = 1, .start = 1, .end = 3, .step = 2});
  int se = b.op(OpId::kSelectScatter, {base, s2}, SelectAttrs{.dim = 0, .index = 2});
  int dg = b.op(OpId::kDiagonalScatter, {base, s3}, DiagonalAttrs{.offset = 0, .dim1 = 0, .dim2 = 1});
  const Attrs as = AsStridedAttrs{.size = {2}, .stride = {4}, .offset = 1};
  int ast = b.op(OpId::kAsStridedScatter, {base, s4}, as);
  auto out = b.run({sl, se, dg, ast},
                   {make<F>({3, 3}, iota_vec<F>(9)), make<F>({3, 1}, {-1, -2, -3}),
                    make<F>({3}, {-1, -2, -3}), make<F>({3}, {-1, -2, -3}), make<F>({2}, {-7, -8})});
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{0, -1, 2, 3, -2, 5, 6, -3, 8}));
  EXPECT_EQ(values<F>(out[1]), (std::vector<F>{0, 1, 2, 3, 4, 5, -1, -2, -3}));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{-1, 1, 2, 3, -2, 5, 6, 7, -3}));
  EXPECT_EQ(values<F>(out[3]), (std::vector<F>{0, -7, 2, 3, 4, -8, 6, 7, 8}));
}

// ---- index ops --------------------------------------------------------------------------------

TEST(CpuIndex, SelectGatherScatterAddIndexAdd) {
  Builder b;
  int x = b.input(kFloat32, {3, 4}), i32 = b.input(kInt32, {2}), gi = b.input(kInt64, {2, 2});
  int src = b.input(kFloat32, {2, 2}), asrc = b.input(kFloat32, {3, 2});
  int is0 = b.op(OpId::kIndexSelect, {x, i32}, DimAttrs{.dim = 0});
  int is1 = b.op(OpId::kIndexSelect, {x, i32}, DimAttrs{.dim = 1});
  int g = b.op(OpId::kGather, {x, gi}, DimAttrs{.dim = 1});
  int sa = b.op(OpId::kScatterAdd, {x, gi, src}, DimAttrs{.dim = 1});
  int ia = b.op(OpId::kIndexAdd, {x, i32, asrc}, DimAttrs{.dim = 1});
  DeviceData xt = transposed<F>(3, 4, iota_vec<F>(12));  // strided input
  auto out = b.run({is0, is1, g, sa, ia},
                   {xt, make<int32_t>({2}, {2, 0}), make<int64_t>({2, 2}, {3, 3, 0, 1}),
                    make<F>({2, 2}, {1, 10, 100, 1000}), make<F>({3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(values<F>(out[1]), (std::vector<F>{2, 0, 6, 4, 10, 8}));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{3, 3, 4, 5}));
  // Duplicate index 3 in row 0 accumulates both.
  EXPECT_EQ(values<F>(out[3]), (std::vector<F>{0, 1, 2, 14, 104, 1005, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values<F>(out[4]), (std::vector<F>{2, 1, 3, 3, 8, 5, 9, 7, 14, 9, 15, 11}));
}

// Gather and scatter_add large enough to split across the pool (>= 32K positions), with
// duplicate indices, along the inner dim (split between rows) and the outer one (the indexed
// dim: an accumulation must not be split there), against naive loops. Integer-valued floats:
// sums are exact in any order.
TEST(CpuIndex, LargeGatherScatterAddMatchNaive) {
  const int64_t R = 300, K = 8, C = 150;  // x [R, C]; index [R, K] along 1, [K, C] along 0
  std::vector<F> x(R * C), src1(R * K), src0(K * C);
  for (int64_t e = 0; e < R * C; ++e) x[e] = static_cast<F>(e % 97);
  std::vector<int64_t> i1(R * K), i0(K * C);
  for (int64_t e = 0; e < R * K; ++e) { i1[e] = (e * 31) % C; src1[e] = static_cast<F>(e % 13); }
  for (int64_t e = 0; e < K * C; ++e) { i0[e] = (e * 7) % 5; src0[e] = static_cast<F>(e % 11); }
  // Repeat the columns so the along-1 walk has >= 32K positions: index [R, K*16].
  const int64_t K1 = K * 16;
  std::vector<int64_t> i1w(R * K1);
  std::vector<F> s1w(R * K1);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K1; ++k) {
      i1w[r * K1 + k] = i1[r * K + k % K];
      s1w[r * K1 + k] = src1[r * K + k % K] + static_cast<F>(k / K);
    }
  std::vector<int64_t> i0w(K * 40 * C);  // index [K*40, C] along 0
  std::vector<F> s0w(K * 40 * C);
  for (int64_t e = 0; e < K * 40 * C; ++e) { i0w[e] = i0[e % (K * C)]; s0w[e] = src0[e % (K * C)]; }
  Builder b;
  int X = b.input(kFloat32, {R, C}), I1 = b.input(kInt64, {R, K1}), S1 = b.input(kFloat32, {R, K1});
  int I0 = b.input(kInt64, {K * 40, C}), S0 = b.input(kFloat32, {K * 40, C});
  int g1 = b.op(OpId::kGather, {X, I1}, DimAttrs{.dim = 1});
  int sa1 = b.op(OpId::kScatterAdd, {X, I1, S1}, DimAttrs{.dim = 1});
  int g0 = b.op(OpId::kGather, {X, I0}, DimAttrs{.dim = 0});
  int sa0 = b.op(OpId::kScatterAdd, {X, I0, S0}, DimAttrs{.dim = 0});
  auto out = b.run({g1, sa1, g0, sa0},
                   {make<F>({R, C}, x), make<int64_t>({R, K1}, i1w), make<F>({R, K1}, s1w),
                    make<int64_t>({K * 40, C}, i0w), make<F>({K * 40, C}, s0w)});
  std::vector<F> wg1(R * K1), wsa1 = x, wg0(K * 40 * C), wsa0 = x;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K1; ++k) {
      wg1[r * K1 + k] = x[r * C + i1w[r * K1 + k]];
      wsa1[r * C + i1w[r * K1 + k]] += s1w[r * K1 + k];
    }
  for (int64_t r = 0; r < K * 40; ++r)
    for (int64_t c = 0; c < C; ++c) {
      wg0[r * C + c] = x[i0w[r * C + c] * C + c];
      wsa0[i0w[r * C + c] * C + c] += s0w[r * C + c];
    }
  EXPECT_EQ(values<F>(out[0]), wg1);
  EXPECT_EQ(values<F>(out[1]), wsa1);
  EXPECT_EQ(values<F>(out[2]), wg0);
  EXPECT_EQ(values<F>(out[3]), wsa0);
}

TEST(CpuIndex, IndexPutOneHotCatClone) {
  Builder b;
  int base = b.input(kFloat32, {4, 2}), idx = b.input(kInt64, {3}), vals = b.input(kFloat32, {2});
  int ids = b.input(kInt64, {3});
  int c0 = b.input(kFloat32, {2, 2}), c1 = b.input(kInt32, {2, 1});
  int ip = b.op(OpId::kIndexPut, {base, idx, vals});
  int oh = b.op(OpId::kOneHot, {ids}, OneHotAttrs{.num_classes = 4});
  int cat = b.op(OpId::kCat, {c0, c1, c0}, DimAttrs{.dim = -1});
  int cl = b.op(OpId::kClone, {c0});
  DeviceData c0t = transposed<F>(2, 2, {1, 2, 3, 4});
  auto out = b.run({ip, oh, cat, cl},
                   {make<F>({4, 2}, iota_vec<F>(8)), make<int64_t>({3}, {-1, 0, 3}),
                    make<F>({2}, {-5, -6}), make<int64_t>({3}, {2, 0, 3}), c0t,
                    make<int32_t>({2, 1}, {9, 8})});
  EXPECT_EQ(values<F>(out[0]), (std::vector<F>{-5, -6, 2, 3, 4, 5, -5, -6}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(out[2].shape(), (Shape{2, 5}));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{1, 2, 9, 1, 2, 3, 4, 8, 3, 4}));
  EXPECT_TRUE(out[3].is_contiguous());
  EXPECT_EQ(values<F>(out[3]), (std::vector<F>{1, 2, 3, 4}));
}

TEST(CpuIndex, IndexPutDuplicatesLastWins) {
  Builder b;
  int base = b.input(kInt64, {3}), idx = b.input(kInt32, {3}), vals = b.input(kInt64, {3});
  int ip = b.op(OpId::kIndexPut, {base, idx, vals});
  auto out = b.run({ip}, {make<int64_t>({3}, {0, 0, 0}), make<int32_t>({3}, {1, -2, 2}),
                          make<int64_t>({3}, {5, 6, 7})});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 6, 7}));
}

// The walks of the index primitives: whole slices per index along a middle dim (index_add,
// repeated indices accumulate), rows of a 2-D put (the last duplicate wins), and a broadcast
// (stride 0) index, one element per index.
TEST(CpuIndex, SliceWalksAndBroadcastIndex) {
  Builder b;
  int x = b.input(kFloat32, {2, 3, 2}), i = b.input(kInt32, {3});
  int src = b.input(kFloat32, {2, 3, 2});
  int base = b.input(kFloat32, {3, 2}), pi = b.input(kInt64, {3});
  int vals = b.input(kFloat32, {3, 2});
  int gx = b.input(kFloat32, {2, 3}), gi = b.input(kInt64, {2, 2});
  int ia = b.op(OpId::kIndexAdd, {x, i, src}, DimAttrs{.dim = 1});
  int ip = b.op(OpId::kIndexPut, {base, pi, vals});
  int g = b.op(OpId::kGather, {gx, gi}, DimAttrs{.dim = 1});
  std::vector<F> hundreds(12);
  for (int k = 0; k < 12; ++k) hundreds[k] = static_cast<F>(100 + k);
  DeviceData bcast = with_layout(make<int64_t>({1, 2}, {2, 0}), Layout{{2, 2}, {0, 1}, 0});
  auto out = b.run({ia, ip, g},
                   {make<F>({2, 3, 2}, iota_vec<F>(12)), make<int32_t>({3}, {2, 0, 2}),
                    make<F>({2, 3, 2}, hundreds), make<F>({3, 2}, {0, 0, 0, 0, 0, 0}),
                    make<int64_t>({3}, {1, 1, -1}), make<F>({3, 2}, {1, 2, 3, 4, 5, 6}),
                    make<F>({2, 3}, iota_vec<F>(6)), bcast});
  EXPECT_EQ(values<F>(out[0]),
            (std::vector<F>{102, 104, 2, 3, 208, 211, 114, 116, 8, 9, 226, 229}));
  EXPECT_EQ(values<F>(out[1]), (std::vector<F>{0, 0, 3, 4, 5, 6}));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{2, 0, 5, 3}));
}

TEST(CpuIndex, OutOfRangeIndexIsAnError) {
  Builder b;
  int x = b.input(kFloat32, {5, 2}), i = b.input(kInt64, {2});
  int s = b.op(OpId::kIndexSelect, {x, i}, DimAttrs{.dim = 0});
  absl::Status st;
  b.run({s}, {make<F>({5, 2}, iota_vec<F>(10)), make<int64_t>({2}, {1, 7})}, {}, nullptr, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("index_select: index 7 is out of range for dim 0 of size 5"),
            std::string::npos) << st;
  Builder g;
  int gx = g.input(kFloat32, {2, 2}), gi = g.input(kInt64, {2, 1});
  int gg = g.op(OpId::kGather, {gx, gi}, DimAttrs{.dim = 1});
  g.run({gg}, {make<F>({2, 2}, {1, 2, 3, 4}), make<int64_t>({2, 1}, {0, -1})}, {}, nullptr, &st);
  EXPECT_NE(std::string(st.message()).find("gather: index -1 is out of range for dim 1 of size 2"),
            std::string::npos) << st;
}

// ---- factories --------------------------------------------------------------------------------

TEST(CpuFactory, FullArangeLinspaceEye) {
  Builder b;
  int v = b.scalar(kFloat64), s0 = b.scalar(kInt64), s1 = b.scalar(kInt64);
  int f0 = b.scalar(kFloat64), f1 = b.scalar(kFloat64);
  int full = b.op(OpId::kFull, {v}, factory({2, 2}, kInt32));
  int ar = b.op(OpId::kArange, {s0, s1}, factory({4}, kInt64));
  int arf = b.op(OpId::kArange, {f0, f1}, factory({3}, kFloat32));
  int ls = b.op(OpId::kLinspace, {f0, f1}, factory({5}, kFloat64));
  int eye = b.op(OpId::kEye, {}, factory({2, 3}, kFloat32));
  auto out = b.run({full, ar, arf, ls, eye}, {}, {7.9, 10, -3, 0.5, 1.5});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{7, 7, 7, 7}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(values<F>(out[2]), (std::vector<F>{0.5, 2, 3.5}));
  EXPECT_EQ(values<double>(out[3]), (std::vector<double>{0.5, 0.75, 1, 1.25, 1.5}));
  EXPECT_EQ(values<F>(out[4]), (std::vector<F>{1, 0, 0, 0, 1, 0}));
}

TEST(CpuFactory, RandIsDeterministicPerSeedAndOffset) {
  const int64_t N = 100000;
  Builder b;
  int seed = b.scalar(kInt64), off = b.scalar(kInt64), off2 = b.scalar(kInt64);
  int r1 = b.op(OpId::kRand, {seed, off}, factory({N}, kFloat32));
  int r2 = b.op(OpId::kRand, {seed, off}, factory({N}, kFloat32));
  int r3 = b.op(OpId::kRand, {seed, off2}, factory({N}, kFloat32));
  int rn = b.op(OpId::kRandn, {seed, off}, factory({N}, kFloat64));
  int ri = b.op(OpId::kRandint, {seed, off}, RandintAttrs{.shape = {N}, .low = -3, .high = 5, .dtype = kInt64});
  auto out = b.run({r1, r2, r3, rn, ri}, {}, {42, 0, 1000});
  auto a = values<F>(out[0]), c = values<F>(out[1]), d = values<F>(out[2]);
  EXPECT_EQ(a, c);
  EXPECT_NE(a, d);
  EXPECT_EQ(a[1000], d[0]);  // element i is (seed, offset + i)
  double mean = std::accumulate(a.begin(), a.end(), 0.0) / N;
  EXPECT_NEAR(mean, 0.5, 0.01);
  for (F x : a) ASSERT_TRUE(x >= 0 && x < 1);
  auto n = values<double>(out[3]);
  double nm = std::accumulate(n.begin(), n.end(), 0.0) / N, var = 0;
  for (double x : n) var += (x - nm) * (x - nm);
  EXPECT_NEAR(nm, 0, 0.02);
  EXPECT_NEAR(var / N, 1, 0.03);
  for (int64_t x : values<int64_t>(out[4])) ASSERT_TRUE(x >= -3 && x < 5);
}

}  // namespace
}  // namespace sloth::lazy
