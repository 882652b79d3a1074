// Fusion: kernel counts of common programs (tinygrad's check_schedule style), the reasons the
// planner gives when it does not fuse, and fused results against the unfused plan.
#include <algorithm>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazy/fusion.h"
#include "lazy/graph.h"
#include "lazy/lowering.h"
#include "lazy/tensor_impl.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

struct KernelSummary {
  int total = 0, elementwise = 0, reduce = 0, matmul = 0, view = 0, other = 0;
};

KernelSummary kernels_of(const std::vector<Tensor>& ts) {
  std::string plan = dump_plan(ts);
  KernelSummary k;
  std::regex re("kernel [0-9]+ \\((\\w+)\\)");
  for (auto it = std::sregex_iterator(plan.begin(), plan.end(), re); it != std::sregex_iterator(); ++it) {
    std::string kind = (*it)[1];
    ++k.total;
    if (kind == "elementwise") ++k.elementwise;
    else if (kind == "reduce") ++k.reduce;
    else if (kind == "matmul") ++k.matmul;
    else if (kind == "view") ++k.view;
    else ++k.other;
  }
  return k;
}

// The plan with fusion on, and the "no" decisions it took.
lazy::Plan fused_plan(const std::vector<Tensor>& ts, std::vector<std::string>* reasons) {
  std::vector<lazy::NodePtr> roots;
  for (const Tensor& t : ts) roots.push_back(t.impl()->value());
  lazy::Graph g = lazy::build_graph(roots);
  lazy::Plan p = lazy::lower(g);
  lazy::fuse_kernels(p, reasons);
  return p;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

Tensor data(Shape shape) {
  Tensor t = randn(shape);
  sync({t});
  return t;
}

TEST(Fusion, ElementwiseChainIsOneKernel) {
  Tensor a = data({64, 32}), b = data({64, 32}), c = data({32}), d = data({64, 1});
  Tensor y = relu(a * b + c) * d - a / 2.0;  // broadcasts folded into indexing
  Tensor z = exp(sigmoid(y) + 1.0);
  KernelSummary k = kernels_of({z});
  EXPECT_EQ(k.total, 1) << dump_plan({z});
  EXPECT_EQ(k.elementwise, 1);
}

// ---- replay: an optimizer's update of a bias ----
// SGD with momentum on a bias: its gradient is a column sum reshaped to the bias's shape (a
// view kernel); the momentum decay computed before it still joins the update's kernel, so
// the update is one kernel (not one for buf * momentum and one for the rest).
TEST(Fusion, BiasUpdateAfterAViewOfAReductionIsOneKernel) {
  Tensor dy = data({16, 64}), buf = data({64}), p = data({64});
  Tensor g = sum(dy, {0}, true).reshape({64});
  Tensor nb = buf * 0.9 + g;
  Tensor np = p - nb * 0.01;
  KernelSummary k = kernels_of({nb, np});
  EXPECT_EQ(k.total, 3) << dump_plan({nb, np});
  EXPECT_EQ(k.elementwise, 1) << dump_plan({nb, np});
  EXPECT_EQ(k.reduce, 1);
  EXPECT_EQ(k.view, 1);
  // Values against the inputs.
  std::vector<float> vdy = dy.to_vector<float>(), vb = buf.to_vector<float>(), vp = p.to_vector<float>();
  std::vector<float> gnb = nb.to_vector<float>(), gnp = np.to_vector<float>();
  for (int j = 0; j < 64; ++j) {
    double gs = 0;
    for (int i = 0; i < 16; ++i) gs += vdy[i * 64 + j];
    const double b = vb[j] * 0.9f + gs;
    EXPECT_NEAR(gnb[j], b, 1e-5);
    EXPECT_NEAR(gnp[j], vp[j] - b * 0.01, 1e-5);
  }
}

TEST(Fusion, IndependentOperandChainsMerge) {
  // relu(a*b+c)*d - e/2: e/2 is a separate chain until sub joins both.
  Tensor a = data({1000}), b = data({1000}), c = data({1000}), d = data({1000}), e = data({1000});
  Tensor y = relu(a * b + c) * d - e / 2.0;
  EXPECT_EQ(kernels_of({y}).total, 1) << dump_plan({y});
}

TEST(Fusion, SoftmaxIsAtMostThreeKernels) {
  Tensor x = data({16, 10});
  Tensor y = softmax(x, 1);
  KernelSummary k = kernels_of({y});
  EXPECT_LE(k.total, 3) << dump_plan({y});
  EXPECT_EQ(k.reduce, 2) << dump_plan({y});
}

TEST(Fusion, LayerNormIsThreeKernels) {
  Tensor x = data({8, 64}), w = data({64}), b = data({64});
  Tensor y = layer_norm(x, {64}, w, b);
  KernelSummary k = kernels_of({y});
  EXPECT_LE(k.total - k.view, 3) << dump_plan({y});
}

TEST(Fusion, MlpLayerIsGemmWithEpilogue) {
  Tensor x = data({32, 64}), w = data({64, 16}), b = data({16});
  Tensor h = relu(matmul(x, w) + b);
  KernelSummary k = kernels_of({h});
  EXPECT_EQ(k.total, 1) << dump_plan({h});
  EXPECT_EQ(k.matmul, 1);
}

TEST(Fusion, LinearLayerIsGemmPlusAtMostOneKernel) {
  Tensor x = data({32, 64}), w = data({16, 64}), b = data({16});
  Tensor h = relu(linear(x, w, b));
  KernelSummary k = kernels_of({h});
  EXPECT_EQ(k.matmul, 1) << dump_plan({h});
  EXPECT_LE(k.total - k.view - k.matmul, 1) << dump_plan({h});
}

TEST(Fusion, ReductionAbsorbsPrologueAndEpilogue) {
  Tensor a = data({128, 256}), b = data({128, 256});
  Tensor y = sqrt(sum((a - b) * (a - b), {1}) + 1e-6);  // prologue - * ; epilogue + sqrt
  KernelSummary k = kernels_of({y});
  EXPECT_EQ(k.total, 1) << dump_plan({y});
  EXPECT_EQ(k.reduce, 1);
}

TEST(Fusion, MseLossIsOneKernel) {
  Tensor a = data({64, 10}), b = data({64, 10});
  Tensor l = mse_loss(a, b);
  EXPECT_EQ(kernels_of({l}).total, 1) << dump_plan({l});
}

TEST(FusionReasons, ReduceThenBroadcastBreaks) {
  Tensor x = data({8, 16});
  Tensor y = x - amax(x, {1}, true);
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({y}, &reasons);
  EXPECT_EQ(p.kernels.size(), 2u) << p.describe();
  std::string all = joined(reasons);
  EXPECT_NE(all.find("reduce-then-broadcast"), std::string::npos) << all;
  EXPECT_NE(all.find("[8, 1]"), std::string::npos) << all;
  EXPECT_NE(all.find("[8, 16]"), std::string::npos) << all;
}

TEST(FusionReasons, MatmulInputsBreak) {
  Tensor a = data({8, 16}), w = data({16, 4});
  Tensor y = matmul(relu(a), w);
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({y}, &reasons);
  EXPECT_EQ(p.kernels.size(), 2u) << p.describe();
  std::string all = joined(reasons);
  EXPECT_NE(all.find("matmul operands are read from memory by BLAS"), std::string::npos) << all;
}

TEST(FusionReasons, OneReductionPerKernel) {
  Tensor x = data({8, 16});
  Tensor y = sum(sum(x, {1}));
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({y}, &reasons);
  EXPECT_EQ(p.kernels.size(), 2u) << p.describe();
  EXPECT_NE(joined(reasons).find("already has a reduction"), std::string::npos) << joined(reasons);
}

TEST(FusionReasons, DifferentLoopShape) {
  Tensor a = data({16}), x = data({8, 16});
  Tensor y = x * exp(a);  // exp runs over [16], the mul over [8, 16]
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({y}, &reasons);
  EXPECT_EQ(p.kernels.size(), 2u) << p.describe();
  EXPECT_NE(joined(reasons).find("different loop shape"), std::string::npos) << joined(reasons);
}

TEST(Fusion, ValuesNeededOutsideAreKernelOutputs) {
  Tensor a = data({100}), b = data({100});
  Tensor t = a * b;      // used by the chain and returned
  Tensor y = relu(t) + 1.0;
  lazy::Plan p = fused_plan({t, y}, nullptr);
  ASSERT_EQ(p.kernels.size(), 1u) << p.describe();
  EXPECT_EQ(p.kernels[0].outputs.size(), 2u);
  sync({t, y});
  auto tv = t.to_vector<float>(), yv = y.to_vector<float>(), av = a.to_vector<float>(),
       bv = b.to_vector<float>();
  for (int i = 0; i < 100; ++i) {
    EXPECT_FLOAT_EQ(tv[i], av[i] * bv[i]);
    EXPECT_FLOAT_EQ(yv[i], std::max(av[i] * bv[i], 0.f) + 1.f);
  }
}

// Kernels of one form (x * 3 - y at several loop shapes, so one kernel each) share the CPU
// backend's program core, built once per form; each must still read its own operands and
// write its own outputs, and take over a dead operand's buffer only where it has one.
TEST(Fusion, KernelsOfOneFormKeepTheirOwnOperands) {
  std::vector<Tensor> xs, ys, outs;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(data({3 + i}));
    ys.push_back(data({3 + i}));
  }
  std::vector<std::vector<float>> xv, yv;
  for (int i = 0; i < 6; ++i) {
    xv.push_back(xs[i].to_vector<float>());
    yv.push_back(ys[i].to_vector<float>());
  }
  for (int i = 0; i < 6; ++i) outs.push_back(xs[i] * 3.0 - ys[i]);
  // One more of the form whose operand z nothing else holds: its output may take z's buffer.
  Tensor z = data({9}), w = data({9});
  const std::vector<float> zv = z.to_vector<float>(), wv = w.to_vector<float>();
  outs.push_back(z * 3.0 - w);
  z = Tensor();
  lazy::Plan p = fused_plan(outs, nullptr);
  EXPECT_EQ(p.kernels.size(), 7u) << p.describe();
  sync(outs);
  for (int i = 0; i < 6; ++i) {
    auto ov = outs[i].to_vector<float>();
    ASSERT_EQ(ov.size(), static_cast<size_t>(3 + i));
    for (int j = 0; j < 3 + i; ++j) EXPECT_FLOAT_EQ(ov[j], xv[i][j] * 3.f - yv[i][j]) << i << " " << j;
  }
  auto last = outs[6].to_vector<float>();
  ASSERT_EQ(last.size(), 9u);
  for (int j = 0; j < 9; ++j) EXPECT_FLOAT_EQ(last[j], zv[j] * 3.f - wv[j]) << j;
}

TEST(Fusion, FusedReductionsMatchDirectComputation) {
  const int64_t R = 37, C = 301;  // odd sizes: rows span tiles, tiles span rows
  Tensor x = data({R, C});
  Tensor s = sum(exp(x) * 2.0, {1});
  Tensor m = amax(x * x, {1}, true);
  Tensor all = sum(abs(x));
  auto xv = x.to_vector<float>();
  auto sv = s.to_vector<float>(), mv = m.to_vector<float>();
  double tot = 0;
  for (int64_t r = 0; r < R; ++r) {
    double acc = 0, mx = -1e30;
    for (int64_t c = 0; c < C; ++c) {
      float v = xv[r * C + c];
      acc += std::exp(v) * 2.0;
      mx = std::max<double>(mx, v * v);
      tot += std::fabs(v);
    }
    EXPECT_NEAR(sv[r], acc, 1e-4 * std::fabs(acc));
    EXPECT_NEAR(mv[r], mx, 1e-5 * std::fabs(mx));
  }
  EXPECT_NEAR(all.item<double>(), tot, 1e-4 * tot);
}

TEST(Fusion, LargeFusedReductionUsesThreadsCorrectly) {
  Tensor x = data({300, 1000});
  Tensor s = sum(x * x, {1});
  Tensor t = sum(x * 3.0);
  auto xv = x.to_vector<float>();
  auto sv = s.to_vector<float>();
  double tot = 0;
  for (int r = 0; r < 300; ++r) {
    double acc = 0;
    for (int c = 0; c < 1000; ++c) acc += double(xv[r * 1000 + c]) * xv[r * 1000 + c];
    EXPECT_NEAR(sv[r], acc, 1e-4 * acc);
    for (int c = 0; c < 1000; ++c) tot += 3.0 * xv[r * 1000 + c];
  }
  EXPECT_NEAR(t.item<double>(), tot, 1e-3 * std::max(1.0, std::fabs(tot)));
}

TEST(Fusion, MatmulEpilogueInPlaceIsCorrect) {
  Tensor x = data({33, 17}), w = data({17, 9}), b = data({9});
  Tensor h = relu(matmul(x, w) + b);
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>(),
       hv = h.to_vector<float>();
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 9; ++j) {
      double acc = bv[j];
      for (int k = 0; k < 17; ++k) acc += double(xv[i * 17 + k]) * wv[k * 9 + j];
      EXPECT_NEAR(hv[i * 9 + j], std::max(acc, 0.0), 1e-4);
    }
}

// Row groups (CPU): softmax, log_softmax and layer_norm over [rows, cols] run their kernels
// block by block over rows; results against float64 loops, and the steps counted as grouped.
TEST(Fusion, RowGroupedNormalizationsMatchFloat64) {
  const int R = 257, C = 300;  // 77k elements: grouped; 257 rows: blocks do not divide evenly
  Tensor x = data({R, C}) * 4.0, w = data({C}), b = data({C});
  sync({x});
  reset_metrics();
  Tensor sm = softmax(x, 1), ls = log_softmax(x, 1), ln = layer_norm(x, {C}, w, b);
  sync({sm, ls, ln});
  EXPECT_GE(metrics().row_blocked_steps, 6) << "the three normalizations ran row-grouped";
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>();
  auto smv = sm.to_vector<float>(), lsv = ls.to_vector<float>(), lnv = ln.to_vector<float>();
  for (int r = 0; r < R; ++r) {
    const float* row = &xv[r * C];
    double m = -INFINITY, s = 0, mean = 0, var = 0;
    for (int c = 0; c < C; ++c) m = std::max(m, double(row[c]));
    for (int c = 0; c < C; ++c) s += std::exp(row[c] - m), mean += row[c];
    mean /= C;
    for (int c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= C;
    for (int c = 0; c < C; ++c) {
      const double p = std::exp(row[c] - m) / s;
      ASSERT_NEAR(smv[r * C + c], p, 1e-6 + 1e-5 * p) << r << "," << c;
      ASSERT_NEAR(lsv[r * C + c], std::log(p), 1e-4) << r << "," << c;
      const double y = (row[c] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c];
      ASSERT_NEAR(lnv[r * C + c], y, 1e-4 * (1 + std::fabs(y))) << r << "," << c;
    }
  }
}

// Trailing-dim reductions of a 3-D input (standalone and with prologues) feeding broadcasts
// back, grouped over dim 0; a reduction over dim 0 (not row-local) must not be grouped.
TEST(Fusion, RowGroupedReductionsOverTrailingDims) {
  const int A = 40, B = 30, C = 64;  // 76.8k elements
  Tensor x = data({A, B, C});
  sync({x});
  Tensor mx = amax(x, {2}, true), mn = amin(x, {1, 2}, true);
  Tensor y = (x - mx) * (x - mn) + sum(x * x, {2}, true) / prod(x * 0.01 + 1.0, {2}, true);
  Tensor col = sum(x, {0}, true);  // over dim 0: every row block would need every row
  Tensor z = x / (col + 100.0);
  sync({y, z});
  auto xv = x.to_vector<float>(), yv = y.to_vector<float>(), zv = z.to_vector<float>();
  std::vector<double> colv(B * C, 0.0);
  for (int a = 0; a < A; ++a)
    for (int i = 0; i < B * C; ++i) colv[i] += xv[a * B * C + i];
  for (int a = 0; a < A; ++a) {
    double lo = INFINITY;
    for (int i = 0; i < B * C; ++i) lo = std::min(lo, double(xv[a * B * C + i]));
    for (int bb = 0; bb < B; ++bb) {
      const float* row = &xv[(a * B + bb) * C];
      double hi = -INFINITY, sq = 0, pr = 1;
      for (int c = 0; c < C; ++c) {
        hi = std::max(hi, double(row[c]));
        sq += double(row[c]) * row[c];
        pr *= double(float(row[c] * 0.01f) + 1.0f);
      }
      for (int c = 0; c < C; ++c) {
        const int i = (a * B + bb) * C + c;
        const double want = (row[c] - hi) * (row[c] - lo) + sq / pr;
        ASSERT_NEAR(yv[i], want, 1e-4 * (1 + std::fabs(want))) << a << "," << bb << "," << c;
        const double wz = row[c] / (colv[bb * C + c] + 100.0);
        ASSERT_NEAR(zv[i], wz, 1e-5 * (1 + std::fabs(wz)));
      }
    }
  }
}

TEST(Fusion, CommonSubexpressionsAreComputedOnce) {
  Tensor a = data({8, 5}), b = data({8, 5});
  Tensor y = exp(a * b) + exp(b * a);  // commutative operands in either order
  const std::string plan = dump_plan({y});
  EXPECT_EQ(std::count(plan.begin(), plan.end(), '='), 3) << plan;  // mul, exp, add
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i)
    EXPECT_FLOAT_EQ(yv[i], 2 * std::exp(av[i] * bv[i]));
  // d(x*x)/dx = g*x + g*x: autograd's repeat is merged too.
  Tensor x = data({6}).requires_grad_();
  Tensor g = autograd::grad({(x * x).sum()}, {x}, {}, /*retain_graph=*/std::nullopt, true)[0];
  const std::string gp = dump_plan({g});
  size_t muls = 0;
  for (size_t at = gp.find("=mul("); at != std::string::npos; at = gp.find("=mul(", at + 1)) ++muls;
  EXPECT_EQ(muls, 1u) << gp;
  auto xv = x.to_vector<float>(), gv = g.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(gv[i], 2 * xv[i]);
}

TEST(Fusion, MergedOutputsStayIndependentTensors) {
  Tensor a = data({4});
  Tensor y1 = a + 1.0, y2 = a + 1.0;  // the same value, computed once
  sync({y1, y2});
  auto v2 = y2.to_vector<float>();
  y1.mul_(10.0);  // writing one must not change the other
  auto v1 = y1.to_vector<float>(), w2 = y2.to_vector<float>();
  for (size_t i = 0; i < v2.size(); ++i) {
    EXPECT_FLOAT_EQ(w2[i], v2[i]);
    EXPECT_FLOAT_EQ(v1[i], v2[i] * 10);
  }
  // Random draws are never merged: two randn calls give different numbers.
  Tensor r1 = randn({64}), r2 = randn({64});
  EXPECT_NE(r1.to_vector<float>(), r2.to_vector<float>());
}

// (a @ b)^T read only by its transpose is planned as b^T @ a^T: nn::Linear's weight gradient
// (x^T g)^T comes out of the GEMM in the weight's own [out, in] layout, so the optimizer reads
// it contiguously. Values as the unrewritten product.
TEST(MatmulTranspose, LinearWeightGradientIsWrittenInTheWeightsLayout) {
  manual_seed(7);
  Tensor x = data({5, 3});
  Tensor w = data({4, 3}).requires_grad_();
  Tensor g = data({5, 4});
  Tensor y = linear(x, w, Tensor());
  y.backward(g);
  Tensor dw = w.grad();
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({dw}, &reasons);
  // The output is the GEMM's own result: no view kernel after it.
  int32_t out = p.outputs[0];
  const lazy::Instr* last = nullptr;
  for (const lazy::Instr& in : p.instrs)
    if (in.out == out) last = &in;
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->op, OpId::kMatmul) << p.describe();
  EXPECT_EQ(last->shape, (Shape{4, 3}));
  // dw[o][i] = sum_n g[n][o] * x[n][i], in double.
  std::vector<float> xv = x.to_vector<float>(), gv = g.to_vector<float>(), dv = dw.to_vector<float>();
  ASSERT_TRUE(dw.is_contiguous());
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 3; ++i) {
      double ref = 0;
      for (int n = 0; n < 5; ++n) ref += double(gv[n * 4 + o]) * xv[n * 3 + i];
      EXPECT_NEAR(dv[o * 3 + i], ref, 1e-5) << o << "," << i;
    }
}

// (a [3, 2] times b [2, 4]) at (i, j), in float64: the reference of the matmul cases below.
double product_at(const std::vector<float>& av, const std::vector<float>& bv, int i, int j) {
  double ref = 0;
  for (int k = 0; k < 2; ++k) ref += double(av[i * 2 + k]) * bv[k * 4 + j];
  return ref;
}

// The fused plan of these roots (lowered and split into kernels, not compiled), and its GEMM
// kernels.
lazy::Plan kernel_plan(const std::vector<Tensor>& roots) {
  std::vector<lazy::NodePtr> nodes;
  for (const Tensor& t : roots) nodes.push_back(t.impl()->value());
  lazy::Plan p = lazy::lower(lazy::build_graph(nodes));
  lazy::plan_kernels(p, /*fuse=*/true);
  return p;
}
std::vector<const lazy::Kernel*> matmul_kernels(const lazy::Plan& p) {
  std::vector<const lazy::Kernel*> out;
  for (const lazy::Kernel& k : p.kernels)
    if (k.kind == lazy::KernelKind::kMatmul) out.push_back(&k);
  return out;
}

// In a plan: a product used only through its transpose is computed transposed.
TEST(MatmulTranspose, PlanComputesATransposedOnlyProductDirectly) {
  Tensor a = data({3, 2}), b = data({2, 4});
  Tensor z = matmul(a, b).t() * 2.0;  // the product and its view are temporaries
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({z}, &reasons);
  int matmuls = 0;
  for (const lazy::Instr& in : p.instrs)
    if (in.op == OpId::kMatmul) {
      ++matmuls;
      EXPECT_EQ(in.shape, (Shape{4, 3})) << p.describe();
    }
  EXPECT_EQ(matmuls, 1);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), zv = z.to_vector<float>();
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) {
      const double ref = product_at(av, bv, i, j);
      EXPECT_NEAR(zv[j * 3 + i], 2 * ref, 1e-5);
    }
}

// A product that something else also reads, or that is a result itself, stays as it is.
TEST(MatmulTranspose, ProductsReadElsewhereAreLeftAlone) {
  Tensor a = data({3, 2}), b = data({2, 4});
  Tensor c = matmul(a, b);
  Tensor ct = c.t();
  std::vector<std::string> reasons;
  lazy::Plan p = fused_plan({c, ct}, &reasons);
  int matmuls = 0;
  for (const lazy::Instr& in : p.instrs) {
    if (in.op == OpId::kMatmul) {
      ++matmuls;
      EXPECT_EQ(in.shape, (Shape{3, 4}));
    }
  }
  EXPECT_EQ(matmuls, 1);
  std::vector<float> cv = c.to_vector<float>(), tv = ct.contiguous().to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(cv[i * 4 + j], tv[j * 3 + i]);
}

// A matmul's epilogue values read only by a later elementwise kernel move into that kernel,
// which computes them from the product (in memory anyway as a result): Adam's g*(1-b1) and
// g*g*(1-b2) of a weight gradient are no longer written and read back.
TEST(EpilogueSink, ValuesReadOnlyByALaterKernelMoveIntoIt) {
  Tensor a = data({3, 2}), b = data({2, 4}), m = data({3, 4});
  Tensor g = matmul(a, b);               // a result: in memory anyway
  // g*0.1 and g*g*0.01 (temporaries) were the GEMM kernel's epilogue before the pass.
  Tensor out = m * 0.9 + g * 0.1 + g * g * 0.01;
  lazy::Plan p = kernel_plan({g, out});
  std::vector<const lazy::Kernel*> mk = matmul_kernels(p);
  ASSERT_EQ(mk.size(), 1u) << p.describe();
  EXPECT_EQ(mk[0]->instrs.size(), 1u) << p.describe();   // the GEMM alone
  EXPECT_EQ(mk[0]->outputs.size(), 1u) << p.describe();  // writes only the product
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), mv = m.to_vector<float>();
  std::vector<float> gv = g.to_vector<float>(), ov = out.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      const double ref = product_at(av, bv, i, j);
      EXPECT_NEAR(gv[i * 4 + j], ref, 1e-5);
      EXPECT_NEAR(ov[i * 4 + j], 0.9 * mv[i * 4 + j] + 0.1 * ref + 0.01 * ref * ref, 1e-5);
    }
}

// When the product itself is not needed outside, its epilogue stays (moving it would add a
// write of the product).
TEST(EpilogueSink, EpilogueOfATemporaryProductStays) {
  Tensor a = data({3, 2}), b = data({2, 4}), m = data({3, 4});
  // The row sum starts the reader as a kernel of its own (a reduce-then-broadcast break).
  Tensor out = relu(matmul(a, b)) + m.sum(1, true);
  lazy::Plan p = kernel_plan({out});
  std::vector<const lazy::Kernel*> mk = matmul_kernels(p);
  ASSERT_EQ(mk.size(), 1u) << p.describe();
  EXPECT_EQ(mk[0]->instrs.size(), 2u) << p.describe();  // the GEMM and its relu
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), mv = m.to_vector<float>();
  std::vector<float> ov = out.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      const double ref = product_at(av, bv, i, j);
      double row = 0;
      for (int k = 0; k < 4; ++k) row += mv[i * 4 + k];
      EXPECT_NEAR(ov[i * 4 + j], std::max(ref, 0.0) + row, 1e-5);
    }
}

}  // namespace
}  // namespace sloth
