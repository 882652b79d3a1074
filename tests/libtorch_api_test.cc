// LibTorch's spellings that sloth accepts as they are (issue "A LibTorch program compiles with
// a rename"): module holders, SLOTH_MODULE, Sequential's type erasure, register_module and
// push_back by value, with today's spellings still working beside them.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/errors.h"
#include "tests/support/pytorch_values.h"

namespace {

using namespace sloth;
using sloth::testing::values;

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// Sets a Linear's parameters to known values (no grad recorded).
void set_linear(const nn::Linear& fc, const std::vector<double>& w, const std::vector<double>& b) {
  NoGradGuard g;
  fc->weight.copy_(tensor(w, {fc->out_features, fc->in_features}));
  if (!b.empty()) fc->bias.copy_(tensor(b, {fc->out_features}));
}

// A module written as the LibTorch examples write it: forward takes its Tensor by value and
// does not override Module::forward(const Tensor&).
struct TwoLayerImpl : nn::Module {
  TwoLayerImpl() : Module("TwoLayer") {
    fc1 = register_module("fc1", nn::Linear(2, 3));
    fc2 = register_module("fc2", nn::Linear(3, 1));
  }
  Tensor forward(Tensor x) { return fc2(relu(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
SLOTH_MODULE(TwoLayer);

struct NoForward : nn::Module {};
struct ByValueForward : nn::Module {
  Tensor forward(Tensor x) { return x * 2.0; }
};
struct TwoInputs : nn::Module {
  Tensor forward(const Tensor& a, const Tensor& b) { return a + b; }
};

static_assert(!nn::has_tensor_forward_v<NoForward>, "no forward: Sequential must not compile");
static_assert(nn::has_tensor_forward_v<ByValueForward>);
static_assert(!nn::has_tensor_forward_v<TwoInputs>);
static_assert(nn::has_tensor_forward_v<nn::LinearImpl>);
static_assert(nn::has_tensor_forward_v<nn::MultiheadAttentionImpl>);  // overloaded forward
static_assert(nn::has_tensor_forward_v<nn::MLPImpl>);                 // inherited forward
static_assert(nn::is_module_holder_v<nn::Linear> && !nn::is_module_holder_v<nn::LinearImpl>);
static_assert(!std::is_default_constructible_v<nn::Linear>, "Linear needs sizes or nullptr");
static_assert(std::is_default_constructible_v<nn::ReLU>);

TEST(ModuleHolder, LinearIsAHandle) {
  nn::Linear fc(2, 3);
  set_linear(fc, {1, 2, 3, 4, 5, 6}, {0.5, -0.5, 1});
  Tensor x = tensor({1, -1, 2, 0.5}, {2, 2});
  // y = x W^T + b
  expect_near(fc(x), {-0.5, -1.5, 0, 3.5, 7.5, 14});
  expect_near(fc->forward(x), {-0.5, -1.5, 0, 3.5, 7.5, 14});
  nn::Linear alias = fc;   // copies share the module
  EXPECT_EQ(alias->weight.impl().get(), fc->weight.impl().get());
  EXPECT_EQ(alias.get(), fc.get());
  EXPECT_EQ(fc->weight.shape(), (Shape{3, 2}));
  EXPECT_EQ(fc.parameters().size(), 2u);
  EXPECT_EQ(fc->name(), "Linear");
}

TEST(ModuleHolder, EmptyHolderThrowsClearly) {
  nn::Linear fc{nullptr};
  EXPECT_TRUE(fc.is_empty());
  EXPECT_FALSE(static_cast<bool>(fc));
  try {
    (void)fc->weight;
    FAIL() << "expected sloth::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("register_module"), std::string::npos) << e.what();
  }
  fc = nn::Linear(3, 1);
  EXPECT_FALSE(fc.is_empty());
  EXPECT_EQ(fc->in_features, 3);
}

TEST(ModuleHolder, UserModuleWithByValueForward) {
  manual_seed(0);
  TwoLayer net;
  std::vector<std::string> names;
  for (auto& [n, p] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  // register_module returned holders that share the registered modules.
  EXPECT_EQ(net->fc1->weight.impl().get(), net->parameters()[0].impl().get());
  set_linear(net->fc1, {1, 0, 0, 1, 1, 1}, {0, 0, -1});
  set_linear(net->fc2, {1, 2, 3}, {0.25});
  Tensor x = tensor({1, 2, -3, 1}, {2, 2});
  // h = relu([1,2,2],[ -3,1,-3]) = [1,2,2],[0,1,0]; y = [1+4+6+.25, 0+2+0+.25]
  expect_near(net(x), {11.25, 2.25});
  expect_near(net->forward(x), {11.25, 2.25});
}

TEST(Sequential, CallsEachModulesOwnForward) {
  manual_seed(0);
  TwoLayer net;
  set_linear(net->fc1, {1, 0, 0, 1, 1, 1}, {0, 0, -1});
  set_linear(net->fc2, {1, 2, 3}, {0.25});
  // The plain (non-holder) module with forward(Tensor) used to throw "has no forward()"
  // inside Sequential; now its own forward is called.
  nn::Sequential seq(net, std::make_shared<ByValueForward>(), nn::ReLU());
  Tensor x = tensor({1, 2, -3, 1}, {2, 2});
  expect_near(seq(x), {22.5, 4.5});
  expect_near(seq->forward(x), {22.5, 4.5});
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_NE(seq->ptr<TwoLayerImpl>(0), nullptr);
  EXPECT_EQ(seq->ptr<nn::LinearImpl>(0), nullptr);
  int n = 0;
  for (const nn::AnyModule& m : *seq) n += m.ptr() != nullptr;
  EXPECT_EQ(n, 3);
}

TEST(Sequential, PushBackEverySpelling) {
  nn::Sequential seq;
  seq->push_back(nn::Linear(4, 3));                        // LibTorch: a holder by value
  seq->push_back(std::make_shared<nn::ReLU>());            // a shared_ptr to a holder (old)
  seq->push_back(std::make_shared<nn::LinearImpl>(3, 2));  // a shared_ptr to an impl
  seq->push_back("out", nn::Linear(2, 1));                 // named
  seq.push_back(nn::AnyModule(nn::GELU()));                // an AnyModule, through the holder
  std::vector<std::string> names;
  for (auto& [n, p] : seq->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias",
                                             "out.weight", "out.bias"}));
  EXPECT_EQ(seq(randn({5, 4})).shape(), (Shape{5, 1}));
}

TEST(Sequential, BadInputThrowsAndChangesNothing) {
  nn::Sequential seq(nn::Linear(2, 2));
  nn::Linear empty{nullptr};
  EXPECT_THROW(seq->push_back(empty), Error);
  EXPECT_THROW(seq->push_back("0", nn::ReLU()), Error);   // a name already taken
  EXPECT_EQ(seq->size(), 1u);
  EXPECT_EQ(seq->named_children().size(), 1u);
  try {
    (void)seq[3];
    FAIL() << "expected sloth::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 3 is out of range for a Sequential of 1"),
              std::string::npos)
        << e.what();
  }
  Tensor x = tensor({1, 2}, {1, 2});
  EXPECT_EQ(seq(x).shape(), (Shape{1, 2}));   // still works
}

TEST(ModuleHolder, TodaysSpellingsStillWork) {
  // std::make_shared<nn::Linear> now gives a shared_ptr to a holder; the Module interface is
  // forwarded through it.
  auto fc = std::make_shared<nn::Linear>(2, 1);
  set_linear(*fc, {2, -1}, {0.5});
  expect_near(fc->forward(tensor({1, 3}, {1, 2})), {-0.5});
  EXPECT_EQ(fc->parameters().size(), 2u);
  fc->eval();
  EXPECT_FALSE(fc->is_training());
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> lin;
    Net() { lin = register_module("lin", std::make_shared<nn::Linear>(2, 1)); }
    Tensor forward(const Tensor& x) override { return lin->forward(x); }
  };
  auto net = std::make_shared<Net>();
  EXPECT_EQ(net->named_parameters()[0].first, "lin.weight");
  // A holder goes where a shared_ptr<Module> or a Module& is expected.
  std::shared_ptr<nn::Module> as_module = nn::MLP({4, 3, 2});
  EXPECT_EQ(as_module->parameters().size(), 4u);
  nn::Linear lin(3, 2);
  const nn::Module& ref = lin;
  EXPECT_EQ(ref.parameters().size(), 2u);
  EXPECT_EQ(nn::state_dict(lin).size(), 2u);
}

// ---- options builders ----

TEST(OptionsBuilders, OptimizerOptionsBothSpellings) {
  optim::SGDOptions built = optim::SGDOptions(0.1).momentum(0.5).nesterov(true);
  optim::SGDOptions designated{.lr = 0.1, .momentum = 0.5, .nesterov = true};
  EXPECT_EQ(built.lr(), 0.1);
  EXPECT_EQ(double(built.momentum), 0.5);
  EXPECT_TRUE(built.nesterov());
  EXPECT_EQ(designated.momentum(), 0.5);
  EXPECT_EQ(built.dampening(), 0.0);
  auto adam = optim::AdamOptions(1e-3).betas({0.8, 0.99}).weight_decay(0.01);
  EXPECT_EQ(adam.beta1(), 0.8);
  EXPECT_EQ(adam.beta2(), 0.99);
  EXPECT_EQ(std::get<1>(adam.betas()), 0.99);
  EXPECT_EQ(adam.weight_decay(), 0.01);
  EXPECT_EQ(optim::AdamWOptions(2e-3).weight_decay(), 1e-2);   // AdamW's default kept
}

// One SGD step (momentum 0.5, first step: buf = g) on loss = sum(p^2), g = 2p: p - 0.1 * 2p.
TEST(OptionsBuilders, SgdWithLrOnlyAndWithBuilderStep) {
  for (int spelling = 0; spelling < 3; ++spelling) {
    Tensor p = tensor({1, 2}).requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    if (spelling == 0) opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, 0.1);
    if (spelling == 1)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions(0.1).momentum(0.5));
    if (spelling == 2)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.1, .momentum = 0.5});
    (p * p).sum().backward();
    opt->step();
    expect_near(p, {0.8, 1.6});
    EXPECT_EQ(opt->lr(), 0.1);
  }
  optim::Adam adam({tensor({1.0}).requires_grad_()}, 0.05);
  EXPECT_EQ(adam.lr(), 0.05);
}

TEST(OptionsBuilders, ModuleOptions) {
  nn::Linear no_bias(nn::LinearOptions(4, 3).bias(false));
  EXPECT_EQ(no_bias->parameters().size(), 1u);
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(nn::LinearOptions(4, 3).out_features(), 3);
  nn::Conv2d conv(nn::Conv2dOptions(1, 10, 5).stride(1).bias(false));
  EXPECT_EQ(conv->weight.shape(), (Shape{10, 1, 5, 5}));
  EXPECT_EQ(conv->parameters().size(), 1u);
  nn::Dropout drop(nn::DropoutOptions().p(0.2));
  EXPECT_EQ(drop->p, 0.2);
  nn::Dropout drop2(0.3);
  EXPECT_EQ(drop2->p, 0.3);
  EXPECT_THROW(nn::Linear(nn::LinearOptions(0, 3)), Error);
}

// ---- tensor conveniences (expected values: PyTorch 1.13) ----

TEST(TensorConveniences, CompoundOperatorsWriteInPlace) {
  Tensor x = tensor({1, 2, 3});
  Tensor view = x.view({3});
  x += tensor({1, 1, 1});
  x *= 2.0;
  x -= 1.0;
  x /= tensor({1, 2, 4});
  expect_near(x, {3, 2.5, 1.75});
  expect_near(view, {3, 2.5, 1.75});   // through views, as add_ does
}

// In-place ops are const members, as in LibTorch (a Tensor is a handle): the manual update
// loop over `const auto&` parameters compiles and writes the parameters.
TEST(TensorConveniences, InPlaceOpsOnConstHandles) {
  Tensor a = tensor({1.0, 2.0}).requires_grad_(), b = tensor({3.0}).requires_grad_();
  (a * a).sum().backward();
  (b * 4).sum().backward();
  {
    NoGradGuard g;
    for (const auto& p : {a, b}) {
      p.sub_(0.5 * p.grad());
      p.grad().zero_();
    }
  }
  expect_near(a, {0.0, 0.0});
  expect_near(b, {1.0});
  expect_near(a.grad(), {0.0, 0.0});
  {
    NoGradGuard g;
    const Tensor& c = b;
    c.mul_(3).add_(1);
    expect_near(b, {4.0});
    c.index_put_({0}, 7.0);
  }
  expect_near(b, {7.0});
  const Tensor d = zeros({2}).requires_grad_();
  d.register_hook([](const Tensor& g) { return g * 2; });
  (d * 5).sum().backward();
  expect_near(d.grad(), {10.0, 10.0});
}

// A braced list is 1-D even with one element, as in LibTorch; a number is 0-dim.
TEST(TensorConveniences, OneElementBracedListIsOneDim) {
  EXPECT_EQ(tensor({3.0}).shape(), (Shape{1}));
  EXPECT_EQ(tensor({3.0}, kFloat64).shape(), (Shape{1}));
  EXPECT_EQ(tensor({3.0}, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(tensor(3.0).shape(), (Shape{}));
  EXPECT_EQ(tensor({}).shape(), (Shape{0}));
  EXPECT_EQ(tensor({2.0}, Shape{}).shape(), (Shape{})) << "an explicit shape still wins";
  EXPECT_EQ(tensor({1.0, 2}).shape(), (Shape{2}));
}

TEST(TensorConveniences, DimReductionsAndMaxWithIndices) {
  Tensor x = tensor({1, 5, 2, 7, 0, 3}, {2, 3});
  expect_near(x.sum(1), {8, 10});
  expect_near(x.sum(0, /*keepdim=*/true), {8, 5, 5});
  EXPECT_EQ(x.sum(0, true).shape(), (Shape{1, 3}));
  expect_near(x.mean(-1), {8.0 / 3, 10.0 / 3});
  expect_near(x.sum({}), {18});   // {} still means every dim
  auto [values, indices] = x.max(1);
  expect_near(values, {5, 7});
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto [mn, mi] = x.min(0);
  expect_near(mn, {1, 0, 2});
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_THROW(x.max(2), Error);
  // torch.tensor([[1.,5,2],[7,0,3]]).norm() = 9.380831519646859
  EXPECT_NEAR(x.norm().item(), 9.380831519646859, 1e-5);
  EXPECT_NEAR(x.norm(1).item(), 18, 1e-5);
  EXPECT_NEAR(x.norm(3).item(), 7.958115100860596, 1e-4);   // torch: x.norm(p=3)
  EXPECT_FALSE(x.all().item<bool>());
  EXPECT_TRUE(x.any().item<bool>());
  EXPECT_TRUE(tensor({1, 2}).all().item<bool>());
  EXPECT_FALSE(zeros(3).any().item<bool>());
}

TEST(TensorConveniences, FactoriesDtypesDevices) {
  EXPECT_EQ(randn(3).shape(), (Shape{3}));
  EXPECT_EQ(zeros(4, kLong).dtype(), kInt64);
  EXPECT_EQ(ones(2, kDouble).to_vector<double>(), (std::vector<double>{1, 1}));
  Tensor t = tensor({1, 2, 3}, kDouble);
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.shape(), (Shape{3}));
  EXPECT_EQ(tensor({1, 2}, kInt).dtype(), kInt32);
  EXPECT_EQ(kFloat, kFloat32);
  EXPECT_EQ(t.to(kCPU).device().type, DeviceType::kCPU);
  EXPECT_EQ(t.to(kFloat).dtype(), kFloat32);
}

// t.sizes() as LibTorch code uses it: .vec() (a std::vector<int64_t> to edit), .size(), [i],
// front/back, equality with another sizes() and with a braced list, passing it where a shape
// is taken, printing as c10 prints ("[2, 3, 4]"), and at() past the end as a clear error.
TEST(TensorConveniences, SizesWorksAsLibTorchsIntArrayRef) {
  Tensor x = zeros({2, 3, 4});
  std::vector<int64_t> v = x.sizes().vec();
  v.push_back(1);
  EXPECT_EQ(v, (std::vector<int64_t>{2, 3, 4, 1}));
  EXPECT_EQ(x.sizes().size(), 3u);
  EXPECT_EQ(x.sizes()[1], 3);
  EXPECT_EQ(x.sizes().front(), 2);
  EXPECT_EQ(x.sizes().back(), 4);
  EXPECT_EQ(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(x.sizes() == ones({2, 3, 4}).sizes());
  EXPECT_FALSE(x.sizes() == ones({2, 4, 3}).sizes());
  EXPECT_TRUE(x.sizes().equals({2, 3, 4}));
  EXPECT_TRUE(x.sizes() == (Shape{2, 3, 4}));
  const Shape s = x.sizes();  // converts, as before
  EXPECT_EQ(s, (Shape{2, 3, 4}));
  EXPECT_EQ(zeros(x.sizes()).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(randn(3).reshape(ones({3, 1}).sizes()).shape(), (Shape{3, 1}));
  std::ostringstream os;
  os << x.sizes();
  EXPECT_EQ(os.str(), "[2, 3, 4]");
  EXPECT_ERROR_HAS(x.sizes().at(3), "out of range");
  EXPECT_ERROR_HAS(zeros({}).sizes().back(), "out of range");
}

// torch::tensor(std::vector<T>) with LibTorch 1.13's dtypes (checked there): vector<float> and
// vector<double> -> Float, vector<int> and vector<int64_t> -> Long, vector<uint8_t> -> Byte;
// an options dtype wins; an integer tensor cannot require grad.
TEST(TensorConveniences, TensorFromHeldVectors) {
  const std::vector<float> f{1.5f, -2.f, 3.f};
  Tensor tf = tensor(f);
  EXPECT_EQ(tf.dtype(), kFloat32);
  EXPECT_EQ(tf.to_vector<float>(), f);
  EXPECT_EQ(tensor(std::vector<double>{0.25, 4}).dtype(), kFloat32);
  const std::vector<int> i{7, -8};
  EXPECT_EQ(tensor(i).dtype(), kInt64);
  EXPECT_EQ(tensor(i).to_vector<int64_t>(), (std::vector<int64_t>{7, -8}));
  EXPECT_EQ(tensor(std::vector<int64_t>{int64_t{1} << 40}).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t{1} << 40}));
  EXPECT_EQ(tensor(std::vector<uint8_t>{255, 0}).dtype(), kUInt8);
  EXPECT_EQ(tensor(std::vector<bool>{true, false}).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  Tensor td = tensor(f, kDouble);
  EXPECT_EQ(td.dtype(), kFloat64);
  EXPECT_EQ(td.to_vector<double>(), (std::vector<double>{1.5, -2, 3}));
  Tensor g = tensor(f, requires_grad());
  EXPECT_TRUE(g.requires_grad());
  EXPECT_TRUE(g.is_leaf());
  EXPECT_THROW(tensor(i, requires_grad()), Error);
}

// `std::cout << t.dtype()` compiles and prints LibTorch's ScalarType names
// (`std::cout << torch::kFloat` prints "Float").
TEST(TensorConveniences, DTypePrintsLibTorchNames) {
  std::ostringstream os;
  os << zeros(2).dtype() << ' ' << kDouble << ' ' << kLong << ' ' << kInt << ' ' << kBool << ' '
     << kByte;
  EXPECT_EQ(os.str(), "Float Double Long Int Bool Byte");
}

TEST(TensorConveniences, RequiresGradOptionAndListAliases) {
  Tensor x = ones({2, 2}, requires_grad());
  EXPECT_TRUE(x.requires_grad());
  autograd::variable_list grads = autograd::grad({(x * 3.0).sum()}, {x});
  expect_near(grads[0], {3, 3, 3, 3});
  static_assert(std::is_same_v<autograd::tensor_list, std::vector<Tensor>>);
}

TEST(TensorConveniences, GradFnNamesArePyTorchs) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  EXPECT_EQ(x.grad_fn(), nullptr);
  Tensor y = x + 2.0;
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward0");
  EXPECT_EQ(y.mean().grad_fn()->name(), "MeanBackward0");
  EXPECT_EQ((y * y).grad_fn()->name(), "MulBackward0");
}

TEST(Functional, WrapsAFunctionInSequential) {
  nn::Sequential seq(nn::Functional(sloth::relu), nn::Functional(sloth::log_softmax, 1));
  Tensor x = tensor({-1, 0, 1, 2}, {2, 2}, kDouble);
  // relu -> [[0, 0], [1, 2]]; log_softmax over dim 1: [[-ln 2, -ln 2], [-1.31326, -0.31326]]
  expect_near(seq(x), {-0.6931471805599453, -0.6931471805599453, -1.3132616875182228,
                       -0.31326168751822286},
              1e-9);
  nn::Functional square([](Tensor t) { return t * t; });
  expect_near(square(x), {1, 0, 1, 4});
}

// ---- losses (expected values: PyTorch 1.13, torch.nn.functional, float64) ----

Tensor loss_x() { return tensor({0.5, -1.2, 3.0, 2.0, 0.1, -0.4}, {2, 3}, kDouble); }
Tensor loss_y() { return tensor({1.0, 0.3, 0.5, -1.0, 0.0, 0.2}, {2, 3}, kDouble); }

TEST(Losses, ReductionsMatchPyTorch) {
  Tensor x = loss_x(), y = loss_y();
  EXPECT_NEAR(l1_loss(x, y).item(), 1.366666666667, 1e-9);
  EXPECT_NEAR(l1_loss(x, y, kSum).item(), 8.2, 1e-9);
  expect_near(l1_loss(x, y, kNone), {0.5, 1.5, 2.5, 3.0, 0.1, 0.6}, 1e-9);
  EXPECT_NEAR(smooth_l1_loss(x, y).item(), 0.968333333333, 1e-9);
  expect_near(smooth_l1_loss(x, y, kNone, 0.5), {0.25, 1.25, 2.25, 2.75, 0.01, 0.35}, 1e-9);
  EXPECT_NEAR(huber_loss(x, y).item(), 0.968333333333, 1e-9);
  EXPECT_NEAR(huber_loss(x, y, kSum, 2.0).item(), 8.435, 1e-9);
  EXPECT_NEAR(mse_loss(x, y, kSum).item(), 18.12, 1e-9);
  expect_near(mse_loss(x, y, kNone), {0.25, 2.25, 6.25, 9.0, 0.01, 0.36}, 1e-9);
  Tensor yb = tensor({1.0, 0.0, 1.0, 0.0, 0.5, 1.0}, {2, 3}, kDouble);
  expect_near(binary_cross_entropy_with_logits(x, yb, kNone),
              {0.47407698418, 0.263282467338, 0.048587351574, 2.126928011043, 0.694396660074,
               0.9130152524},
              1e-9);
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, yb, kSum).item(), 4.520286726608, 1e-9);
}

TEST(Losses, ModulesAndGradientsMatchPyTorch) {
  Tensor x = loss_x().requires_grad_(), y = loss_y();
  nn::SmoothL1Loss smooth;
  smooth(x, y).backward();
  expect_near(x.grad(), {-0.083333333333, -0.166666666667, 0.166666666667, 0.166666666667,
                         0.016666666667, -0.1},
              1e-9);
  x.set_grad(Tensor());
  nn::HuberLoss huber(nn::HuberLossOptions().delta(2.0));
  huber(x, y).backward();
  expect_near(x.grad(), {-0.083333333333, -0.25, 0.333333333333, 0.333333333333,
                         0.016666666667, -0.1},
              1e-9);
  EXPECT_NEAR(nn::L1Loss(nn::L1LossOptions(kSum))(x, y).item(), 8.2, 1e-9);
  EXPECT_NEAR(nn::MSELoss(kSum)->forward(x, y).item(), 18.12, 1e-9);
  // Cross entropy / NLL: the functions' values (tested in norm_test against PyTorch).
  Tensor logits = tensor({1, 2, 0.5, -1, 0, 3}, {2, 3}, kDouble);
  Tensor target = tensor({1, 0}, kLong);
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().ignore_index(0));
  EXPECT_NEAR(ce(logits, target).item(),
              cross_entropy(logits, target, CrossEntropyOptions{.ignore_index = 0}).item(), 1e-12);
  nn::NLLLoss nll{nn::NLLLossOptions(kSum)};
  EXPECT_NEAR(nll(log_softmax(logits, 1), target).item(),
              nll_loss(log_softmax(logits, 1), target, NllLossOptions{.reduction = kSum}).item(),
              1e-12);
}

TEST(Losses, BadShapesThrowNamingBoth) {
  Tensor x = loss_x();
  try {
    (void)l1_loss(x, tensor({1, 2, 3}, kDouble));
    FAIL() << "expected sloth::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("l1_loss: input of shape [2, 3] and target of shape [3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(huber_loss(x, x, kMean, 0.0), Error);
  EXPECT_NEAR(l1_loss(x, loss_y()).item(), 1.366666666667, 1e-9);   // still works
}

TEST(TensorConveniences, VarAndStdSpellings) {
  // PyTorch 1.13: x.var() 13.866666666666665, x.std(False) 3.39934634239519,
  // x.var(1) [2.333.., 16.0], x.std(0, True, True) [[1.414.., 3.535.., 4.949..]].
  const Tensor x = tensor({1, 2, 4, 3, 7, 11}, {2, 3}, kFloat64);
  EXPECT_NEAR(x.var().item(), 13.866666666666665, 1e-12);
  EXPECT_NEAR(x.std(false).item(), std::sqrt(13.866666666666665 * 5 / 6), 1e-12);
  EXPECT_EQ(x.var(1).shape(), (Shape{2}));
  EXPECT_NEAR(x.var(1).to_vector<double>()[1], 16.0, 1e-12);
  EXPECT_EQ(x.std(0, true, true).shape(), (Shape{1, 3}));
  EXPECT_NEAR(x.std(0, true, true).to_vector<double>()[1], std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(x.var({0, 1}).item(), 13.866666666666665, 1e-12);
}

TEST(ModuleApi, NamedParametersAreAnOrderedDictWithKeyAndValue) {
  nn::Sequential seq(nn::Linear(3, 2), nn::ReLU(), nn::Linear(2, 1));
  std::vector<std::string> keys;
  for (auto& p : seq->named_parameters()) keys.push_back(p.key() + shape_str(p.value().shape()));
  EXPECT_EQ(keys, (std::vector<std::string>{"0.weight[2, 3]", "0.bias[2]", "2.weight[1, 2]",
                                            "2.bias[1]"}));
  auto params = seq->named_parameters();
  EXPECT_EQ(params["2.bias"].shape(), (Shape{1}));
  EXPECT_TRUE(params.contains("0.weight"));
  EXPECT_EQ(params.find("1.weight"), nullptr);
  EXPECT_EQ(params.keys().size(), 4u);
  EXPECT_EQ(params.values()[1].shape(), (Shape{2}));
  EXPECT_ERROR_HAS(params["0.wieght"], "Parameter '0.wieght' is not defined");
  // Structured bindings and first/second still work.
  for (auto& [name, t] : params) EXPECT_TRUE(t.requires_grad()) << name;
  EXPECT_EQ(params[0].first, "0.weight");
  EXPECT_EQ(seq->named_children()["1"]->name(), "ReLU");
}


// LibTorch's identity and type spellings (values from LibTorch 1.13's TensorBase):
// is_same compares the tensor objects, is_alias_of the storage, toString names the type.
TEST(TensorConveniences, IsSameIsAliasOfAndToString) {
  Tensor a = ones({2, 3});
  Tensor b = a;             // the same tensor object
  Tensor c = a.clone();     // equal values, its own storage
  Tensor v = a.narrow(0, 1, 1);  // a view: shares a's storage
  Tensor w = a.t();
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(a.is_same(c));
  EXPECT_FALSE(a.is_same(v));
  EXPECT_TRUE(v.is_alias_of(a));
  EXPECT_TRUE(v.is_alias_of(w));  // two views of one base
  EXPECT_FALSE(c.is_alias_of(a));
  EXPECT_FALSE(Tensor().is_same(a));
  EXPECT_TRUE(Tensor().is_same(Tensor()));
  EXPECT_EQ(a.toString(), "CPUFloatType");
  EXPECT_EQ(a.to(kFloat64).toString(), "CPUDoubleType");
  EXPECT_EQ(a.to(kInt64).toString(), "CPULongType");
  EXPECT_EQ(a.to(kInt32).toString(), "CPUIntType");
  EXPECT_EQ(a.to(kBool).toString(), "CPUBoolType");
  EXPECT_EQ(a.to(kUInt8).toString(), "CPUByteType");
  EXPECT_EQ(Tensor().toString(), "UndefinedType");
  EXPECT_THROW(Tensor().is_alias_of(a), Error);
}


// torch::argmax(x) / x.argmin() without a dim: the index into the flattened tensor, a 0-dim
// int64 (values from torch 1.13).
TEST(TensorOps, ArgmaxWithoutDimIndexesTheFlattenedTensor) {
  Tensor x = sloth::tensor({3, 9, 1, 9, 2, -1}, {2, 3});
  Tensor i = sloth::argmax(x);
  EXPECT_EQ(i.dim(), 0);
  EXPECT_EQ(i.dtype(), sloth::kInt64);
  EXPECT_EQ(i.item<int64_t>(), 1);  // the first of the two maxima
  EXPECT_EQ(sloth::argmin(x).item<int64_t>(), 5);
  EXPECT_EQ(x.t().argmax().item<int64_t>(), 1);  // in the transposed tensor's own order
  EXPECT_EQ(x.t().argmin().item<int64_t>(), 5);
  EXPECT_EQ(sloth::argmax(sloth::tensor(5.0)).item<int64_t>(), 0);
  const std::string e = sloth::testing::error_of([] { sloth::argmax(sloth::zeros({0})); });
  EXPECT_NE(e.find("argmax"), std::string::npos) << e;
}

}  // namespace
