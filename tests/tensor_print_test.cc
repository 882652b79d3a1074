// Tensor::to_string / operator<<: every expected string is what PyTorch 1.13 prints for the
// same tensor (repr(t) with the default print options), checked with python3-torch.
#include <cmath>
#include <sstream>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

TEST(TensorPrint, FloatsInIntModeFixedAndScientific) {
  EXPECT_EQ(tensor({2, 2, 2}).to_string(), "tensor([2., 2., 2.])");
  EXPECT_EQ(tensor({0.1, 2.5, -3}).to_string(), "tensor([ 0.1000,  2.5000, -3.0000])");
  EXPECT_EQ(tensor({0, 1, -2}).to_string(), "tensor([ 0.,  1., -2.])");
  EXPECT_EQ(zeros({3}).to_string(), "tensor([0., 0., 0.])");
  // Magnitudes below 1e-4, or spanning more than 1000x, print in scientific notation.
  EXPECT_EQ(tensor({1e-5, 1}).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(tensor({1e9, 1}).to_string(), "tensor([1.0000e+09, 1.0000e+00])");
  // nan and inf take no part in the mode and are padded to the width of the others.
  EXPECT_EQ(tensor({NAN, INFINITY, -INFINITY, 1.5}).to_string(),
            "tensor([   nan,    inf,   -inf, 1.5000])");
}

TEST(TensorPrint, ZeroDimAndIntegerAndBoolDtypes) {
  EXPECT_EQ(tensor(3.5).to_string(), "tensor(3.5000)");
  EXPECT_EQ(tensor(7.0, kInt64).to_string(), "tensor(7)");
  EXPECT_EQ(tensor({1, 2, 3, 40}, {2, 2}, kInt64).to_string(),
            "tensor([[ 1,  2],\n"
            "        [ 3, 40]])");
  EXPECT_EQ(tensor({1, -20}, {-1}, kInt32).to_string(), "tensor([  1, -20], dtype=torch.int32)");
  EXPECT_EQ(tensor({1, 2, 255}, {-1}, kUInt8).to_string(),
            "tensor([  1,   2, 255], dtype=torch.uint8)");
  EXPECT_EQ(tensor({1, 0}, {-1}, kBool).to_string(), "tensor([ True, False])");
  EXPECT_EQ(tensor({1, 2}, {-1}, kFloat64).to_string(), "tensor([1., 2.], dtype=torch.float64)");
}

TEST(TensorPrint, EmptyTensorsShowSizeAndNonFloatDtype) {
  EXPECT_EQ(zeros({2, 0}).to_string(), "tensor([], size=(2, 0))");
  EXPECT_EQ(zeros({0}).to_string(), "tensor([])");
  EXPECT_EQ(zeros({0}, kInt64).to_string(), "tensor([], dtype=torch.int64)");
}

TEST(TensorPrint, NestedDimsWrapAndSummarize) {
  EXPECT_EQ(arange(24, kFloat32).reshape({2, 3, 4}).to_string(),
            "tensor([[[ 0.,  1.,  2.,  3.],\n"
            "         [ 4.,  5.,  6.,  7.],\n"
            "         [ 8.,  9., 10., 11.]],\n"
            "\n"
            "        [[12., 13., 14., 15.],\n"
            "         [16., 17., 18., 19.],\n"
            "         [20., 21., 22., 23.]]])");
  // Rows wrap at 80 columns.
  EXPECT_EQ((arange(30, kFloat32) * 0.5).to_string(),
            "tensor([ 0.0000,  0.5000,  1.0000,  1.5000,  2.0000,  2.5000,  3.0000,  3.5000,\n"
            "         4.0000,  4.5000,  5.0000,  5.5000,  6.0000,  6.5000,  7.0000,  7.5000,\n"
            "         8.0000,  8.5000,  9.0000,  9.5000, 10.0000, 10.5000, 11.0000, 11.5000,\n"
            "        12.0000, 12.5000, 13.0000, 13.5000, 14.0000, 14.5000])");
  // Above 1000 elements each dim shows 3 entries at each end; the formatter sees only those.
  EXPECT_EQ(arange(2000, kFloat32).to_string(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(arange(1200).reshape({40, 30}).to_string(),
            "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
            "        [  30,   31,   32,  ...,   57,   58,   59],\n"
            "        [  60,   61,   62,  ...,   87,   88,   89],\n"
            "        ...,\n"
            "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
            "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
            "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]])");
  // A suffix that would pass column 80 goes on a line of its own.
  EXPECT_EQ((arange(24, kFloat64) * 1.5).to_string(),
            "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
            "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
            "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000],\n"
            "       dtype=torch.float64)");
}

TEST(TensorPrint, ViewsPrintTheirOwnElements) {
  // A transposed view and a strided slice are read through their strides.
  Tensor m = arange(6, kFloat32).reshape({2, 3});
  EXPECT_EQ(m.t().to_string(),
            "tensor([[0., 3.],\n"
            "        [1., 4.],\n"
            "        [2., 5.]])");
  EXPECT_EQ(arange(10).slice(0, 1, 10, 3).to_string(), "tensor([1, 4, 7])");
  // A summarized view: only the shown elements set the width (1e8 would widen every entry).
  Tensor big = zeros({2000}, kInt64);
  big.index_put_({1000}, 100000000);
  EXPECT_EQ(big.to_string(), "tensor([0, 0, 0,  ..., 0, 0, 0])");
}

TEST(TensorPrint, AutogradSuffixesAndStream) {
  Tensor x = tensor({1, 2}, {-1}, TensorOptions().requires_grad());
  EXPECT_EQ(x.to_string(), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ((x * 2).to_string(), "tensor([2., 4.], grad_fn=<MulBackward0>)");
  EXPECT_EQ((x + x).to_string(), "tensor([2., 4.], grad_fn=<AddBackward0>)");
  std::ostringstream os;
  os << arange(3) * 2;  // a pending tensor is computed for printing
  EXPECT_EQ(os.str(), "tensor([0, 2, 4])");
  EXPECT_EQ(Tensor().to_string(), "[ Tensor (undefined) ]");
}

}  // namespace
}  // namespace sloth
