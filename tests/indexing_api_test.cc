// LibTorch's tensor indexing (sloth/indexing.h): x.index({...}) and x.index_put_({...}, v)
// against Python's x[...] in PyTorch 1.13 (values, shapes and gradients computed there and
// committed), views and in-place writes through them, and the errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/errors.h"
#include "tests/support/pytorch_values.h"

namespace {

using namespace sloth;
using sloth::testing::values;
using namespace sloth::indexing;

Tensor arange24() { return arange(24, kFloat64).reshape({2, 3, 4}); }
Tensor longs(std::vector<double> v, Shape s) { return tensor(std::move(v), std::move(s)).to(kInt64); }
Tensor bools(std::vector<double> v, Shape s) { return tensor(std::move(v), std::move(s)) != 0; }

struct ReadCase {
  const char* python;
  std::vector<int64_t> shape;
  std::vector<double> value, grad;  // grad: d/dx sum(x[...] * arange(1, n + 1))
};

Tensor read(const std::string& p, const Tensor& x) {
  if (p == "x[:, 0]") return x.index({Slice(), 0});
  if (p == "x[1, :, 1:3]") return x.index({1, Slice(), Slice(1, 3)});
  if (p == "x[..., None, ::2]") return x.index({"...", None, Slice(None, None, 2)});
  if (p == "x[-1, -2:, -3::2]") return x.index({-1, Slice(-2, None), Slice(-3, None, 2)});
  if (p == "x[:, [2, 0, -1]]") return x.index({Slice(), longs({2, 0, -1}, {3})});
  if (p == "x[[1, 0], :, [3, 1]]") return x.index({longs({1, 0}, {2}), Slice(), longs({3, 1}, {2})});
  if (p == "x[:, [[0], [2]], [1, 3]]")
    return x.index({Slice(), longs({0, 2}, {2, 1}), longs({1, 3}, {2})});
  if (p == "x[mask]") return x.index({bools({1, 0, 1, 0, 1, 0}, {2, 3})});
  if (p == "x[0, mask1]") return x.index({0, Ellipsis, bools({1, 0, 0, 1}, {4})});
  if (p == "x[None, 1, 5:1]") return x.index({None, 1, Slice(5, 1)});
  ADD_FAILURE() << "no case " << p;
  return x;
}

TEST(IndexingApi, ReadsMatchPythonIndexing) {
  const std::vector<ReadCase> cases = {
      {"x[:, 0]", {2, 4}, {0, 1, 2, 3, 12, 13, 14, 15}, {1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0}},
      {"x[1, :, 1:3]", {3, 2}, {13, 14, 17, 18, 21, 22}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0}},
      {"x[..., None, ::2]", {2, 3, 1, 2}, {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}, {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10, 0, 11, 0, 12, 0}},
      {"x[-1, -2:, -3::2]", {2, 2}, {17, 19, 21, 23}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4}},
      {"x[:, [2, 0, -1]]", {2, 3, 4}, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23, 12, 13, 14, 15, 20, 21, 22, 23}, {5, 6, 7, 8, 0, 0, 0, 0, 10, 12, 14, 16, 17, 18, 19, 20, 0, 0, 0, 0, 34, 36, 38, 40}},
      {"x[[1, 0], :, [3, 1]]", {2, 3}, {15, 19, 23, 1, 5, 9}, {0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3}},
      {"x[:, [[0], [2]], [1, 3]]", {2, 2, 2}, {1, 3, 9, 11, 13, 15, 21, 23}, {0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8}},
      {"x[mask]", {3, 4}, {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19}, {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0, 9, 10, 11, 12, 0, 0, 0, 0}},
      {"x[0, mask1]", {3, 2}, {0, 3, 4, 7, 8, 11}, {1, 0, 0, 2, 3, 0, 0, 4, 5, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {"x[None, 1, 5:1]", {1, 0, 4}, {}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const ReadCase& c : cases) {
    const Tensor x = arange24().requires_grad_();
    const Tensor y = read(c.python, x);
    EXPECT_EQ(y.shape(), Shape(c.shape.begin(), c.shape.end())) << c.python;
    EXPECT_EQ(values(y), c.value) << c.python;
    if (y.numel() == 0) continue;
    (y * arange(1, y.numel() + 1, kFloat64).reshape(y.shape())).sum().backward();
    EXPECT_EQ(values(x.grad()), c.grad) << c.python;
  }
}

TEST(IndexingApi, BasicIndicesAreViews) {
  Tensor x = arange24();
  Tensor col = x.index({Slice(), 1});
  EXPECT_TRUE(col.is_view());
  col.mul_(-1);  // writes x
  EXPECT_EQ(values(x.index({0, 1})), (std::vector<double>{-4, -5, -6, -7}));
  EXPECT_EQ(values(x.index({1, 0})), (std::vector<double>{12, 13, 14, 15}));
}

struct PutCase {
  const char* python;
  std::vector<double> after;
};

TEST(IndexingApi, PutsMatchPythonAssignment) {
  const std::vector<PutCase> cases = {
      {"x[:, 0] = 100", {100, 100, 100, 100, 4, 5, 6, 7, 8, 9, 10, 11, 100, 100, 100, 100, 16, 17, 18, 19, 20, 21, 22, 23}},
      {"x[1, :, 1:3] = v", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1, -2, 15, 16, -1, -2, 19, 20, -1, -2, 23}},
      {"x[[1, 0], :, [3, 1]] = v", {0, 7, 2, 3, 4, 8, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7, 16, 17, 18, 8, 20, 21, 22, 9}},
      {"x[:, [2, 0]] = v", {50, 60, 70, 80, 4, 5, 6, 7, 50, 60, 70, 80, 50, 60, 70, 80, 16, 17, 18, 19, 50, 60, 70, 80}},
      {"x[mask] = 0", {0, 0, 0, 0, 4, 5, 6, 7, 0, 0, 0, 0, 12, 13, 14, 15, 0, 0, 0, 0, 20, 21, 22, 23}},
  };
  const std::vector<std::function<void(Tensor&)>> puts = {
      [](Tensor& x) { x.index_put_({Slice(), 0}, 100); },
      [](Tensor& x) { x.index_put_({1, Slice(), Slice(1, 3)}, tensor({-1.0, -2.0}, {1, 2}, kFloat64)); },
      [](Tensor& x) {
        x.index_put_({longs({1, 0}, {2}), Slice(), longs({3, 1}, {2})},
                     tensor({7, 8, 9, 7, 8, 9}, {2, 3}, kFloat64));
      },
      [](Tensor& x) { x.index_put_({Slice(), longs({2, 0}, {2})}, tensor({50, 60, 70, 80}, {4}, kFloat64)); },
      [](Tensor& x) { x.index_put_({bools({1, 0, 1, 0, 1, 0}, {2, 3})}, 0.0); },
  };
  ASSERT_EQ(cases.size(), puts.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    Tensor x = arange24();
    puts[i](x);
    EXPECT_EQ(values(x), cases[i].after) << cases[i].python;
  }
  // The one-tensor form x.index_put_({mask}, v) means the mask too (it binds to index_put_'s
  // tensor overload).
  Tensor y = arange24();
  y.index_put_({bools({1, 0, 1, 0, 1, 0}, {2, 3})}, zeros({4}, kFloat64));
  EXPECT_EQ(values(y), cases[4].after);
  // Gradients flow through index_put_ into the values and the untouched part.
  Tensor base = arange24().requires_grad_();
  Tensor v = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  Tensor z = base * 1;
  z.index_put_({0, 0, longs({1, 3}, {2})}, v);
  (z * arange(1, 25, kFloat64).reshape({2, 3, 4})).sum().backward();
  EXPECT_EQ(values(v.grad()), (std::vector<double>{2, 4}));
  std::vector<double> g = values(base.grad());
  EXPECT_EQ(g[0], 1);
  EXPECT_EQ(g[1], 0);
  EXPECT_EQ(g[3], 0);
  EXPECT_EQ(g[23], 24);
}

TEST(IndexingApi, BadIndicesNameTheFixAndChangeNothing) {
  Tensor x = arange24();
  EXPECT_ERROR_HAS(x.index({0, 0, 0, 0}), "too many indices for a tensor of dimension 3");
  EXPECT_ERROR_HAS(x.index({0, 3}), "index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR_HAS(x.index({"...", 0, "..."}), "single ellipsis");
  EXPECT_ERROR_HAS(x.index({Slice(0, 2, 0)}), "step must be positive");
  EXPECT_ERROR_HAS(x.index({Slice(), longs({0, 1}, {2}), longs({0, 1, 2}, {3})}),
                   "could not be broadcast together with shapes [2], [3]");
  EXPECT_ERROR_HAS(x.index({tensor({0.0}, {1})}), "must be int64 or bool");
  EXPECT_ERROR_HAS(x.index({bools({1, 0, 1}, {3})}), "does not match the shape");
  EXPECT_ERROR_HAS(TensorIndex("::"), "the only string index is \"...\"");
  EXPECT_ERROR_HAS(x.index_put_({Slice(), longs({0}, {1})}, ones({5}, kFloat64)),
                   "cannot be broadcast to indexing result of shape [2, 1, 4]");
  EXPECT_ERROR_HAS(x.index_put_({longs({0}, {1})}, ones({1, 3, 4})), "dtypes match");
  EXPECT_EQ(values(x), values(arange24())) << "failed puts leave the tensor as it was";
}

}  // namespace
