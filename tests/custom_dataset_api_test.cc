// The LibTorch spellings pytorch/examples cpp/custom-dataset uses (its port is
// examples/libtorch/custom_dataset): ExpandingArray, IntArrayRef-taking pooling functions
// that nn::Functional can name, Functional with extra arguments and a trailing nullopt,
// reshape as a free function, optional/nullopt, Module::to(kCPU), x.div(255).
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"
#include "tests/support/errors.h"

namespace sloth {
namespace {

Tensor grid() { return arange(16, TensorOptions().dtype(kFloat)).view({1, 1, 4, 4}); }

TEST(CustomDatasetApi, ExpandingArrayAndIntArrayRef) {
  ExpandingArray<2> a({2, 3}), b(5);
  EXPECT_EQ(a[0], 2);
  EXPECT_EQ(a[1], 3);
  EXPECT_EQ(b[0], 5);
  EXPECT_EQ(b[1], 5);
  EXPECT_EQ(Shape(a), (Shape{2, 3}));
  EXPECT_EQ(a.size(), 2u);
  EXPECT_ERROR_HAS((ExpandingArray<2>({1, 2, 3})), "expected 2 values, got 3");
  IntArrayRef one(3), list({4, 5}), from_shape(Shape{6, 7}), from_array(a), empty;
  EXPECT_EQ(one.vec(), (Shape{3}));
  EXPECT_EQ(list.vec(), (Shape{4, 5}));
  EXPECT_EQ(from_shape.vec(), (Shape{6, 7}));
  EXPECT_EQ(from_array.vec(), (Shape{2, 3}));
  EXPECT_TRUE(empty.empty());
  optional<int> o = nullopt;
  EXPECT_FALSE(o.has_value());
}

TEST(CustomDatasetApi, PoolingTakesNumbersAndLists) {
  EXPECT_EQ(max_pool2d(grid(), 2).reshape({-1}).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(max_pool2d(grid(), 3, 1).reshape({-1}).to_vector<float>(), (std::vector<float>{10, 11, 14, 15}));
  EXPECT_EQ(max_pool2d(grid(), {2, 2}, {2, 2}).reshape({-1}).to_vector<float>(),
            (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(max_pool2d(grid(), Shape{2, 2}).reshape({-1}).to_vector<float>(),
            (std::vector<float>{5, 7, 13, 15}));
  ExpandingArray<2> stride({2, 2});
  EXPECT_EQ(max_pool2d(grid(), 3, stride, 0, 1, false).reshape({-1}).to_vector<float>(),
            (std::vector<float>{10}));
  EXPECT_EQ(avg_pool2d(grid(), 2).reshape({-1}).to_vector<float>(),
            (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
}

TEST(CustomDatasetApi, FunctionalBindsArguments) {
  auto stride = ExpandingArray<2>({2, 2});
  nn::Functional pool(max_pool2d, 3, stride, 0, 1, false);
  EXPECT_EQ(pool(grid()).reshape({-1}).to_vector<float>(), (std::vector<float>{10}));
  // As in LibTorch, a function pointer has no default arguments: every argument is bound
  // (Functional(max_pool2d, 2, 2) does not compile in either).
  nn::Functional pool2(max_pool2d, 2, 2, 0, 1, false);
  EXPECT_EQ(pool2(grid()).reshape({-1}).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  ExpandingArray<2> shape({-1, 8});
  nn::Functional flat(reshape, shape);
  EXPECT_EQ(flat(grid()).shape(), (Shape{2, 8}));
  // LibTorch passes softmax's optional dtype; sloth's log_softmax has none: dropped.
  nn::Functional ls(log_softmax, 1, nullopt);
  Tensor x = tensor({1.0, 2.0, 3.0, 0.5, 0.5, 0.5}, {2, 3}, kDouble);
  auto got = ls(x).to_vector<double>(), want = log_softmax(x, 1).to_vector<double>();
  EXPECT_EQ(got, want);
  EXPECT_NEAR(got[0], -2.40760596444438, 1e-12);  // torch.log_softmax
  nn::Sequential seq(nn::Functional(relu), nn::Functional(max_pool2d, 2, 2, 0, 1, false),
                     nn::Functional(reshape, ExpandingArray<2>({-1, 4})));
  EXPECT_EQ(seq->forward(grid() - 6.0).to_vector<float>(), (std::vector<float>{0, 1, 7, 9}));
}

TEST(CustomDatasetApi, ModuleToDeviceTypeAndNumberMethods) {
  nn::Linear fc(2, 1);
  fc->to(kCPU);
  EXPECT_TRUE(fc->weight.device().is_cpu());
  Tensor img = from_vector(std::vector<uint8_t>{0, 51, 255}, {3});
  EXPECT_EQ(img.to(kFloat).div(255).to_vector<float>(), (std::vector<float>{0.0f, 0.2f, 1.0f}));
  Tensor y = tensor({1.0, 2.0}, kDouble);
  EXPECT_EQ(y.mul(3).to_vector<double>(), (std::vector<double>{3, 6}));
  EXPECT_EQ(y.add(1, 2).to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(y.sub(0.5).to_vector<double>(), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(img.add(1).dtype(), kUInt8);
}

}  // namespace
}  // namespace sloth
