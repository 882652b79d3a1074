// Randomized differential test of the fused executor: a few thousand small random graphs
// (elementwise chains with broadcasts, reductions, matmuls, views, float32 and float64,
// strided inputs, several outputs per graph) run through sloth as ONE graph each (so the
// fusion pass and the fused CPU kernels see them whole) and are compared with the
// double-precision reference kernels op by op.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/op_attrs.h"
#include "testing/reference/reference.h"
#include "gtest/gtest.h"
#include "sloth/dispatch.h"
#include "sloth/sloth.h"
#include "tests/support/tensors.h"

namespace sloth {
namespace {

using testing::compare;
using testing::to_ref;
using testing::to_tensor;

struct Val {
  Tensor t;
  RefTensor r;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }

  RefTensor random_ref(const Shape& shape, DType dt) {
    std::uniform_real_distribution<double> d(-2, 2);
    std::vector<double> v(numel(shape));
    for (double& x : v) x = d(rng_);
    return ref_tensor(shape, dt, v);
  }

  Val input(const Shape& shape, DType dt) {
    bool transposed = shape.size() == 2 && coin(0.25);
    RefTensor r = random_ref(shape, dt);
    return {to_tensor(r, transposed), r};  // transposed: a strided view
  }

  // A shape that broadcasts to `s`: some dims set to 1, maybe leading dims dropped.
  Shape broadcastable(const Shape& s) {
    Shape b = s;
    for (auto& d : b)
      if (coin(0.3)) d = 1;
    while (!b.empty() && coin(0.2)) b.erase(b.begin());
    return b;
  }

  Val apply(OpId op, std::vector<Val> in, Attrs a = {}) {
    std::vector<Tensor> ts;
    std::vector<RefTensor> rs;
    for (auto& v : in) {
      ts.push_back(v.t);
      rs.push_back(v.r);
    }
    auto r = ref_eval(op, rs, a);
    EXPECT_TRUE(r.ok()) << op_name(op) << ": " << r.status().message();
    return {call_op(op, ts, a), *r};
  }

  // A C++ number operand; the reference sees it as a 0-dim tensor of the graph's dtype (what
  // a wrapped number promotes to against values of that dtype).
  Val scalar(double v, DType dt) { return {wrap_scalar(v), ref_scalar(v, dt)}; }

  // One random step on top of the values so far; returns the new value.
  Val step(std::vector<Val>& vals, DType dt) {
    Val& x = vals[uni(std::max<int>(0, vals.size() - 3), vals.size() - 1)];  // recent values
    const Shape& s = x.r.shape;
    int kind = uni(0, 99);
    if (kind < 30) {  // unary
      static const OpId un[] = {OpId::kNeg, OpId::kAbs, OpId::kRelu, OpId::kSigmoid,
                                OpId::kTanh, OpId::kSquare, OpId::kSin, OpId::kCos};
      OpId op = un[uni(0, 7)];
      if (op == OpId::kSquare && !s.empty()) op = OpId::kTanh;  // keep magnitudes bounded
      return apply(op, {x});
    }
    static const OpId bin[] = {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kMaximum,
                               OpId::kMinimum};
    if (kind < 65) {  // binary with another value, a fresh (broadcast) input or a scalar
      OpId op = bin[uni(0, 4)];
      int which = uni(0, 2);
      Val y;
      if (which == 0) {
        // Another value whose shape broadcasts with x's, if any.
        std::vector<int> ok;
        for (size_t i = 0; i < vals.size(); ++i) {
          Attrs dummy;
          if (ref_infer(OpId::kAdd, {x.r, vals[i].r}, &dummy).ok()) ok.push_back(i);
        }
        y = vals[ok[uni(0, ok.size() - 1)]];
      } else if (which == 1) {
        y = input(broadcastable(s), dt);
      } else {
        y = scalar(uni(-3, 3) * 0.5 + 0.25, dt);
      }
      return coin() ? apply(op, {x, y}) : apply(op, {y, x});
    }
    if (kind < 80 && !s.empty()) {  // reduction over one or two dims
      static const OpId red[] = {OpId::kSum, OpId::kAmax, OpId::kAmin};
      ReduceAttrs a;
      int d = uni(0, s.size() - 1);
      a.dims = {d};
      if (s.size() > 1 && coin(0.3)) a.dims = {d, (d + 1) % static_cast<int>(s.size())};
      if (coin(0.2)) a.dims.clear();  // everything
      a.keepdim = coin();
      return apply(red[uni(0, 2)], {x}, a);
    }
    if (kind < 88 && s.size() == 2) {  // matmul with a fresh right operand
      Val w = input({s[1], uni(1, 6)}, dt);
      return apply(OpId::kMatmul, {x, w});
    }
    if (kind < 94 && s.size() >= 2) {  // transpose (a strided view)
      return apply(OpId::kTranspose, {x}, TransposeAttrs{.dim0 = 0, .dim1 = 1});
    }
    if (!s.empty()) {  // reshape to 1-D or unsqueeze
      Attrs a;
      if (coin()) {
        a.dims = {-1};
        return apply(OpId::kReshape, {x}, a);
      }
      return apply(OpId::kUnsqueeze, {x}, DimAttrs{.dim = 0});
    }
    return apply(OpId::kNeg, {x});
  }

 private:
  std::mt19937_64 rng_;
};

TEST(RandomGraphs, FusedResultsMatchReference) {
  const int kGraphs = 2500;
  int compared = 0;
  for (int g = 0; g < kGraphs; ++g) {
    Gen gen(1000 + g);
    const DType dt = gen.coin(0.7) ? DType::kFloat32 : DType::kFloat64;
    Shape shape;
    const bool big = g % 100 == 0;  // some graphs large enough to split across threads
    int rank = gen.uni(1, 3);
    for (int d = 0; d < rank; ++d) shape.push_back(big ? gen.uni(40, 200) : gen.uni(1, 6));
    std::vector<Val> vals;
    vals.push_back(gen.input(shape, dt));
    vals.push_back(gen.input(gen.broadcastable(shape), dt));
    const int steps = gen.uni(2, 10);
    for (int s = 0; s < steps; ++s) vals.push_back(gen.step(vals, dt));
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "graph " << g << ": building failed";
      return;
    }
    // Outputs: the last value and a few random intermediates (they must be materialized
    // while their consumers still fuse). All in one sync: one graph.
    std::vector<int> outs = {static_cast<int>(vals.size()) - 1};
    for (int k = gen.uni(0, 2); k > 0; --k) outs.push_back(gen.uni(2, vals.size() - 1));
    std::vector<Tensor> ts;
    for (int o : outs) ts.push_back(vals[o].t);
    try {
      sync(ts);
    } catch (const Error& e) {
      FAIL() << "graph " << g << ": " << e.what() << "\n" << dump_plan(ts) << dump_ir(ts);
    }
    for (int o : outs) {
      std::string diff = compare(vals[o].r, to_ref(vals[o].t), 2e-4);
      ASSERT_EQ(diff, "") << "graph " << g << " value " << o << "\n" << dump_plan({vals[o].t})
                          << dump_ir({vals[o].t});
      ++compared;
    }
  }
  EXPECT_GT(compared, kGraphs);
}

// Row-local reductions broadcast back (the softmax / layer_norm shape) over large [rows, cols]
// inputs: the CPU backend runs such kernel sequences as row groups, block by block; every
// result against the reference.
TEST(RandomGraphs, RowGroupedChainsMatchReference) {
  reset_metrics();
  int compared = 0;
  for (int g = 0; g < 40; ++g) {
    Gen gen(70000 + g);
    const DType dt = gen.coin(0.7) ? DType::kFloat32 : DType::kFloat64;
    const Shape shape = {gen.uni(70, 160), gen.uni(900, 1100)};  // >= 64k elements
    Val x = gen.input(shape, dt), v = x;
    std::vector<Val> outs;
    const int steps = gen.uni(2, 5);
    for (int s = 0; s < steps; ++s) {
      static const OpId red[] = {OpId::kSum, OpId::kAmax, OpId::kAmin};
      static const OpId bin[] = {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kMaximum};
      const ReduceAttrs a{.dims = {1}, .keepdim = true};  // [rows, 1], broadcast back over the row
      const OpId op = red[gen.uni(0, 2)];
      Val r = gen.apply(op, {gen.coin() ? v : gen.apply(OpId::kTanh, {v})}, a);
      if (op == OpId::kSum) r = gen.apply(OpId::kMul, {r, gen.scalar(1.0 / 1024, dt)});  // a mean
      v = gen.apply(bin[gen.uni(0, 3)], {gen.coin() ? v : x, r});
      if (gen.coin(0.3)) v = gen.apply(OpId::kSigmoid, {v});
      if (gen.coin(0.3)) outs.push_back(r);
    }
    outs.push_back(v);
    std::vector<Tensor> ts;
    for (const Val& o : outs) ts.push_back(o.t);
    sync(ts);
    for (const Val& o : outs) {
      std::string diff = compare(o.r, to_ref(o.t), 2e-4);
      ASSERT_EQ(diff, "") << "graph " << g << "\n" << dump_plan({o.t});
      ++compared;
    }
  }
  EXPECT_GE(compared, 40);
  EXPECT_GE(metrics().row_blocked_steps, 80) << "most graphs ran as row groups";
  std::printf("row-blocked steps: %lld\n", static_cast<long long>(metrics().row_blocked_steps));
}

}  // namespace
}  // namespace sloth
