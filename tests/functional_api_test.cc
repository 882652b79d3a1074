// LibTorch's torch::nn::functional spellings (F::relu(x, F::ReLUFuncOptions().inplace(true)),
// F::pad(x, F::PadFuncOptions({1, 1}).mode(kReflect)), ...): values and gradients against
// PyTorch 1.13 (float64; the expected values below were computed there with
// torch.nn.functional and committed), in-place forms, and the errors.
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

Tensor leaf(const std::vector<double>& v, Shape shape) {
  return tensor(v, std::move(shape), kFloat64).requires_grad_();
}

struct ActivationCase {
  const char* name;
  std::vector<double> value, grad;  // f(x); d/dx sum(f(x) * w), w = (i + 1) / 4
};

// x = [-3, -1.5, -0.5, 0, 0.5, 1, 1.5, 6] (normalize2: [0, 0, 0, 0, 0.5, 1, 1.5, 6]): the
// kinks (0, the shrink lambdas, relu6's 6, softplus' threshold at 1.5 * beta 2 = 3) included.
const std::vector<ActivationCase>& activation_cases() {
  static const std::vector<ActivationCase> cases = {
    {"relu", {0, 0, 0, 0, 0.5, 1, 1.5, 6}, {0, 0, 0, 0, 1.25, 1.5, 1.75, 2}},
    {"relu6", {0, 0, 0, 0, 0.5, 1, 1.5, 6}, {0, 0, 0, 0, 1.25, 1.5, 1.75, 0}},
    {"leaky_relu", {-0.30000000000000004, -0.15000000000000002, -0.050000000000000003, 0, 0.5, 1, 1.5, 6}, {0.025000000000000001, 0.050000000000000003, 0.075000000000000011, 0.10000000000000001, 1.25, 1.5, 1.75, 2}},
    {"elu", {-1.4253193974482041, -1.1653047597773554, -0.59020401043104986, 0, 0.5, 1, 1.5, 6}, {0.018670150637948978, 0.16734762011132237, 0.68234699217671257, 1.5, 1.25, 1.5, 1.75, 2}},
    {"selu", {-1.6705687287671118, -1.3658143533672527, -0.69175818780287135, 0, 0.52535049367774023, 1.0507009873554805, 1.5760514810332207, 6.3042059241328827}, {0.021882653020066218, 0.19614249374006201, 0.79975586478337901, 1.7580993408473766, 1.3133762341943505, 1.5760514810332207, 1.8387267278720909, 2.1014019747109609}},
    {"celu", {-1.5537396797031404, -1.0552668945179706, -0.44239843385719024, 0, 0.5, 1, 1.5, 6}, {0.055782540037107455, 0.23618327637050734, 0.58410058730355363, 1, 1.25, 1.5, 1.75, 2}},
    {"gelu", {-0.0040496940948903104, -0.10021080190328704, -0.15426876936299344, 0, 0.34573123063700656, 0.84134474606854304, 1.399789198096713, 5.9999999940804738}, {-0.00298641180104598, -0.0637345961149898, 0.099378656507877833, 0.5, 1.0843689058202035, 1.6249732058815296, 1.9730710864024643, 2.0000000709374186}},
    {"gelu_tanh", {-0.0036373920817729943, -0.10042842301976707, -0.15428599017485606, 0, 0.34571400982514394, 0.84119199060827676, 1.3995715769802328, 5.9999999999156035}, {-0.002896041657742412, -0.063855396575716539, 0.09947257234901824, 0.5, 1.084212379418303, 1.624446125768674, 1.9734938880150077, 2.0000000015419954}},
    {"silu", {-0.14227761953270035, -0.27363828570953452, -0.1887703343990727, 0, 0.3112296656009273, 0.7310585786300049, 1.2263617142904655, 5.9851642610601923}, {-0.022026026503792404, -0.020647077149571473, 0.19502910952301111, 0.5, 0.92495148412831485, 1.3915057678072302, 1.8222647700235004, 2.0246528651830498}},
    {"mish", {-0.14564746127562461, -0.29809974216680679, -0.22074377465173001, 0, 0.37524521130489513, 0.86509838826731034, 1.4033782663958028, 5.9999266340652522}, {-0.02334827863308021, -0.032048907946129329, 0.21713300843513419, 0.59999999999999998, 1.1080304691971592, 1.5735543301496884, 1.9048539737637331, 2.0002682810124202}},
    {"hardtanh", {-1, -1, -0.5, 0, 0.5, 1, 1.5, 2}, {0, 0, 0.75, 1, 1.25, 1.5, 1.75, 0}},
    {"softplus", {0.0012378425688652247, 0.024293675786871031, 0.15663084375911143, 0.34657359027997264, 0.6566308437591114, 1.0634640055214863, 1.524293675786871, 6}, {0.00061815578915869369, 0.023712936588783394, 0.20170606602749636, 0.5, 0.91382322328750609, 1.3211956169668235, 1.6670047219392581, 2}},
    {"logsigmoid", {-3.0485873515737421, -1.7014132779827524, -0.97407698418010669, -0.69314718055994529, -0.47407698418010669, -0.31326168751822286, -0.20141327798275241, -0.0024756851377304495}, {0.23814353170560831, 0.40878723809682183, 0.46684449840139086, 0.5, 0.47192583599768184, 0.40341213205499266, 0.31924466666112356, 0.0049452463132695496}},
    {"softsign", {-0.75, -0.59999999999999998, -0.33333333333333331, 0, 0.33333333333333331, 0.5, 0.59999999999999998, 0.8571428571428571}, {0.015625, 0.080000000000000016, 0.33333333333333337, 1, 0.55555555555555558, 0.375, 0.27999999999999997, 0.040816326530612235}},
    {"tanhshrink", {-2.0049452463132695, -0.5948517463551336, -0.037882842739990263, 0, 0.037882842739990263, 0.23840584404423515, 0.5948517463551336, 5.000012288349204}, {0.24753349070863995, 0.40964668053817571, 0.16016420027555445, 0, 0.26694033379259074, 0.87003848757896085, 1.4337633818836149, 1.9999508469051894}},
    {"hardshrink", {-3, -1.5, 0, 0, 0, 1, 1.5, 6}, {0.25, 0.5, 0, 0, 0, 1.5, 1.75, 2}},
    {"softshrink", {-2.5, -1, 0, 0, 0, 0.5, 1, 5.5}, {0.25, 0.5, 0, 0, 0, 1.5, 1.75, 2}},
    {"threshold", {20, 20, 20, 20, 20, 1, 1.5, 6}, {0, 0, 0, 0, 0, 1.5, 1.75, 2}},
    {"glu", {-1.1326220063944361, -0.75, 0.40878723809682183, 0.99752737684336534}, {0.094385167199536352, 0.25, -0.17625278415119588, -0.1875, 0.61318085714523274, 0.99752737684336534, 0.055929919526374827, 0.0024665092913599309}},
    {"softmax", {0.029312230751356316, 0.07585818002124356, 0.11920292202211755, 0.0024726231566347748, 0.97068776924864364, 0.92414181997875655, 0.88079707797788231, 0.99752737684336534}, {-0.028453023879735553, -0.070103716545108177, -0.10499358540350648, -0.0024665092913600489, 0.028453023879735705, 0.070103716545108066, 0.10499358540350671, 0.0024665092913598199}},
    {"log_softmax", {-3.6309780572365025, -2.1309780572365025, -1.1309780572365025, -0.63097805723650258, -5.5216966315331142, -5.0216966315331142, -4.5216966315331142, -0.021696631533114529}, {0.18377434314661933, 0.2031971975042447, -0.056793664659930521, -0.33017787599093357, 1.2240061278332071, 1.4571433500507487, 1.6793413296377198, -4.3604908075216757}},
    {"softmin", {0.73800616705299116, 0.16467143424506275, 0.060579235206973607, 0.036743163494972489, 0.5054342081552593, 0.30656134371374189, 0.18593885404508725, 0.0020655940859116155}, {0.073073569033873964, -0.024862941400120051, -0.024291373789897885, -0.023919253843856056, 0.086509592665916624, -0.024169615617305868, -0.061144326416637113, -0.001195650631973483}},
    {"normalize2", {0, 0, 0, 0, 0.079555728417572996, 0.15911145683514599, 0.23866718525271902, 0.95466874101087607}, {250000000000, 500000000000, 750000000000, 1000000000000, 0.16515366405673382, 0.17119587127832164, 0.17723807849990947, -0.0866049701760922}},
    {"normalize1", {-0.8571428571428571, -0.59999999999999998, -0.25, 0, 0.14285714285714285, 0.40000000000000002, 0.75, 1}, {0.061224489795918359, 0.32000000000000001, 0.9375, 0.16666666666666666, 0.36734693877551022, 0.47999999999999998, 0.3125, 0}},
    {"normalize3", {-0.96018439081060414, -0.48009219540530207, -0.16003073180176736, 0, 0.082762539163963089, 0.16552507832792618, 0.24828761749188927, 0.99315046996755707}, {-0.097067820928940868, 0.11575993509431122, 0.23512712029071148, 0.32006146360353471, 0.20376287278293181, 0.23571371698398558, 0.26137761093108752, -0.12161026162868044}},
    {"normalize_inf", {-1, -0.5, -0.16666666666666666, 0, 0.083333333333333329, 0.16666666666666666, 0.25, 1}, {-0.12499999999999999, 0.16666666666666666, 0.25, 0.33333333333333331, 0.20833333333333334, 0.25, 0.29166666666666669, -0.13194444444444442}},
  };
  return cases;
}

Tensor apply(const std::string& name, const Tensor& x) {
  const Tensor m = x.reshape({2, 4});
  if (name == "relu") return F::relu(x);
  if (name == "relu6") return F::relu6(x);
  if (name == "leaky_relu") return F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.1));
  if (name == "elu") return F::elu(x, F::ELUFuncOptions().alpha(1.5));
  if (name == "selu") return F::selu(x);
  if (name == "celu") return F::celu(x, F::CELUFuncOptions().alpha(2.0));
  if (name == "gelu") return F::gelu(x);
  if (name == "gelu_tanh") return F::gelu(x, F::GELUFuncOptions().approximate("tanh"));
  if (name == "silu") return F::silu(x);
  if (name == "mish") return F::mish(x);
  if (name == "hardtanh") return F::hardtanh(x, F::HardtanhFuncOptions().min_val(-1).max_val(2));
  if (name == "softplus") return F::softplus(x, F::SoftplusFuncOptions().beta(2).threshold(3));
  if (name == "logsigmoid") return F::logsigmoid(x);
  if (name == "softsign") return F::softsign(x);
  if (name == "tanhshrink") return F::tanhshrink(x);
  if (name == "hardshrink") return F::hardshrink(x, F::HardshrinkFuncOptions(0.5));
  if (name == "softshrink") return F::softshrink(x, F::SoftshrinkFuncOptions().lambda(0.5));
  if (name == "threshold") return F::threshold(x, F::ThresholdFuncOptions(0.5, 20));
  if (name == "glu") return F::glu(m, 1);
  if (name == "softmax") return F::softmax(m, F::SoftmaxFuncOptions(0));
  if (name == "log_softmax") return F::log_softmax(m, 1);
  if (name == "softmin") return F::softmin(m, F::SoftminFuncOptions(1));
  if (name == "normalize2") return F::normalize(m, F::NormalizeFuncOptions().p(2).dim(1));
  if (name == "normalize1") return F::normalize(m, F::NormalizeFuncOptions().p(1).dim(0));
  if (name == "normalize3") return F::normalize(m, F::NormalizeFuncOptions().p(3).dim(1));
  if (name == "normalize_inf")
    return F::normalize(m, F::NormalizeFuncOptions().p(INFINITY).dim(1));
  ADD_FAILURE() << "no case " << name;
  return x;
}

TEST(FunctionalApi, ActivationsMatchPyTorchValuesAndGradients) {
  for (const ActivationCase& c : activation_cases()) {
    const std::string name = c.name;
    const Tensor x = leaf(name == "normalize2" ? std::vector<double>{0, 0, 0, 0, 0.5, 1, 1.5, 6}
                                               : std::vector<double>{-3, -1.5, -0.5, 0, 0.5, 1, 1.5, 6},
                          {8});
    const Tensor y = apply(name, x);
    std::vector<double> w;
    for (int64_t i = 0; i < y.numel(); ++i) w.push_back((i + 1) / 4.0);
    (y * tensor(w, y.shape(), kFloat64)).sum().backward();
    expect_close(values(y), c.value, name + " value");
    expect_close(values(x.grad()), c.grad, name + " grad");
  }
}

TEST(FunctionalApi, InplaceFormsWriteTheInputAndKeepTheGradient) {
  Tensor a = tensor({-1.0, 2.0, -3.0}, {3});
  Tensor r = F::relu(a, F::ReLUFuncOptions().inplace(true));
  expect_close(values(a), {0, 2, 0}, "relu_ input");
  expect_close(values(r), {0, 2, 0}, "relu_ result");
  Tensor b = tensor({-1.0, 2.0, 7.0}, {3});
  F::relu6(b, true);
  expect_close(values(b), {0, 2, 6}, "relu6 inplace");
  // On a non-leaf the gradient goes through the in-place write, as PyTorch's leaky_relu_.
  Tensor x = leaf({-2, 0.5, 3}, {3});
  Tensor h = x * 2;
  F::leaky_relu(h, F::LeakyReLUFuncOptions().negative_slope(0.5).inplace(true));
  expect_close(values(h), {-2, 1, 6}, "leaky_relu_ value");
  h.sum().backward();
  expect_close(values(x.grad()), {1, 2, 2}, "leaky_relu_ grad");
}

struct PadCase {
  const char* mode;
  std::vector<double> shape, value, grad;  // x = arange(1, 13) as [1, 1, 3, 4]; w = arange(1, n + 1)
};

TEST(FunctionalApi, PadModesMatchPyTorch) {
  const std::vector<PadCase> cases = {
    {"constant", {1, 1, 5, 4}, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 1, 2, 3, 2.5, 5, 6, 7, 2.5, 9, 10, 11}, {10, 11, 12, 0, 14, 15, 16, 0, 18, 19, 20, 0}},
    {"reflect", {1, 1, 6, 9}, {12, 11, 10, 9, 10, 11, 12, 11, 10, 8, 7, 6, 5, 6, 7, 8, 7, 6, 4, 3, 2, 1, 2, 3, 4, 3, 2, 8, 7, 6, 5, 6, 7, 8, 7, 6, 12, 11, 10, 9, 10, 11, 12, 11, 10, 8, 7, 6, 5, 6, 7, 8, 7, 6}, {22, 71, 70, 44, 93, 294, 291, 186, 44, 142, 140, 88}},
    {"replicate", {1, 1, 6, 7}, {1, 1, 1, 2, 3, 4, 4, 5, 5, 5, 6, 7, 8, 8, 9, 9, 9, 10, 11, 12, 12, 9, 9, 9, 10, 11, 12, 12, 9, 9, 9, 10, 11, 12, 12, 9, 9, 9, 10, 11, 12, 12}, {6, 4, 5, 13, 27, 11, 12, 27, 318, 114, 118, 248}},
    {"circular", {1, 1, 3, 9}, {5, 6, 7, 8, 5, 6, 7, 8, 5, 1, 2, 3, 4, 1, 2, 3, 4, 1, 5, 6, 7, 8, 5, 6, 7, 8, 5}, {42, 26, 28, 30, 84, 52, 56, 60, 0, 0, 0, 0}},
  };
  const auto options = [](const std::string& m) {
    if (m == "constant") return F::PadFuncOptions({1, -1, 2, 0}).mode(kConstant).value(2.5);
    if (m == "reflect") return F::PadFuncOptions({3, 2, 2, 1}).mode(kReflect);
    if (m == "replicate") return F::PadFuncOptions({2, 1, 0, 3}).mode(kReplicate);
    return F::PadFuncOptions({4, 1, 1, -1}).mode(kCircular);
  };
  for (const PadCase& c : cases) {
    std::vector<double> xs;
    for (int i = 1; i <= 12; ++i) xs.push_back(i);
    const Tensor x = leaf(xs, {1, 1, 3, 4});
    const Tensor y = F::pad(x, options(c.mode));
    Shape want_shape;
    for (double d : c.shape) want_shape.push_back(static_cast<int64_t>(d));
    ASSERT_EQ(y.shape(), want_shape) << c.mode;
    std::vector<double> w;
    for (int64_t i = 1; i <= y.numel(); ++i) w.push_back(static_cast<double>(i));
    (y * tensor(w, y.shape(), kFloat64)).sum().backward();
    expect_close(values(y), c.value, std::string(c.mode) + " value");
    expect_close(values(x.grad()), c.grad, std::string(c.mode) + " grad");
  }
}

TEST(FunctionalApi, LossesTakeLibTorchOptions) {
  // Probabilities 0 and 1 give finite losses: PyTorch clamps each log at -100.
  const Tensor p = tensor({0.0, 0.2, 0.7, 1.0, 0.5, 0.9}, {6}, kFloat64);
  const Tensor t = tensor({0.0, 1.0, 1.0, 0.0, 0.3, 1.0}, {6}, kFloat64);
  const Tensor wt = tensor({1.0, 2.0, 0.5, 1.0, 3.0, 1.0}, {6}, kFloat64);
  EXPECT_NEAR(F::binary_cross_entropy(p, t, F::BinaryCrossEntropyFuncOptions().weight(wt)).item(),
              17.597002559029203, 1e-12);
  EXPECT_NEAR(F::binary_cross_entropy(p, t, F::BinaryCrossEntropyFuncOptions(kSum).weight(wt)).item(),
              105.58201535417523, 1e-11);
  expect_close(values(F::binary_cross_entropy(p, t, kNone)),
               {0, 1.6094379124341003, 0.35667494393873245, 100, 0.69314718055994529,
                0.10536051565782628},
               "bce none");
  const Tensor p2 = leaf({0.1, 0.2, 0.7, 0.95, 0.5, 0.9}, {6});
  const Tensor l = F::binary_cross_entropy(p2, t, F::BinaryCrossEntropyFuncOptions().weight(wt));
  l.backward();
  EXPECT_NEAR(l.item(), 1.4471846905645076, 1e-12);
  expect_close(values(p2.grad()),
               {0.18518518518518515, -1.6666666666666663, -0.11904761904761905, 3.3333333333333304,
                0.40000000000000008, -0.1851851851851852},
               "bce grad", 1e-10);

  const Tensor x = leaf({1, 2, 0.5, 0.1, -1, 3, 2, 2, 2, 0, 1, -2}, {4, 3});
  const Tensor y = tensor({1.0, 2.0, 0.0, 2.0}, {4}).to(kInt64);
  const Tensor ce = F::cross_entropy(
      x, y, F::CrossEntropyFuncOptions().label_smoothing(0.1).ignore_index(0));
  ce.backward();
  EXPECT_NEAR(ce.item(), 1.3436072955010965, 1e-12);
  expect_close(values(x.grad()),
               {0.065963521429605237, -0.10160053804052362, 0.035637016610918386,
                0.0059767574583367809, -0.0054230537823086421, -0.0005537036760281561, 0, 0, 0,
                0.075387709003028588, 0.22401705978830261, -0.29940476879133121},
               "cross_entropy grad", 1e-10);

  const Tensor a = tensor({0.0, 0.5, 2.0, -3.0}, {4}, kFloat64);
  const Tensor b = tensor({0.2, -0.5, 1.0, 1.0}, {4}, kFloat64);
  EXPECT_NEAR(F::smooth_l1_loss(a, b, F::SmoothL1LossFuncOptions(kSum).beta(2)).item(), 3.51, 1e-12);
  EXPECT_NEAR(F::smooth_l1_loss(a, b, kSum, 2.0).item(), 3.51, 1e-12);
  EXPECT_NEAR(F::huber_loss(a, b, F::HuberLossFuncOptions().delta(0.5)).item(), 0.66125, 1e-12);
  EXPECT_NEAR(F::mse_loss(a, b).item(), (0.04 + 1 + 1 + 16) / 4, 1e-12);
  EXPECT_NEAR(F::l1_loss(a, b, kSum).item(), 0.2 + 1 + 1 + 4, 1e-12);
}

TEST(FunctionalApi, EmbeddingPaddingIdxGetsNoGradient) {
  std::vector<double> wv;
  for (int i = 0; i < 12; ++i) wv.push_back(i);
  const Tensor w = leaf(wv, {4, 3});
  const Tensor idx = tensor({0.0, 2.0, 1.0, 2.0}, {2, 2}).to(kInt64);
  const Tensor e = F::embedding(idx, w, F::EmbeddingFuncOptions().padding_idx(-2));
  std::vector<double> g;
  for (int i = 1; i <= 12; ++i) g.push_back(i);
  (e * tensor(g, {2, 2, 3}, kFloat64)).sum().backward();
  expect_close(values(e), {0, 1, 2, 6, 7, 8, 3, 4, 5, 6, 7, 8}, "embedding value");
  expect_close(values(w.grad()), {1, 2, 3, 7, 8, 9, 0, 0, 0, 0, 0, 0}, "embedding grad");
  // one_hot infers the class count from the largest index, as PyTorch.
  const Tensor oh = F::one_hot(tensor({2.0, 0.0}, {2}).to(kInt64));
  EXPECT_EQ(oh.shape(), (Shape{2, 3}));
  expect_close(values(oh), {0, 0, 1, 1, 0, 0}, "one_hot");
}

TEST(FunctionalApi, ConvPoolNormAndFoldForwardTheirOptions) {
  manual_seed(3);
  const Tensor x = randn({2, 3, 6, 6}, kFloat64);
  const Tensor w = randn({4, 3, 3, 3}, kFloat64);
  const Tensor b = randn({4}, kFloat64);
  expect_close(values(F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).stride(2).padding(1))),
               values(conv2d(x, w, b, {2, 2}, {1, 1})), "conv2d");
  expect_close(values(F::conv2d(x, w, F::Conv2dFuncOptions().padding("same"))),
               values(conv2d(x, w, {}, {1, 1}, {1, 1})), "conv2d same");
  // conv1d's values come from PyTorch 1.13 (F.conv1d on the same float64 inputs).
  std::vector<double> xs, ws;
  for (int i = 0; i < 10; ++i) xs.push_back(0.1 * i);
  for (int i = 0; i < 12; ++i) ws.push_back(0.1 * i - 0.5);
  const Tensor x1 = tensor(xs, {1, 2, 5}, kFloat64);
  const Tensor w1 = tensor(ws, {3, 2, 2}, kFloat64);
  const Tensor b1 = tensor({0.5, -1.0, 2.0}, {3}, kFloat64);
  expect_close(values(F::conv1d(x1, w1, F::Conv1dFuncOptions().bias(b1).stride(2).padding(1))),
               {0.4, 0.05, -0.23, -0.9, -0.81, -0.77, 2.3, 2.83, 3.19}, "conv1d");
  expect_close(values(F::conv1d(x1, w1, F::Conv1dFuncOptions().padding("same").dilation(2))),
               {-0.16, -0.37, -0.51, -0.65, -0.39, 0.12, 0.19, 0.21, 0.23, 0.05, 0.4, 0.75, 0.93,
                1.11, 0.49},
               "conv1d same, dilated");
  expect_close(values(F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1))),
               values(max_pool2d(x, 3, 2, 1)), "max_pool2d");
  expect_close(values(F::avg_pool2d(x, F::AvgPool2dFuncOptions(2).count_include_pad(false))),
               values(avg_pool2d(x, 2, 2, 0, false, false)), "avg_pool2d");
  expect_close(values(F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({1, 1}))),
               values(mean(x, {2, 3}, true)), "adaptive_avg_pool2d");
  const Tensor lw = randn({6}, kFloat64);
  expect_close(values(F::layer_norm(x, F::LayerNormFuncOptions({6}).weight(lw).eps(1e-3))),
               values(layer_norm(x, {6}, lw, {}, 1e-3)), "layer_norm");
  expect_close(values(F::group_norm(x, F::GroupNormFuncOptions(3))), values(group_norm(x, 3)),
               "group_norm");
  const Tensor cols = F::unfold(x, F::UnfoldFuncOptions({2, 3}).stride(2));
  EXPECT_EQ(cols.shape(), (Shape{2, 18, 6}));
  expect_close(values(F::fold(cols, F::FoldFuncOptions({6, 6}, {2, 3}).stride(2))),
               values(fold(unfold(x, {2, 3}, {1, 1}, {0, 0}, {2, 2}), {6, 6}, {2, 3}, {1, 1},
                           {0, 0}, {2, 2})),
               "fold");
  const Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  const Tensor bn = F::batch_norm(x, rm, rv, F::BatchNormFuncOptions().training(false).eps(0.5));
  expect_close(values(bn), values(x / std::sqrt(1.5)), "batch_norm eval");
  EXPECT_NEAR(F::dropout(x, F::DropoutFuncOptions().training(false)).sum().item(), x.sum().item(),
              1e-12);
}

TEST(FunctionalApi, BadInputsNameTheFixAndChangeNothing) {
  const Tensor x = tensor({1.0, -2.0, 3.0}, {3});
  EXPECT_ERROR_HAS(F::glu(x), "must be even");
  EXPECT_ERROR_HAS(F::gelu(x, F::GELUFuncOptions().approximate("fast")), "\"none\" or \"tanh\"");
  EXPECT_ERROR_HAS(F::softplus(x, F::SoftplusFuncOptions().beta(0)), "beta must be positive");
  EXPECT_ERROR_HAS(F::normalize(x, F::NormalizeFuncOptions().dim(1)), "dim 1 is out of range");
  const Tensor img = zeros({1, 1, 3, 4});
  EXPECT_ERROR_HAS(F::pad(img, F::PadFuncOptions({4, 0, 0, 0}).mode(kReflect)),
                   "must be less than its size 4");
  EXPECT_ERROR_HAS(F::pad(img, F::PadFuncOptions({1, 1, 1})), "divisible by 2");
  EXPECT_ERROR_HAS(F::pad(img, F::PadFuncOptions({1, 1}).mode(kReflect)), "takes a 2-d or 3-d input");
  EXPECT_ERROR_HAS(F::pad(img, F::PadFuncOptions({5, 0, 0, 0}).mode(kCircular)), "more than once");
  EXPECT_ERROR_HAS(F::pad(zeros({4}), F::PadFuncOptions({1, 1}).mode(kReplicate)),
                   "takes a 2-d or 3-d input");
  EXPECT_ERROR_HAS(F::embedding(tensor({0.0}, {1}).to(kInt64), zeros({4, 2}),
                                F::EmbeddingFuncOptions().padding_idx(4)),
                   "within num_embeddings");
  EXPECT_ERROR_HAS(F::binary_cross_entropy(zeros({3}), zeros({2})), "same shape");
  EXPECT_ERROR_HAS(F::one_hot(zeros({0}).to(kInt64)), "pass num_classes");
  EXPECT_ERROR_HAS(F::batch_norm(zeros({2, 3}), zeros({3}), ones({3}),
                                 F::BatchNormFuncOptions().momentum(std::nullopt)),
                   "pass a momentum");
  // An in-place form whose options are bad leaves its input as it was.
  Tensor y = tensor({-1.0, 0.5, 4.0}, {3});
  EXPECT_ERROR_HAS(F::hardtanh(y, F::HardtanhFuncOptions().min_val(2).max_val(1).inplace(true)),
                   "must not be greater than max_val");
  expect_close(values(y), {-1, 0.5, 4}, "hardtanh input after the error");
}

// The activation modules are their functional forms with their options (nn/activation.h).
TEST(FunctionalApi, ActivationModulesMatchTheFunctionalForms) {
  const Tensor x = tensor({-3, -1.5, -0.5, 0, 0.5, 1, 1.5, 6}, {2, 4}, kFloat64);
  const auto same = [&](nn::AnyModule m, const Tensor& want, const char* what) {
    expect_close(values(m.forward(x)), values(want), what);
  };
  same(nn::AnyModule(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))),
       F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.2)), "LeakyReLU");
  same(nn::AnyModule(nn::ELU(nn::ELUOptions().alpha(0.5))), F::elu(x, F::ELUFuncOptions().alpha(0.5)), "ELU");
  same(nn::AnyModule(nn::SELU()), F::selu(x), "SELU");
  same(nn::AnyModule(nn::CELU(nn::CELUOptions().alpha(2))), F::celu(x, F::CELUFuncOptions().alpha(2)), "CELU");
  same(nn::AnyModule(nn::GELU(nn::GELUOptions().approximate("tanh"))),
       F::gelu(x, F::GELUFuncOptions().approximate("tanh")), "GELU tanh");
  same(nn::AnyModule(nn::ReLU6()), F::relu6(x), "ReLU6");
  same(nn::AnyModule(nn::Hardtanh(nn::HardtanhOptions().min_val(-2).max_val(1))),
       F::hardtanh(x, F::HardtanhFuncOptions().min_val(-2).max_val(1)), "Hardtanh");
  same(nn::AnyModule(nn::Softplus(nn::SoftplusOptions().beta(2))),
       F::softplus(x, F::SoftplusFuncOptions().beta(2)), "Softplus");
  same(nn::AnyModule(nn::Hardshrink(1.0)), F::hardshrink(x, 1.0), "Hardshrink");
  same(nn::AnyModule(nn::Softshrink()), F::softshrink(x), "Softshrink");
  same(nn::AnyModule(nn::Threshold(0.5, -1)), F::threshold(x, F::ThresholdFuncOptions(0.5, -1)), "Threshold");
  same(nn::AnyModule(nn::GLU(1)), F::glu(x, 1), "GLU");
  same(nn::AnyModule(nn::Softmax(1)), softmax(x, 1), "Softmax");
  same(nn::AnyModule(nn::LogSoftmax(nn::LogSoftmaxOptions(0))), log_softmax(x, 0), "LogSoftmax");
  same(nn::AnyModule(nn::Softmin(1)), softmax(-x, 1), "Softmin");
  same(nn::AnyModule(nn::Tanh()), tanh(x), "Tanh");
  same(nn::AnyModule(nn::Sigmoid()), sigmoid(x), "Sigmoid");
  same(nn::AnyModule(nn::SiLU()), silu(x), "SiLU");
  same(nn::AnyModule(nn::Mish()), F::mish(x), "Mish");
  same(nn::AnyModule(nn::Softsign()), F::softsign(x), "Softsign");
  same(nn::AnyModule(nn::Tanhshrink()), F::tanhshrink(x), "Tanhshrink");
  same(nn::AnyModule(nn::LogSigmoid()), F::logsigmoid(x), "LogSigmoid");
  same(nn::AnyModule(nn::Identity()), x, "Identity");
  same(nn::AnyModule(nn::ReLU()), relu(x), "ReLU");

  // In a Sequential, printed with their options as PyTorch prints them.
  nn::Sequential seq(nn::Linear(4, 3), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
                     nn::Linear(3, 2), nn::LogSoftmax(1));
  EXPECT_EQ(seq->forward(ones({5, 4})).shape(), (Shape{5, 2}));
  std::ostringstream os;
  os << *seq;
  EXPECT_NE(os.str().find("LeakyReLU(negative_slope=0.2)"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("LogSoftmax(dim=1)"), std::string::npos) << os.str();
  // inplace modules write their input, as LibTorch's.
  Tensor y = tensor({-1.0, 2.0}, {2});
  nn::ReLU(nn::ReLUOptions(true))->forward(y);
  expect_close(values(y), {0, 2}, "ReLU(inplace) input");
}

// Module options LibTorch code passes: LayerNormOptions, EmbeddingOptions (padding_idx,
// _weight), BatchNorm2dOptions, GroupNormOptions.
TEST(FunctionalApi, ModuleOptionsBuildersConfigureTheModules) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}).eps(1e-3).elementwise_affine(false));
  EXPECT_EQ(ln->normalized_shape, (Shape{4}));
  EXPECT_EQ(ln->eps, 1e-3);
  EXPECT_FALSE(ln->weight.defined());
  EXPECT_TRUE(ln->parameters().empty());

  manual_seed(1);
  nn::Embedding emb(nn::EmbeddingOptions(5, 3).padding_idx(-4));  // row 1
  ASSERT_TRUE(emb->padding_idx.has_value());
  EXPECT_EQ(*emb->padding_idx, 1);
  expect_close(values(emb->weight.select(0, 1)), {0, 0, 0}, "padding row zero at init");
  const Tensor idx = tensor({1.0, 3.0, 1.0}, {3}).to(kInt64);
  emb->forward(idx).sum().backward();
  const std::vector<double> g = values(emb->weight.grad());
  expect_close({g.begin() + 3, g.begin() + 6}, {0, 0, 0}, "no gradient to the padding row");
  expect_close({g.begin() + 9, g.begin() + 12}, {1, 1, 1}, "row 3 gradient");
  const Tensor table = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  nn::Embedding given(nn::EmbeddingOptions(3, 2)._weight(table));
  expect_close(values(given->forward(tensor({2.0}, {1}).to(kInt64))), {5, 6}, "_weight lookup");
  std::ostringstream os;
  os << emb;  // the holder prints as its module
  EXPECT_NE(os.str().find("Embedding(num_embeddings=5, embedding_dim=3, padding_idx=1)"), std::string::npos) << os.str();

  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).momentum(0.01).affine(false).eps(1e-3));
  EXPECT_EQ(bn->num_features, 3);
  EXPECT_EQ(bn->momentum, 0.01);
  EXPECT_EQ(bn->eps, 1e-3);
  EXPECT_FALSE(bn->weight.defined());
  EXPECT_TRUE(bn->running_mean.defined());
  nn::BatchNorm1d bn1(nn::BatchNorm1dOptions(4).track_running_stats(false));
  EXPECT_FALSE(bn1->running_mean.defined());
  nn::GroupNorm gn(nn::GroupNormOptions(2, 4).eps(1e-3));
  EXPECT_EQ(gn->num_groups, 2);
  EXPECT_EQ(gn->eps, 1e-3);

  EXPECT_ERROR_HAS(nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(5)),
                   "within num_embeddings");
  EXPECT_ERROR_HAS(nn::Embedding(nn::EmbeddingOptions(5, 3)._weight(zeros({5, 2}))),
                   "expected [num_embeddings, embedding_dim] = [5, 3]");
}

}  // namespace
