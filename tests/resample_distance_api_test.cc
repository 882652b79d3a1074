// LibTorch's resampling and distance API: F::interpolate and nn::Upsample (every mode, with
// size or scale_factor, align_corners, recompute_scale_factor), cosine_similarity,
// pairwise_distance, kl_div (F::kl_div with kBatchMean, nn::KLDivLoss) and nn::BCELoss.
// Expected values and gradients were computed with PyTorch 1.13 (torch.nn.functional, float64)
// and committed.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/errors.h"
#include "tests/support/pytorch_values.h"

namespace {

using namespace sloth;
namespace F = sloth::nn::functional;
using sloth::testing::values;
using sloth::testing::expect_close;

// x = sin(0.7 i + 0.3) as [1, 1, 2, 3]; the gradient is of sum(y * cos(j)) over y's elements j.
const std::vector<double> kX4 = {0.29552020666134, 0.841470984807897, 0.991664810452469, 0.675463180551151, 0.041580662433291, -0.611857890942719};

struct Case2d {
  const char* name;
  F::InterpolateFuncOptions options;
  Shape shape;
  std::vector<double> value, grad;
};

TEST(Interpolate, EveryModeOfA4dInputMatchesPyTorchWithGradients) {
  const std::vector<Case2d> cases = {
      {"nearest_s2", F::InterpolateFuncOptions().scale_factor({2.0, 2.0}),
       {1, 1, 4, 6},
       {0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.991664810452469, 0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.991664810452469, 0.675463180551151, 0.675463180551151, 0.041580662433291, 0.041580662433291, -0.611857890942719, -0.611857890942719, 0.675463180551151, 0.675463180551151, 0.041580662433291, 0.041580662433291, -0.611857890942719, -0.611857890942719},
       {3.25437484686181, -2.462769628840878, -1.204627266488787, 3.400322066613437, -0.762597893061864, -2.765616665103016}},
      {"nearest_size", F::InterpolateFuncOptions().size({3, 5}),
       {1, 1, 3, 5},
       {0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.675463180551151, 0.675463180551151, 0.041580662433291, 0.041580662433291, -0.611857890942719},
       {2.784134777981732, -0.797737112612897, -1.564773882748289, -0.834645831088402, 1.751300740182688, 0.136737218207834}},
      {"nearest_sf17", F::InterpolateFuncOptions().scale_factor({1.7, 1.7}),
       {1, 1, 3, 5},
       {0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.29552020666134, 0.29552020666134, 0.841470984807897, 0.841470984807897, 0.991664810452469, 0.675463180551151, 0.675463180551151, 0.041580662433291, 0.041580662433291, -0.611857890942719},
       {2.784134777981732, -0.797737112612897, -1.564773882748289, -0.834645831088402, 1.751300740182688, 0.136737218207834}},
      {"nearest_exact", F::InterpolateFuncOptions().size({3, 5}).mode(kNearestExact),
       {1, 1, 3, 5},
       {0.29552020666134, 0.29552020666134, 0.841470984807897, 0.991664810452469, 0.991664810452469, 0.675463180551151, 0.675463180551151, 0.041580662433291, -0.611857890942719, -0.611857890942719, 0.675463180551151, 0.675463180551151, 0.041580662433291, -0.611857890942719, -0.611857890942719},
       {1.54030230586814, -0.416146836547142, -1.643636117464057, 0.409186641025191, 1.597756213075797, -0.012446296035261}},
      {"bilinear_f", F::InterpolateFuncOptions().size({3, 5}).mode(kBilinear).align_corners(false),
       {1, 1, 3, 5},
       {0.29552020666134, 0.513900517919962, 0.841470984807897, 0.93158728019464, 0.991664810452469, 0.485491693606245, 0.467905345611985, 0.441525823620594, 0.290552405301162, 0.189903459754875, 0.675463180551151, 0.421910173304007, 0.041580662433291, -0.350482469592315, -0.611857890942719},
       {1.754063562247607, -0.056137735100062, -1.746854259908801, -0.406533931556899, 1.748488128247794, 0.181990145993029}},
      {"bilinear_t", F::InterpolateFuncOptions().size({3, 5}).mode(kBilinear).align_corners(true),
       {1, 1, 3, 5},
       {0.29552020666134, 0.568495595734618, 0.841470984807897, 0.916567897630183, 0.991664810452469, 0.485491693606245, 0.46350875861342, 0.441525823620594, 0.315714641687734, 0.189903459754875, 0.675463180551151, 0.358521921492221, 0.041580662433291, -0.285138614254714, -0.611857890942719},
       {1.652024817328275, -0.060373241531205, -1.640580008558327, -0.454985015688222, 1.880408888833706, 0.09852046953844}},
      {"bilinear_sf15", F::InterpolateFuncOptions().scale_factor({1.5, 1.5}).mode(kBilinear),
       {1, 1, 3, 4},
       {0.29552020666134, 0.568495595734618, 0.866503289081992, 0.966632506178373, 0.485491693606245, 0.46350875861342, 0.399588762976307, 0.231840520399161, 0.675463180551151, 0.358521921492221, -0.067325763129377, -0.502951465380051},
       {1.014244888868071, 0.292175060043445, -0.500211423394321, -0.856971428816951, -0.620242101842639, 0.257982956674541}},
      {"bilinear_sf15_recompute", F::InterpolateFuncOptions().scale_factor({1.5, 1.5}).mode(kBilinear).recompute_scale_factor(true),
       {1, 1, 3, 4},
       {0.29552020666134, 0.636739443002938, 0.897793669424611, 0.991664810452469, 0.485491693606245, 0.458013024865213, 0.347167437170949, 0.189903459754875, 0.675463180551151, 0.279286606727489, -0.203458795082713, -0.611857890942719},
       {0.928978214043101, 0.466294815861121, -0.589064504387028, -0.760809032672818, -0.705178471815208, 0.246756930502977}},
      {"bicubic_f", F::InterpolateFuncOptions().size({3, 5}).mode(kBicubic).align_corners(false),
       {1, 1, 3, 5},
       {0.200295826895798, 0.498268730720108, 0.910905908625137, 1.092199914183287, 1.15197503314674, 0.489712417124868, 0.486549746250144, 0.441525823620594, 0.284367394295807, 0.165747712823766, 0.779129007353938, 0.47483076178018, -0.027854261383949, -0.523465125591674, -0.820479607499209},
       {2.167736119657474, -0.234292895649292, -2.118905751860165, -0.743047712542519, 2.097665258072639, 0.30586089224453}},
      {"bicubic_t", F::InterpolateFuncOptions().size({4, 4}).mode(kBicubic).align_corners(true),
       {1, 1, 4, 4},
       {0.29552020666134, 0.652909388838287, 0.949415423786361, 0.991664810452469, 0.415131883626651, 0.546134014812439, 0.576681517855014, 0.486852108161391, 0.55585150358584, 0.420515927723207, 0.138171040288724, -0.107045188651642, 0.675463180551151, 0.313740553697359, -0.234562865642623, -0.611857890942719},
       {0.649799200139759, 0.338761643931241, -0.52884830187521, 0.670737814102719, 0.188362734877169, -0.603485094111831}},
      {"area", F::InterpolateFuncOptions().size({1, 2}).mode(kArea),
       {1, 1, 1, 2},
       {0.46350875861342, 0.315714641687734},
       {0.25, 0.385075576467035, 0.135075576467035, 0.25, 0.385075576467035, 0.135075576467035}},
  };
  for (const Case2d& c : cases) {
    const Tensor x = tensor(kX4, {1, 1, 2, 3}, kFloat64).requires_grad_();
    const Tensor y = F::interpolate(x, c.options);
    EXPECT_EQ(y.shape(), c.shape) << c.name;
    expect_close(values(y), c.value, c.name);
    std::vector<double> w;
    for (int64_t j = 0; j < y.numel(); ++j) w.push_back(std::cos(static_cast<double>(j)));
    (y * tensor(w, y.shape(), kFloat64)).sum().backward();
    expect_close(values(x.grad()), c.grad, std::string(c.name) + " grad");
  }
}

TEST(Interpolate, ThreeAndFiveDimensionalInputs) {
  // x = sin(0.9 i) as [1, 2, 4].
  const Tensor x3 = tensor({0.0, 0.783326909627483, 0.973847630878195, 0.42737988023383, -0.442520443294852, -0.977530117665097, -0.772764487555987, 0.01681390048435}, {1, 2, 4}, kFloat64);
  struct Case1d {
    const char* name;
    F::InterpolateFuncOptions options;
    Shape shape;
    std::vector<double> value;
  };
  const std::vector<Case1d> cases = {
      {"linear_f", F::InterpolateFuncOptions().size({7}).mode(kLinear), {1, 2, 7}, {0.0, 0.279759610581244, 0.727374987511235, 0.878587270252839, 0.934814220117884, 0.622546934035389, 0.42737988023383, -0.442520443294852, -0.633595326998511, -0.939315140924365, -0.875147302610542, -0.716366031267392, -0.265178380958628, 0.01681390048435}},
      {"linear_down", F::InterpolateFuncOptions().size({3}).mode(kLinear), {1, 2, 3}, {0.130554484937914, 0.878587270252839, 0.518457838674558, -0.53168872235656, -0.875147302610542, -0.114782497522373}},
      {"nearest1d", F::InterpolateFuncOptions().size({6}), {1, 2, 6}, {0.0, 0.0, 0.783326909627483, 0.973847630878195, 0.973847630878195, 0.42737988023383, -0.442520443294852, -0.442520443294852, -0.977530117665097, -0.772764487555987, -0.772764487555987, 0.01681390048435}},
      {"area1d", F::InterpolateFuncOptions().size({3}).mode(kArea), {1, 2, 3}, {0.391663454813742, 0.878587270252839, 0.700613755556012, -0.710025280479975, -0.875147302610542, -0.377975293535819}},
  };
  for (const Case1d& c : cases) {
    const Tensor y = F::interpolate(x3, c.options);
    EXPECT_EQ(y.shape(), c.shape) << c.name;
    expect_close(values(y), c.value, c.name);
  }
  // x = sin(1.1 i) as [1, 1, 2, 2, 2], trilinear to 3x3x3.
  const Tensor x5 = tensor({0.0, 0.891207360061435, 0.80849640381959, -0.157745694143249, -0.951602073889516, -0.705540325570392, 0.311541363513379, 0.988168233877001}, {1, 1, 2, 2, 2}, kFloat64);
  const Tensor y5 = F::interpolate(x5, F::InterpolateFuncOptions().size({3, 3, 3}).mode(kTrilinear));
  EXPECT_EQ(y5.shape(), (Shape{1, 1, 3, 3, 3}));
  expect_close(values(y5), {0.0, 0.445603680030718, 0.891207360061435, 0.404248201909795, 0.385489517434444, 0.366730832959093, 0.80849640381959, 0.325375354838171, -0.157745694143249, -0.475801036944758, -0.191483759849618, 0.092833517245522, 0.042108923360863, 0.148065658458531, 0.254022393556199, 0.560018883666484, 0.48761507676668, 0.415211269866876, -0.951602073889516, -0.828571199729954, -0.705540325570392, -0.320030355188069, -0.089358200517382, 0.141313954153304, 0.311541363513379, 0.649854798695189, 0.988168233877}, "trilinear");
}

TEST(Interpolate, Float32ComputesItsCoordinatesInFloatAndKeepsItsDtype) {
  const Tensor x = tensor(kX4, {1, 1, 2, 3}, kFloat32);
  const Tensor y = F::interpolate(x, F::InterpolateFuncOptions().size({3, 5}).mode(kBilinear));
  EXPECT_EQ(y.dtype(), kFloat32);
  const std::vector<double> want = values(F::interpolate(
      tensor(kX4, {1, 1, 2, 3}, kFloat64), F::InterpolateFuncOptions().size({3, 5}).mode(kBilinear)));
  expect_close(values(y), want, "bilinear float32", 1e-6);
  // Nearest reads whole elements, whatever the dtype (uint8 images too).
  const Tensor img = tensor({1, 2, 3, 4}, {1, 1, 2, 2}).to(kUInt8);
  const Tensor up = F::interpolate(img, F::InterpolateFuncOptions().scale_factor({2.0, 2.0}));
  EXPECT_EQ(up.dtype(), kUInt8);
  EXPECT_EQ(up.to_vector<uint8_t>(),
            (std::vector<uint8_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Interpolate, UpsampleModuleForwardsItsOptionsAndPrints) {
  nn::Upsample up(nn::UpsampleOptions().scale_factor({1.5, 1.5}).mode(kBilinear).align_corners(false));
  const Tensor x = tensor(kX4, {1, 1, 2, 3}, kFloat64);
  expect_close(values(up(x)),
               values(F::interpolate(x, F::InterpolateFuncOptions().scale_factor({1.5, 1.5}).mode(kBilinear))),
               "Upsample");
  std::ostringstream s;
  s << up;
  EXPECT_EQ(s.str(), "Upsample(scale_factor=[1.5, 1.5], mode=kBilinear)");
  // In a Sequential between convolutions, as a decoder uses it; gradients reach the first conv.
  manual_seed(0);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 2, 3).padding(1)),
                     nn::Upsample(nn::UpsampleOptions().scale_factor({2.0, 2.0})),
                     nn::Conv2d(nn::Conv2dOptions(2, 1, 3).padding(1)));
  const Tensor out = net->forward(randn({2, 1, 4, 4}));
  EXPECT_EQ(out.shape(), (Shape{2, 1, 8, 8}));
  out.pow(2).mean().backward();
  const Tensor g = net->parameters()[0].grad();
  ASSERT_TRUE(g.defined());
  EXPECT_GT(g.abs().sum().item<double>(), 0.0);
}

TEST(Interpolate, BadOptionsAreErrorsNamingTheFix) {
  const Tensor x = zeros({1, 1, 2, 3});
  EXPECT_ERROR_HAS(F::interpolate(x), "either size or scale_factor");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().size({4, 4}).scale_factor({2.0})),
                   "only one of size or scale_factor");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().size({4, 4, 4})),
                   "Input is 2D, size is 3");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().size({4}).mode(kLinear)),
                   "linear mode needs a 3-D input");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().size({4, 4}).align_corners(true)),
                   "align_corners option can only be set");
  EXPECT_ERROR_HAS(F::interpolate(zeros({2, 3}), F::InterpolateFuncOptions().size({4})),
                   "expected a 3-D, 4-D or 5-D input");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().scale_factor({0.1, 0.1})),
                   "greater than 0");
  EXPECT_ERROR_HAS(F::interpolate(x.to(kInt64), F::InterpolateFuncOptions().size({4, 4}).mode(kBilinear)),
                   "floating-point input");
  EXPECT_ERROR_HAS(F::interpolate(x, F::InterpolateFuncOptions().size({4, 4}).mode(kBilinear).antialias(true)),
                   "antialias");
}

// a = sin(i) and b = cos(0.5 i) as [2, 3].
const std::vector<double> kA = {0.0, 0.841470984807897, 0.909297426825682, 0.141120008059867, -0.756802495307928, -0.958924274663138}, kB = {1.0, 0.877582561890373, 0.54030230586814, 0.070737201667703, -0.416146836547142, -0.801143615546934};

TEST(Distance, CosineSimilarityMatchesPyTorchWithGradients) {
  const Tensor a = tensor(kA, {2, 3}, kFloat64).requires_grad_();
  const Tensor b = tensor(kB, {2, 3}, kFloat64).requires_grad_();
  const Tensor c = F::cosine_similarity(a, b, F::CosineSimilarityFuncOptions().dim(1));
  expect_close(values(c), {0.691237006177016, 0.981676581795638}, "cosine_similarity");
  (c * tensor({1.0, -2.0}, {2}, kFloat64)).sum().backward();
  expect_close(values(a.grad()), {0.56209292056314, 0.114328164853205, -0.105800182241964, 0.05617546942126, -0.235173767165485, 0.19387096711532}, "cosine_similarity grad x1");
  expect_close(values(b.grad()), {-0.335213845025499, 0.178807058521212, 0.329992832878793, -0.084090806933843, 0.362865807069294, -0.195912197296038}, "cosine_similarity grad x2");
  const Tensor a0 = tensor(kA, {2, 3}, kFloat64), b0 = tensor(kB, {2, 3}, kFloat64);
  expect_close(values(cosine_similarity(a0, b0, 0)), {0.070560887370668, 0.958335366041138, 0.986337113042597}, "cosine_similarity dim 0");
  expect_close(values(nn::CosineSimilarity()(a0, b0.slice(0, 0, 1))), {0.691237006177016, -0.589595647341559}, "broadcast");
  // A zero vector has similarity 0 (its squared norm is clamped at eps^2), not nan.
  expect_close(values(cosine_similarity(zeros({1, 3}, kFloat64), b0.slice(0, 0, 1))), {0.0}, "zero");
  EXPECT_ERROR_HAS(cosine_similarity(zeros({2, 3}), zeros({4, 3})), "must broadcast");
  EXPECT_ERROR_HAS(cosine_similarity(zeros({2}, kInt64), zeros({2}, kInt64), 0),
                   "floating point");
}

TEST(Distance, PairwiseDistanceMatchesPyTorchWithGradients) {
  const Tensor a = tensor(kA, {2, 3}, kFloat64).requires_grad_();
  const Tensor b = tensor(kB, {2, 3}, kFloat64);
  const Tensor d = F::pairwise_distance(a, b);
  expect_close(values(d), {1.0665177499976, 0.381960596879446}, "pairwise_distance");
  d.sum().backward();
  expect_close(values(a.grad()), {-0.937629964435426, -0.033858392963978, 0.345982165752396, 0.184269809418008, -0.891858117156264, -0.413078365688079}, "pairwise_distance grad");
  const Tensor d1 = nn::PairwiseDistance(nn::PairwiseDistanceOptions().p(1).keepdim(true))(a, b);
  EXPECT_EQ(d1.shape(), (Shape{2, 1}));
  expect_close(values(d1), {1.405105698040018, 0.568818124269155}, "p=1 keepdim");
  expect_close(values(pairwise_distance(a, b, 3, 1e-3)), {1.01565280517657, 0.351428531177109}, "p=3 eps=1e-3");
  std::ostringstream s;
  s << nn::PairwiseDistance() << " " << nn::CosineSimilarity();
  EXPECT_EQ(s.str(), "PairwiseDistance(p=2, eps=1e-06, keepdim=false) CosineSimilarity(dim=1, eps=1e-08)");
}

TEST(Losses, KlDivEveryReductionMatchesPyTorch) {
  // input = log_softmax(a, 1), target = softmax(b, 1) with target[0, 1] = 0 (adds 0, not nan).
  Tensor target = softmax(tensor(kB, {2, 3}, kFloat64), 1);
  target = where(tensor({1, 0, 1, 1, 1, 1}, {2, 3}, kFloat64) > 0, target, Scalar(0));
  struct Case { const char* name; F::KLDivFuncOptions options; std::vector<double> value, grad; };
  const std::vector<Case> cases = {
      {"mean", F::KLDivFuncOptions(), {0.035671898599846}, {-0.066236040571786, -0.0, -0.041826371602641, -0.081992646550247, -0.050387620948712, -0.034286399167708}},
      {"batchmean", F::KLDivFuncOptions().reduction(kBatchMean), {0.107015695799537}, {-0.198708121715359, -0.0, -0.125479114807924, -0.245977939650742, -0.151162862846135, -0.102859197503123}},
      {"sum", F::KLDivFuncOptions(kSum), {0.214031391599073}, {-0.397416243430719, -0.0, -0.250958229615848, -0.491955879301484, -0.302325725692271, -0.205718395006245}},
      {"none", F::KLDivFuncOptions(kNone), {0.332038377044042, 0.0, -0.133886818767612, -0.076413091654371, 0.077308731450641, 0.014984193526373}, {-0.397416243430719, -0.0, -0.250958229615848, -0.491955879301484, -0.302325725692271, -0.205718395006245}},
  };
  for (const Case& c : cases) {
    const Tensor input = log_softmax(tensor(kA, {2, 3}, kFloat64), 1).detach().requires_grad_();
    const Tensor l = F::kl_div(input, target, c.options);
    expect_close(values(l), c.value, c.name);
    l.sum().backward();
    expect_close(values(input.grad()), c.grad, std::string(c.name) + " grad");
  }
  const Tensor input = log_softmax(tensor(kA, {2, 3}, kFloat64), 1);
  expect_close(values(nn::KLDivLoss(nn::KLDivLossOptions(kBatchMean).log_target(true))(
                   input, log_softmax(tensor(kB, {2, 3}, kFloat64), 1))),
               {0.084442091941407}, "log_target batchmean");
  EXPECT_ERROR_HAS(F::kl_div(zeros({2, 3}), zeros({3, 2})), "same shape");
}

TEST(Losses, BceLossModuleAndTorchBinaryCrossEntropy) {
  const Tensor p = sigmoid(tensor(kA, {2, 3}, kFloat64));
  const Tensor t = tensor({1, 0, 1, 0, 0, 1}, {2, 3}, kFloat64);
  const Tensor w = tensor({0.5, 1, 2}, {3}, kFloat64);
  expect_close(values(nn::BCELoss(nn::BCELossOptions().weight(w))(p, t)), {0.92633539242262}, "BCELoss weight");
  expect_close(values(binary_cross_entropy(p, t, {}, kSum)), {4.665808030395984}, "binary_cross_entropy sum");
  EXPECT_ERROR_HAS(binary_cross_entropy(p, zeros({3}, kFloat64)), "same shape");
}

}  // namespace
