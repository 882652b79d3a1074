// Class-weighted losses as LibTorch has them: cross_entropy / nll_loss weight (PyTorch's
// weighted mean), BCEWithLogitsLoss weight and pos_weight. Expected values from PyTorch 1.13
// (float64), e.g. F.cross_entropy(x, t, weight=w, reduction='mean').
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace {

using namespace sloth;

Tensor X() {
  return tensor({0.2, -1.0, 0.5, 1.5, 0.3, -0.7, -0.4, 0.9, 0.1, 0.0, 0.6, -1.2}, {4, 3},
                TensorOptions().dtype(kDouble));
}
Tensor T() { return tensor({2, 0, 1, 1}, {4}, TensorOptions().dtype(kLong)); }
Tensor W() { return tensor({0.5, 2.0, 1.5}, {3}, TensorOptions().dtype(kDouble)); }

void expect_near(const Tensor& t, const std::vector<double>& v, double tol = 1e-10) {
  auto got = t.to_vector<double>();
  ASSERT_EQ(got.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(got[i], v[i], tol) << "at " << i;
}

TEST(LossWeight, CrossEntropyAndNllWeightedMean) {
  const std::vector<double> none = {1.0124353903707566, 0.1725026383287572, 1.0868110832320586,
                                    1.0777886027225667};
  expect_near(cross_entropy(X(), T(), {.weight = W()}), {0.5582562857756898});
  expect_near(cross_entropy(X(), T(), {.reduction = Reduction::kSum, .weight = W()}),
              {3.3495377146541387});
  expect_near(cross_entropy(X(), T(), {.reduction = Reduction::kNone, .weight = W()}), none);
  expect_near(cross_entropy(X(), T(), {.ignore_index = 1, .weight = W()}), {0.5924690143497569});
  expect_near(cross_entropy(X(), T(), W(), Reduction::Sum, /*ignore_index=*/1), {1.1849380286995137});
  expect_near(cross_entropy(X(), T(), W(), Reduction::None, 1), {none[0], none[1], 0.0, 0.0});
  Tensor lp = log_softmax(X(), 1);
  expect_near(nll_loss(lp, T(), {.weight = W()}), {0.5582562857756898});
  expect_near(nll_loss(lp, T(), W(), Reduction::Sum), {3.3495377146541387});
  // LibTorch's cpp/mnist call: nll_loss(out, y, /*weight=*/{}, Reduction::Sum).
  expect_near(nll_loss(lp, T(), {}, Reduction::Sum), {nll_loss(lp, T(), {.reduction = kSum}).item()});
  // The modules take the weight in their options.
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(W()));
  expect_near(ce(X(), T()), {0.5582562857756898});
  nn::NLLLoss nll(nn::NLLLossOptions().weight(W()).reduction(kSum));
  expect_near(nll(lp, T()), {3.3495377146541387});
}

TEST(LossWeight, CrossEntropyWeightGradient) {
  Tensor x = X().requires_grad_(true);
  cross_entropy(x, T(), {.weight = W()}).backward();
  expect_near(x.grad().reshape({-1}),
              {0.09430215018795188, 0.028403261807486285, -0.12270541199543814,
               -0.02431528196321587, 0.017775895471016386, 0.00653938649219948,
               0.052759162222638746, -0.13974431520342184, 0.08698515298078315,
               0.10672428028197474, -0.13886901577340108, 0.03214473549142635});
}

TEST(LossWeight, BadWeightIsAnErrorNamingTheShapes) {
  try {
    cross_entropy(X(), T(), {.weight = tensor({1.0, 2.0}, kDouble)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one value per class (3)"), std::string::npos) << e.what();
  }
}

// ---- class weight with label_smoothing ----
// PyTorch 1.13's cross_entropy_loss_label_smoothing: the smoothing term is weighted by w[c]
// per class and its mean divides by the summed target weights. Values from
// F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ...) in float64.
TEST(LossWeight, CrossEntropyWeightWithLabelSmoothing) {
  const double e = 0.1;
  expect_near(cross_entropy(X(), T(), {.label_smoothing = e, .weight = W()}), {0.62525870267698});
  expect_near(cross_entropy(X(), T(), {.label_smoothing = e, .reduction = Reduction::kSum, .weight = W()}),
              {3.75155221606188});
  expect_near(cross_entropy(X(), T(), {.label_smoothing = e, .reduction = Reduction::kNone, .weight = W()}),
              {1.106186108255526, 0.3912530780502167, 1.1122507137909898, 1.1418623159651478});
  expect_near(cross_entropy(X(), T(), W(), Reduction::Mean, /*ignore_index=*/1, e), {0.7487195931528713});
  expect_near(cross_entropy(X(), T(), W(), Reduction::Sum, 1, e), {1.4974391863057426});
  expect_near(cross_entropy(X(), T(), W(), Reduction::None, 1, e),
              {1.106186108255526, 0.3912530780502167, 0.0, 0.0});
  // 1-D input (one sample, classes on dim 0). (sloth's cross_entropy takes [N, C] or [C]
  // inputs only; PyTorch's [N, C, d...] form is not supported, weighted or not.)
  expect_near(cross_entropy(X().select(0, 0), T().select(0, 0), {.label_smoothing = e, .weight = W()}),
              {0.7374574055036839});
  // The module takes both options.
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(W()).label_smoothing(e));
  expect_near(ce(X(), T()), {0.62525870267698});
}

TEST(LossWeight, CrossEntropyWeightWithLabelSmoothingGradient) {
  Tensor x = X().requires_grad_(true);
  cross_entropy(x, T(), {.label_smoothing = 0.1, .weight = W()}).backward();
  expect_near(x.grad().reshape({-1}),
              {0.09047657074141907, 0.016976558898514214, -0.10745312963993325,
               -0.008923384512640738, 0.009627433605074674, -0.0007040490924339394,
               0.04822274570410635, -0.12397506025219668, 0.07575231454809038,
               0.10038902649479782, -0.12312893746984327, 0.022739910975045477});
  Tensor x2 = X().requires_grad_(true);
  cross_entropy(x2, T(), {.ignore_index = 0, .label_smoothing = 0.25, .weight = W()}).backward();
  expect_near(x2.grad().reshape({-1}),
              {0.09244167444176714, -0.00017835868902969635, -0.09226331575273741, 0.0, 0.0, 0.0,
               0.04518340464688116, -0.10944128490039155, 0.06425788025351041,
               0.09914852270621714, -0.10856598547037077,
               0.00941746276415362});
  // First and second order against finite differences, every reduction, weight included.
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    auto f = [r](const std::vector<Tensor>& in) {
      return cross_entropy(in[0], T(), {.ignore_index = 1, .label_smoothing = 0.3,
                                        .reduction = r, .weight = in[1]});
    };
    std::vector<Tensor> in = {X().requires_grad_(true), W().requires_grad_(true)};
    EXPECT_TRUE(autograd::gradcheck(f, in));
    EXPECT_TRUE(autograd::gradgradcheck(f, in));
  }
}

TEST(LossWeight, BceWithLogitsWeightAndPosWeight) {
  Tensor y = tensor({1., 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0}, {4, 3}, TensorOptions().dtype(kDouble));
  Tensor pw = tensor({3.0, 0.5, 2.0}, kDouble), ew = tensor({1.0, 2.0, 0.5}, kDouble);
  expect_near(binary_cross_entropy_with_logits(X(), y, kMean, ew, pw), {1.010250092487514});
  expect_near(binary_cross_entropy_with_logits(X(), y, kSum, ew, pw), {12.123001109850168});
  expect_near(binary_cross_entropy_with_logits(X(), y, kNone, {}, pw).reshape({-1}),
              {1.7944166081447754, 0.3132616875182228, 0.9481539683602134, 1.7014132779827524,
               0.854355244468527, 2.206372097770916, 2.7390457571998574, 0.17057693736604396,
               0.7443966600735709, 0.6931471805599453, 0.21874397524294284, 0.2632824673380314});
  nn::BCEWithLogitsLoss m(nn::BCEWithLogitsLossOptions().weight(ew).pos_weight(pw));
  Tensor x = X().requires_grad_(true);
  Tensor l = m(x, y);
  expect_near(l, {1.010250092487514});
  l.backward();
  expect_near(x.grad().reshape({-1}),
              {-0.11254150067188051, 0.04482357022833252, -0.03146172239984545,
               0.0681312063494703, 0.09574041946860984, -0.05568231434734718,
               -0.149671915028113, -0.024087541447916343, 0.0218741328116225,
               0.041666666666666664, -0.029528641147850383, 0.009644800687540932});
}

}  // namespace
