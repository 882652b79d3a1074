// sloth::dist collectives. The same binary runs as a plain test (a 1-process world: no MPI)
// and under `mpirun -np 2` / `-np 3` (tests/dist_mpi_test.sh), where each rank builds its own
// inputs from its rank and checks the collective's result against values computed here in
// float64 from every rank's inputs (closed forms, independent of MPI). Non-fatal EXPECTs only:
// a rank that stopped early would leave the others waiting in a collective.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/mpi/comm.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "sloth/sloth.h"
#include "tests/support/errors.h"

namespace sloth {
namespace {

using dist::ReduceOp;

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {{}, {5}, {3, 4}, {2, 3, 4}, {6, 1}};
  return s;
}
const std::vector<DType>& dtypes() {
  static const std::vector<DType> d = {kFloat32, kFloat64, kInt64};
  return d;
}

// Rank r's input: element i is (i - n/2 + 1) * (r + 1) - r, so signs differ and the ranks'
// order matters for max/min; exact in every dtype.
double input_value(int64_t i, int64_t n, int r) {
  return static_cast<double>((i - n / 2 + 1) * (r + 1) - r);
}
std::vector<double> input_values(int64_t n, int r) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = input_value(i, n, r);
  return v;
}
Tensor rank_tensor(const Shape& s, DType d, int r) {
  return tensor(input_values(numel(s), r), s, d);
}

std::vector<double> values(const Tensor& t) {
  if (t.dtype() == kInt64) {
    auto v = t.to_vector<int64_t>();
    return std::vector<double>(v.begin(), v.end());
  }
  if (t.dtype() == kFloat32) {
    auto v = t.to_vector<float>();
    return std::vector<double>(v.begin(), v.end());
  }
  return t.to_vector<double>();
}

double reduce_expected(ReduceOp op, int64_t i, int64_t n, int world) {
  double acc = input_value(i, n, 0);
  for (int r = 1; r < world; ++r) {
    const double x = input_value(i, n, r);
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: acc += x; break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
    }
  }
  return op == ReduceOp::kAvg ? acc / world : acc;
}

const char* op_str(ReduceOp op) {
  static const char* const kNames[] = {"sum", "avg", "max", "min"};
  return kNames[static_cast<int>(op)];
}

TEST(Dist, WorldIsInitialized) {
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_GE(dist::world_size(), 1);
  EXPECT_GE(dist::rank(), 0);
  EXPECT_LT(dist::rank(), dist::world_size());
  dist::barrier();
}

TEST(Dist, AllReduceValues) {
  const int p = dist::world_size(), r = dist::rank();
  for (const Shape& s : shapes())
    for (DType d : dtypes())
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        if (op == ReduceOp::kAvg && d == kInt64) continue;  // floating only (tested below)
        Tensor t = rank_tensor(s, d, r);
        dist::all_reduce(t, op);
        EXPECT_EQ(t.dtype(), d);
        EXPECT_EQ(t.shape(), s);
        const std::vector<double> got = values(t);
        const int64_t n = numel(s);
        for (int64_t i = 0; i < n; ++i)
          EXPECT_NEAR(got[i], reduce_expected(op, i, n, p), 1e-6)
              << op_str(op) << " " << dtype_name(d) << " " << shape_str(s) << " element " << i;
      }
}

// Several collectives pending in one step, one of them through a view: one graph, and the
// write through the view reaches the base (functionalization).
TEST(Dist, AllReducesInOneStepAndThroughAView) {
  const int p = dist::world_size(), r = dist::rank();
  Tensor a = rank_tensor({4, 3}, kFloat32, r);
  Tensor b = rank_tensor({7}, kFloat64, r);
  Tensor base = rank_tensor({4, 5}, kFloat64, r);
  Tensor view = base.narrow(1, 1, 2);
  dist::all_reduce(a, ReduceOp::kSum);
  dist::all_reduce(b, ReduceOp::kMax);
  dist::all_reduce(view, ReduceOp::kAvg);
  mark_step();
  auto va = values(a), vb = values(b), vbase = values(base);
  for (int64_t i = 0; i < 12; ++i) EXPECT_NEAR(va[i], reduce_expected(ReduceOp::kSum, i, 12, p), 1e-6);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(vb[i], reduce_expected(ReduceOp::kMax, i, 7, p));
  for (int64_t i = 0; i < 20; ++i) {
    const int64_t col = i % 5;
    const double want = col == 1 || col == 2 ? reduce_expected(ReduceOp::kAvg, i, 20, p)
                                              : input_value(i, 20, r);
    EXPECT_NEAR(vbase[i], want, 1e-12) << "element " << i;
  }
}

// The CPU backend finishes a collective when a later step first reads its result (views of
// it wait at their readers): values read after unrelated steps, through views, and the same
// graph again (the second run takes the cached views) are the reduced ones.
TEST(Dist, AResultReadLaterAndThroughViewsIsTheReducedOne) {
  const int p = dist::world_size(), r = dist::rank();
  for (int run = 0; run < 2; ++run) {
    Tensor a = rank_tensor({6}, kFloat32, r);
    Tensor unused = rank_tensor({5}, kFloat64, r);
    Tensor other = tensor(std::vector<double>{1, 2, 3}, {3}, kFloat32);
    dist::all_reduce(a, ReduceOp::kAvg);
    dist::all_reduce(unused, ReduceOp::kSum);  // kept, never read in the graph
    Tensor c = other * 2 + 1;                 // steps between the post and the first read
    Tensor v = a.narrow(0, 2, 3).reshape({3, 1}).reshape({3});
    Tensor d = v * c;
    mark_step();
    auto vd = values(d), va = values(a), vu = values(unused);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(vd[i], reduce_expected(ReduceOp::kAvg, i + 2, 6, p) * (2 * (i + 1) + 1), 1e-5)
          << "run " << run << " element " << i;
    for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(va[i], reduce_expected(ReduceOp::kAvg, i, 6, p), 1e-6);
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(vu[i], reduce_expected(ReduceOp::kSum, i, 5, p));
  }
}

TEST(Dist, AllReducedReturnsTheReductionAndKeepsItsInput) {
  const int p = dist::world_size(), r = dist::rank();
  Tensor a = rank_tensor({2, 3}, kFloat64, r);
  Tensor s = dist::all_reduced(a, ReduceOp::kAvg);
  Tensor m = dist::all_reduced(a.t(), ReduceOp::kMin);  // a strided input
  mark_step();
  auto vs = values(s), vm = values(m), va = values(a);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(vs[i], reduce_expected(ReduceOp::kAvg, i, 6, p), 1e-12);
    EXPECT_EQ(va[i], input_value(i, 6, r));
  }
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t i = 0; i < 2; ++i)
      EXPECT_EQ(vm[j * 2 + i], reduce_expected(ReduceOp::kMin, i * 3 + j, 6, p));
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.shape(), (Shape{3, 2}));
}

TEST(Dist, BroadcastValues) {
  const int p = dist::world_size(), r = dist::rank();
  for (int root : {0, p - 1})
    for (const Shape& s : shapes())
      for (DType d : dtypes()) {
        Tensor t = rank_tensor(s, d, r);
        dist::broadcast(t, root);
        EXPECT_EQ(values(t), input_values(numel(s), root))
            << "root " << root << " " << dtype_name(d) << " " << shape_str(s);
      }
}

TEST(Dist, AllGatherValues) {
  const int p = dist::world_size(), r = dist::rank();
  for (const Shape& s : shapes())
    for (DType d : dtypes()) {
      std::vector<Tensor> parts = dist::all_gather(rank_tensor(s, d, r));
      ASSERT_EQ(static_cast<int>(parts.size()), p);
      for (int q = 0; q < p; ++q) {
        EXPECT_EQ(parts[q].shape(), s);
        EXPECT_EQ(parts[q].dtype(), d);
        EXPECT_EQ(values(parts[q]), input_values(numel(s), q))
            << "rank " << q << "'s part, " << dtype_name(d) << " " << shape_str(s);
      }
    }
}

TEST(Dist, ReduceScatterValues) {
  const int p = dist::world_size(), r = dist::rank();
  for (const Shape& block : std::vector<Shape>{{2}, {1, 3}, {3, 2, 2}})
    for (DType d : dtypes())
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        if (op == ReduceOp::kAvg && d == kInt64) continue;
        Shape full = block;
        full[0] *= p;
        Tensor out = dist::reduce_scatter(rank_tensor(full, d, r), op);
        EXPECT_EQ(out.shape(), block);
        const int64_t n = numel(full), m = numel(block);
        const std::vector<double> got = values(out);
        for (int64_t i = 0; i < m; ++i)
          EXPECT_NEAR(got[i], reduce_expected(op, r * m + i, n, p), 1e-6)
              << op_str(op) << " " << dtype_name(d) << " block " << shape_str(block) << " element " << i;
      }
}

// Bad input throws before anything is recorded, names the call and the fix, and leaves the
// tensor as it was (every rank fails the same way, so no rank waits).
TEST(Dist, ErrorsNameTheFixAndChangeNothing) {
  const int p = dist::world_size(), r = dist::rank();
  Tensor i = rank_tensor({4}, kInt64, r);
  EXPECT_ERROR_HAS(dist::all_reduce(i, ReduceOp::kAvg), "kAvg needs a floating tensor");
  EXPECT_EQ(values(i), input_values(4, r));
  Tensor f = rank_tensor({3}, kFloat32, r);
  EXPECT_ERROR_HAS(dist::broadcast(f, p), "root rank");
  EXPECT_EQ(values(f), input_values(3, r));
  if (p > 1)  // any length splits into 1 block
    EXPECT_ERROR_HAS(dist::reduce_scatter(rank_tensor({p * 2 + 1}, kFloat32, r)),
                     "must split into");
  Tensor bad = tensor(1.0) > 0;
  EXPECT_ERROR_HAS(dist::all_reduce(bad), "cannot reduce a bool tensor");
  // Still usable afterwards.
  dist::all_reduce(f);
  auto v = values(f);
  for (int64_t k = 0; k < 3; ++k) EXPECT_NEAR(v[k], reduce_expected(ReduceOp::kSum, k, 3, p), 1e-6);
}

// With SLOTH_DIST_CHECK=1 (the MPI test wrapper sets it), ranks that issue different
// collectives fail with an error naming them, on every rank, instead of hanging.
TEST(Dist, MismatchedShapesAreReported) {
  const int p = dist::world_size(), r = dist::rank();
  if (p == 1) GTEST_SKIP() << "needs 2 or more ranks";
  ASSERT_STREQ(std::getenv("SLOTH_DIST_CHECK"), "1");
  {
    Tensor t = rank_tensor({r == 1 ? 3 : 4}, kFloat32, r);
    dist::all_reduce(t);
    EXPECT_ERROR_HAS(mark_step(), "mismatched collectives: rank 0 issued collective");
  }
  // The job goes on: matching collectives work again.
  Tensor u = rank_tensor({2}, kFloat64, r);
  dist::all_reduce(u);
  auto v = values(u);
  for (int64_t k = 0; k < 2; ++k) EXPECT_NEAR(v[k], reduce_expected(ReduceOp::kSum, k, 2, p), 1e-12);
}

// A different op (not only a different shape) at the same place is reported too, and so is a
// barrier against a collective.
TEST(Dist, MismatchedOpsAreReported) {
  const int p = dist::world_size(), r = dist::rank();
  if (p == 1) GTEST_SKIP() << "needs 2 or more ranks";
  Tensor t = rank_tensor({3}, kFloat32, r);
  if (r == 1) dist::broadcast(t, 0);
  else dist::all_reduce(t);
  EXPECT_ERROR_HAS(mark_step(), "mismatched collectives: rank 0 issued collective");
  if (r == 1) {
    EXPECT_ERROR_HAS(dist::barrier(), "mismatched collectives");
  } else {
    Tensor u = rank_tensor({2}, kFloat32, r);
    dist::all_reduce(u);
    EXPECT_ERROR_HAS(mark_step(), "issued collective #");
  }
  dist::barrier();  // in step again
}

// Two all-reduces of equal values are two collectives (CSE leaves collectives alone), so the
// ranks' counts agree whatever values coincide on one rank.
TEST(Dist, EqualCollectivesAreNotMerged) {
  const int p = dist::world_size(), r = dist::rank();
  Tensor x = rank_tensor({4}, kFloat64, r);
  Tensor a = x * 2, b = x * 2;
  mark_step();
  const int64_t before = comm::collectives_issued();
  Tensor ra = dist::all_reduced(a), rb = dist::all_reduced(a);  // the same op on one input
  a.copy_(ra);
  b.copy_(rb);
  mark_step();
  if (p > 1) EXPECT_EQ(comm::collectives_issued() - before, 2);
  auto va = values(a), vb = values(b);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(va[i], 2 * reduce_expected(ReduceOp::kSum, i, 4, p));
    EXPECT_EQ(vb[i], va[i]);
  }
}

// The in-place collectives act on values (as c10d): no autograd history.
TEST(Dist, AllReduceOnAGradientDoesNotTrackHistory) {
  Tensor w = tensor({1.0, 2.0, 3.0}, {3}, TensorOptions().requires_grad());
  (w * w).sum().backward();
  Tensor g = w.grad();
  dist::all_reduce(g, ReduceOp::kAvg);
  EXPECT_FALSE(g.requires_grad());
  EXPECT_EQ(values(w.grad()), (std::vector<double>{2, 4, 6}));  // the same on every rank
}

}  // namespace
}  // namespace sloth
