// Graphs that scale: very long chains and very wide programs record, plan, run and free
// without recursion (no stack overflow), with the right values; the automatic flush keeps a
// loop that never syncs bounded. Timing is in benchmarks/trace_bench.cc, not here.
#include "gtest/gtest.h"
#include "lazy/node.h"
#include "lazy/scheduler.h"
#include "lazy/tensor_impl.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

constexpr int64_t kLong = 100000;

struct FlushLimit {
  explicit FlushLimit(int64_t n) { set_auto_flush_limit(n); }
  ~FlushLimit() { set_auto_flush_limit(20000); }  // the default
};

// acc = acc + s, 1e5 times, no sync in the loop: the automatic flushes cut it into graphs of
// at most 20000 pending nodes, and the sum is exact (integers below 2^24 in float32).
TEST(Scale, ChainOf1e5OpsWithoutSyncAutoFlushes) {
  mark_step();
  reset_metrics();
  Tensor s = tensor({1.0f, 2.0f, 0.5f, -1.0f});
  Tensor acc = zeros({4});
  for (int64_t i = 0; i < kLong; ++i) acc = acc + s;
  EXPECT_GE(metrics().auto_flushes, 4);
  EXPECT_LE(lazy::pending_nodes(), 20001);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{100000.0f, 200000.0f, 50000.0f, -100000.0f}));
}

// The same chain as ONE graph (no automatic flush): build_graph, lowering, fusion, the CPU
// compile and the executor walk 1e5 nodes without recursing.
TEST(Scale, ChainOf1e5OpsAsOneGraph) {
  FlushLimit no_flush(int64_t{1} << 40);
  mark_step();
  reset_metrics();
  Tensor s = tensor({1.0f, 2.0f, 0.5f, -1.0f});
  Tensor acc = zeros({4});
  for (int64_t i = 0; i < kLong; ++i) acc = acc * 1.0 + s;  // 2e5 nodes with the scalar ops
  EXPECT_EQ(metrics().auto_flushes, 0);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{100000.0f, 200000.0f, 50000.0f, -100000.0f}));
  EXPECT_EQ(metrics().graphs_executed, 1);
  EXPECT_GE(metrics().nodes_executed, 2 * kLong);
}

// Dropping a pending 1e5-node chain frees it iteratively (a NodePtr destructor that recursed
// would overflow the stack here).
TEST(Scale, DroppingAnUnsyncedChainOf1e5NodesFreesIt) {
  FlushLimit no_flush(int64_t{1} << 40);
  mark_step();
  Tensor s = tensor({1.0f, 2.0f});
  const int64_t live_before = lazy::live_nodes();
  {
    Tensor acc = zeros({2});
    for (int64_t i = 0; i < kLong; ++i) acc = acc + s;
    EXPECT_GE(lazy::live_nodes(), live_before + kLong);
  }
  EXPECT_LE(lazy::live_nodes(), live_before + 2);
  EXPECT_EQ(lazy::pending_nodes(), 0);
}

// A wide program: 1e5 independent small ops, each output live, one graph; every output is
// right (sibling fusion puts independent ops in shared kernels).
TEST(Scale, WideProgramOf1e5LiveOutputs) {
  FlushLimit no_flush(int64_t{1} << 40);
  mark_step();
  reset_metrics();
  Tensor s = tensor({1.0f, -2.0f, 0.25f});
  std::vector<Tensor> out(kLong);
  for (int64_t i = 0; i < kLong; ++i) out[i] = s * static_cast<double>(i);
  mark_step();
  EXPECT_EQ(metrics().graphs_executed, 1);
  EXPECT_LT(metrics().kernels_launched, kLong / 8) << "independent ops share kernels";
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{777}, kLong - 1}) {
    const float f = static_cast<float>(i);
    EXPECT_EQ(out[i].to_vector<float>(), (std::vector<float>{f, -2.0f * f, 0.25f * f})) << i;
  }
}

// Autograd through a 1e5-op chain: backward gives the exact gradient, and the autograd graph
// (a chain of 1e5 backward nodes) is freed without recursing.
TEST(Scale, BackwardThroughAChainOf1e5Ops) {
  mark_step();
  Tensor w = tensor({1.0f, 2.0f}).requires_grad_();
  {
    Tensor acc = w * 1.0;
    for (int64_t i = 0; i < kLong; ++i) acc = acc + w;
    Tensor loss = acc.sum();
    loss.backward();
    EXPECT_EQ(loss.item(), 3.0 * (kLong + 1));
  }
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{100001.0f, 100001.0f}));
}

// Recording recycles nodes without rewriting attributes an op does not have (has_attrs): a
// node that last served an op with attributes and now serves one without has default attrs,
// and the other way round, so hashes, plan-cache keys and values are those of fresh nodes.
TEST(Scale, RecycledNodesCarryOnlyTheirOwnAttributes) {
  FlushLimit no_flush(int64_t{1} << 40);
  mark_step();
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).reshape({2, 3});
  Tensor y = tensor({10.0f, 20.0f, 30.0f, 40.0f, 50.0f, 60.0f}).reshape({2, 3});
  mark_step();
  auto node_of = [](const Tensor& t) { return t.impl()->base_value(); };
  // Reference hashes from nodes that never carried attributes (a fresh program's first use).
  const uint64_t add_hash = node_of(x + y)->hash;
  const uint64_t sum_hash = node_of(x.sum(1))->hash;
  for (int round = 0; round < 3; ++round) {
    {
      std::vector<Tensor> with_attrs;  // sum(dim), transpose: nodes with attributes, dropped
      for (int i = 0; i < 64; ++i) with_attrs.push_back(x.sum(1) + x.t().sum(0));
    }
    std::vector<Tensor> plain;
    for (int i = 0; i < 64; ++i) plain.push_back(x + y);
    for (const Tensor& t : plain) {
      const lazy::NodePtr n = node_of(t);
      EXPECT_FALSE(n->has_attrs);
      EXPECT_TRUE(n->attrs == Attrs());
      EXPECT_EQ(n->hash, add_hash);
    }
    plain.clear();
    std::vector<Tensor> sums;
    for (int i = 0; i < 64; ++i) sums.push_back(x.sum(1));
    for (const Tensor& t : sums) {
      EXPECT_TRUE(node_of(t)->has_attrs);
      EXPECT_EQ(node_of(t)->hash, sum_hash);
    }
    EXPECT_EQ(sums[5].to_vector<float>(), (std::vector<float>{6.0f, 15.0f}));
    Tensor z = x + y;
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{11.0f, 22.0f, 33.0f, 44.0f, 55.0f, 66.0f}));
  }
}

}  // namespace
}  // namespace sloth
