// Bad input: a clear sloth::Error naming the op, the shapes/values and the fix; nothing
// recorded, nothing lost, and the next operation works (invariant I7).
#include "gtest/gtest.h"
#include "tests/support/errors.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

using testing::error_of;

TEST(Errors, Shapes) {
  Tensor a = ones({2, 3}), b = ones({2, 2});
  EXPECT_ERROR_HAS(matmul(a, b), "matmul: shapes [2, 3] and [2, 2] cannot be multiplied (3 != 2)");
  EXPECT_ERROR_HAS(a + ones({4}), "add: shapes [2, 3] and [4] cannot be broadcast");
  EXPECT_ERROR_HAS(a.view({4}), "shape [4] is invalid for input [2, 3] of size 6");
  EXPECT_ERROR_HAS(a.reshape({-1, -1}), "only one dimension can be -1");
  EXPECT_ERROR_HAS(cat({a, ones({3, 2})}, 0), "cat: tensor 1 has shape [3, 2]");
  EXPECT_ERROR_HAS(a.expand({3, 3}), "expand: the size 2 of the input [2, 3] must match");
  EXPECT_ERROR_HAS(linear(a, ones({4, 2})), "linear: input [2, 3] and weight [4, 2] do not match");
  EXPECT_ERROR_HAS(a.add_(ones({4, 2, 3})), "add_: output with shape [2, 3] doesn't match the broadcast shape [4, 2, 3]");
}

TEST(Errors, Dims) {
  Tensor a = ones({2, 3});
  EXPECT_ERROR_HAS(sum(a, {2}), "sum: dim 2 is out of range for a tensor of rank 2 (valid: -2 to 1)");
  EXPECT_ERROR_HAS(softmax(a, -3), "softmax: dim -3 is out of range");
  EXPECT_ERROR_HAS(a.transpose(0, 5), "transpose: dim 5 is out of range");
  EXPECT_ERROR_HAS(a.permute({0, 0}), "repeats in permutation");
  EXPECT_ERROR_HAS(ones({2, 2, 2}).t(), "t: expects a tensor with <= 2 dims");
}

// torch.softmax on an int64 tensor raises "not implemented for 'Long'" instead of promoting.
TEST(Errors, SoftmaxOfIntegersIsRefused) {
  Tensor i = arange(6, kInt64).view({2, 3});
  EXPECT_ERROR_HAS(softmax(i, 1), "softmax: input must be a floating-point tensor (float32 or "
                                  "float64), got int64; convert it with .to(kFloat32)");
  EXPECT_ERROR_HAS(log_softmax(i, 1), "log_softmax: input must be a floating-point tensor");
  EXPECT_NEAR(softmax(i.to(kFloat32), 1)[0][2].item(), 0.66524096, 1e-6);
}

TEST(Errors, Indices) {
  Tensor a = ones({2, 3});
  EXPECT_ERROR_HAS(a.select(0, 2), "select: index 2 is out of range for dim 0 of size 2");
  EXPECT_ERROR_HAS(a[-3], "index -3 is out of range");
  EXPECT_ERROR_HAS(a.narrow(1, 2, 2), "narrow: start 2 with length 2 is out of range");
  EXPECT_ERROR_HAS(index_select(a, 0, ones({2})), "index_select: index must be an int64 or int32 tensor, got float32");
  EXPECT_ERROR_HAS(a.item(), "item: only a tensor with one element");
}

TEST(Errors, Dtypes) {
  Tensor i = from_vector<int64_t>({1, 2}, {2});
  EXPECT_ERROR_HAS(i.requires_grad_(), "only floating-point tensors can require gradients");
  EXPECT_ERROR_HAS(i.div_(2.0), "div_: result type float32 can't be cast to the desired output type int64");
  EXPECT_ERROR_HAS(mean(i), "mean: input must be a floating-point tensor");
  EXPECT_ERROR_HAS(where(i, i, i), "where: condition must be a bool tensor");
  EXPECT_ERROR_HAS(cross_entropy(ones({2, 3}), ones({2})), "cross_entropy: target must be an int64 tensor");
  EXPECT_ERROR_HAS(matmul(ones({2, 2}), ones({2, 2}, kFloat64)), "matmul: operands must have the same dtype");
  EXPECT_ERROR_HAS(-(ones({2}) > 0.0), "neg: not supported on bool tensors");
}

TEST(Errors, NothingChangesAndPendingWorkSurvives) {
  Tensor x = tensor({1, 2, 3});
  Tensor pending = x * 2.0;
  Tensor v = x.slice(0, 0, 2);
  const int64_t ver = x.version();
  EXPECT_ERROR_HAS(v.add_(ones({3})), "add_");
  EXPECT_ERROR_HAS(x.copy_(ones({4})), "copy_: src [4] cannot be broadcast to self [3]");
  EXPECT_EQ(x.version(), ver);
  EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  v.add_(1);  // the next operation works
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 3, 3}));
}

TEST(Errors, UndefinedTensors) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_ERROR_HAS(u + ones({1}), "add: operand 0 is an undefined tensor");
  EXPECT_ERROR_HAS(u.shape(), "the tensor is undefined");
}

TEST(Errors, Factories) {
  EXPECT_ERROR_HAS(zeros({2, -1}), "full: negative size -1");
  EXPECT_ERROR_HAS(arange(0, 10, 0), "arange: step must be nonzero");
  EXPECT_ERROR_HAS(randint(5, 5, {2}), "randint: low (5) must be less than high (5)");
  EXPECT_ERROR_HAS(tensor({1, 2, 3}, {2, 2}), "shape [2, 2] is invalid for input [3] of size 3");
  EXPECT_ERROR_HAS(dropout(ones({2}), 1.5, true), "dropout: probability has to be between 0 and 1");
}

}  // namespace
}  // namespace sloth
