// core/dims.h: the inline shape type of IR nodes, and shapes of every rank through the record
// path (inline up to 4 dims, spilled beyond, a pooled node reused across ranks).
#include "core/dims.h"

#include <gtest/gtest.h>

#include "lazy/node.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

TEST(Dims, InlineAndSpilled) {
  Dims d{2, 3};
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1], 3);
  EXPECT_TRUE(d == (Shape{2, 3}));
  EXPECT_TRUE(d != (Shape{2, 3, 1}));
  d.push_back(4);
  d.push_back(5);
  d.push_back(6);  // spills: 5 dims
  EXPECT_EQ(d.to_shape(), (Shape{2, 3, 4, 5, 6}));
  d.resize(7, 1);
  EXPECT_EQ(d.to_shape(), (Shape{2, 3, 4, 5, 6, 1, 1}));
  d = Shape{9};  // back to 1 dim in the kept block
  EXPECT_EQ(d.to_shape(), (Shape{9}));
  EXPECT_EQ(d.back(), 9);
  Dims e = d;
  EXPECT_TRUE(e == d);
  d.clear();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(numel(e), 9);  // converts to IntSpan
  const Shape big{1, 2, 3, 4, 5, 6, 7};
  Dims f(big);
  Dims g;
  g = f;
  EXPECT_EQ(g.to_shape(), big);
  EXPECT_EQ(IntSpan(g).size(), 7u);
}

// Nodes are recycled through a pool: a node that held a 6-dim shape then holds a 1-dim one,
// and values computed through every rank stay right.
TEST(Dims, RecordEveryRank) {
  for (int round = 0; round < 3; ++round) {
    for (int64_t rank = 0; rank <= 6; ++rank) {
      Shape s(rank, 2);
      Tensor x = ones(s) * 3.0;
      Tensor y = (x + x).sum();
      EXPECT_EQ(x.shape(), s);
      EXPECT_EQ(x.strides(), contiguous_strides(s));
      EXPECT_DOUBLE_EQ(y.item(), 6.0 * static_cast<double>(int64_t{1} << rank));
      if (rank >= 2) {
        Tensor t = x.transpose(0, rank - 1);
        Strides expect = contiguous_strides(s);
        std::swap(expect[0], expect[rank - 1]);
        EXPECT_EQ(t.strides(), expect);
        EXPECT_DOUBLE_EQ((t * 2.0).sum().item(), 6.0 * static_cast<double>(int64_t{1} << rank));
      }
    }
  }
}

// Plan slots, instructions and a tile program's bound strides are Dims too: a 6-dim fused
// kernel over a broadcast operand and a transposed one (dims spilled to the heap everywhere)
// computes every element right.
TEST(Dims, FusedKernelOverSpilledBroadcastAndTransposedOperands) {
  const Shape xs = {2, 1, 3, 1, 2, 2};
  Tensor x = arange(24).to(kFloat32).reshape(xs);
  Tensor y = arange(6).to(kFloat32).reshape({3, 1, 2, 1});  // broadcast over dims 0, 1, 5
  Tensor z = (x + y) * x.transpose(0, 5) - 1.0;
  ASSERT_EQ(z.shape(), xs);
  std::vector<double> got = z.contiguous().to_vector<double>();
  auto xv = [](int64_t a, int64_t c, int64_t e, int64_t f) { return ((a * 3 + c) * 2 + e) * 2 + f; };
  size_t i = 0;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t e = 0; e < 2; ++e)
        for (int64_t f = 0; f < 2; ++f, ++i) {
          const double want = double(xv(a, c, e, f) + c * 2 + e) * double(xv(f, c, e, a)) - 1.0;
          EXPECT_DOUBLE_EQ(got[i], want) << "element " << i;
        }
  EXPECT_EQ(i, got.size());
}

}  // namespace
}  // namespace sloth
