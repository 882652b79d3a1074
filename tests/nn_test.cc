// nn modules: registration, names, initialization, forward values, train/eval, zero_grad.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Tensor& scale;
  Net()
      : Module("Net"),
        scale(register_parameter("scale", ones({1}))) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))) * scale; }
};

std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

TEST(Module, RegistrationAndNames) {
  Net net;
  EXPECT_EQ(names(net), (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight"}));
  auto ps = net.parameters();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[1].shape(), (Shape{3, 4}));
  EXPECT_EQ(ps[2].shape(), (Shape{3}));
  EXPECT_EQ(ps[3].shape(), (Shape{2, 3}));
  for (auto& p : ps) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  // Parameters alias the modules' members.
  EXPECT_EQ(ps[1].impl().get(), (*net.fc1)->weight.impl().get());
  EXPECT_EQ(net.parameters(/*recurse=*/false).size(), 1u);
  EXPECT_EQ(net.named_children().size(), 2u);
  EXPECT_EQ(net.named_children()[0].first, "fc1");
  EXPECT_THROW(net.register_parameter("scale", ones({1})), Error);
  EXPECT_THROW(net.register_module("fc1", std::make_shared<nn::ReLU>()), Error);
  EXPECT_THROW(net.register_parameter("a.b", ones({1})), Error);
}

TEST(Module, SequentialAndMlpNames) {
  auto mlp = std::make_shared<nn::MLP>(std::vector<int64_t>{784, 256, 128, 10});
  EXPECT_EQ(names(*mlp), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias",
                                                   "4.weight", "4.bias"}));
  EXPECT_EQ((*mlp)->size(), 5u);
  EXPECT_EQ(mlp->parameters()[4].shape(), (Shape{10, 128}));
  nn::Sequential seq;
  seq.push_back(std::make_shared<nn::Linear>(2, 2));
  seq.push_back(std::make_shared<nn::GELU>());
  auto inner = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 1));
  seq.push_back(inner);
  EXPECT_EQ(names(seq), (std::vector<std::string>{"0.weight", "0.bias", "2.0.weight", "2.0.bias"}));
  EXPECT_NE(seq.repr().find("Linear(in_features=2, out_features=2, bias=true)"), std::string::npos);
}

TEST(Module, LinearInitMatchesPyTorchBounds) {
  manual_seed(1);
  nn::Linear lin(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  auto w = lin->weight.to_vector<float>();
  auto b = lin->bias.to_vector<float>();
  ASSERT_EQ(w.size(), 5000u);
  double lo = 1, hi = -1, mean = 0;
  for (float v : w) { lo = std::min<double>(lo, v); hi = std::max<double>(hi, v); mean += v; }
  mean /= w.size();
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.95 * bound);   // fills the whole range
  EXPECT_GT(hi, 0.95 * bound);
  EXPECT_NEAR(mean, 0, 0.01);
  for (float v : b) EXPECT_LE(std::abs(v), bound);
  EXPECT_FALSE(lin->weight.grad().defined());
}

TEST(Module, LinearForwardValues) {
  nn::Linear lin(3, 2);
  {
    NoGradGuard g;
    lin->weight.copy_(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
    lin->bias.copy_(tensor({0.5, -1}));
  }
  Tensor y = lin.forward(tensor({1, 0, -1, 2, 1, 0}, {2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-1.5f, -3.f, 4.5f, 12.f}));
  EXPECT_THROW(lin.forward(ones({2, 4})), Error);
  nn::Linear nob(3, 2, false);
  EXPECT_FALSE(nob->bias.defined());
  EXPECT_EQ(nob.parameters().size(), 1u);
}

TEST(Module, TrainEvalAndDropout) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.5));
  EXPECT_TRUE(seq->is_training());
  EXPECT_TRUE((*seq)[0]->is_training());
  Tensor x = ones({10000});
  auto y = seq->forward(x).to_vector<float>();
  int zeros_n = 0;
  for (float v : y) {
    if (v == 0) ++zeros_n;
    else EXPECT_FLOAT_EQ(v, 2.0f);
  }
  EXPECT_NEAR(zeros_n / 10000.0, 0.5, 0.03);
  seq->eval();
  EXPECT_FALSE((*seq)[0]->is_training());
  auto z = seq->forward(x).to_vector<float>();
  for (float v : z) ASSERT_EQ(v, 1.0f);
  seq->train();
  EXPECT_TRUE((*seq)[0]->is_training());
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(Module, ZeroGrad) {
  Net net;
  Tensor loss = net.forward(ones({2, 4})).sum();
  loss.backward();
  mark_step();
  for (auto& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad(/*set_to_none=*/false);
  for (auto& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    for (float v : p.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
  }
  net.zero_grad();
  for (auto& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, GeluEmbeddingLayerNorm) {
  nn::GELU gelu_m;
  auto g = gelu_m.forward(tensor({-1.0, 0.0, 1.0})).to_vector<float>();
  EXPECT_NEAR(g[0], -0.158655, 1e-5);
  EXPECT_NEAR(g[1], 0.0, 1e-7);
  EXPECT_NEAR(g[2], 0.841345, 1e-5);

  manual_seed(3);
  nn::Embedding emb(1000, 8);
  EXPECT_EQ(emb->weight.shape(), (Shape{1000, 8}));
  auto w = emb->weight.to_vector<float>();
  double m = 0, s = 0;
  for (float v : w) m += v;
  m /= w.size();
  for (float v : w) s += (v - m) * (v - m);
  s = std::sqrt(s / w.size());
  EXPECT_NEAR(m, 0, 0.05);
  EXPECT_NEAR(s, 1, 0.05);
  Tensor rows = emb.forward(from_vector<int64_t>({7, 2, 7}, {3}));
  auto r = rows.to_vector<float>();
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(r[j], w[7 * 8 + j]);
    EXPECT_EQ(r[8 + j], w[2 * 8 + j]);
    EXPECT_EQ(r[16 + j], w[7 * 8 + j]);
  }

  nn::LayerNorm ln({4});
  EXPECT_EQ(ln.named_parameters().size(), 2u);
  auto y = ln.forward(tensor({1, 2, 3, 4, 10, 10, 10, 30}, {2, 4})).to_vector<float>();
  // row 0: mean 2.5, var 1.25
  EXPECT_NEAR(y[0], (1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-5);
  EXPECT_NEAR(y[3], (4 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-5);
  // row 1: mean 15, var 75
  EXPECT_NEAR(y[7], 15 / std::sqrt(75 + 1e-5), 1e-5);
}

TEST(Module, ModelGradientsFlowThroughSubmodules) {
  // A struct model with a dozen lines; d(sum(W x + b))/db = batch size.
  nn::MLP mlp({3, 1});
  Tensor loss = mlp.forward(ones({5, 3})).sum();
  loss.backward();
  auto named = mlp.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[1].first, "0.bias");
  EXPECT_FLOAT_EQ(named[1].second.grad().item<float>(), 5.0f);
  for (float v : named[0].second.grad().to_vector<float>()) EXPECT_FLOAT_EQ(v, 5.0f);
}

TEST(Module, ToSameDeviceKeepsParameters) {
  Net net;
  Tensor w = (*net.fc1)->weight;
  net.to(Device::cpu());
  EXPECT_EQ((*net.fc1)->weight.impl().get(), w.impl().get());
  net.to(kFloat64);
  EXPECT_EQ((*net.fc1)->weight.dtype(), kFloat64);
  EXPECT_TRUE((*net.fc1)->weight.requires_grad());
  EXPECT_TRUE((*net.fc1)->weight.is_leaf());
  EXPECT_EQ(net.parameters()[1].dtype(), kFloat64);
}

}  // namespace

// ---- buffers (nn) ----
namespace {
struct WithBuffers : nn::Module {
  Tensor& w;
  Tensor& stat;
  Tensor& count;
  Tensor& absent;
  std::shared_ptr<nn::BatchNorm1d> bn;
  WithBuffers()
      : Module("WithBuffers"),
        w(register_parameter("w", ones({2}))),
        stat(register_buffer("stat", full({2}, 0.5))),
        count(register_buffer("count", zeros({}, TensorOptions(DType::kInt64)))),
        absent(register_buffer("absent", Tensor())) {
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(2));
  }
};
std::vector<std::string> buffer_names(const nn::Module& m, bool recurse = true) {
  std::vector<std::string> out;
  for (auto& [n, b] : m.named_buffers(recurse)) out.push_back(n);
  return out;
}
}  // namespace

TEST(ModuleBuffers, RegistrationNamesAndReferences) {
  WithBuffers m;
  EXPECT_EQ(buffer_names(m), (std::vector<std::string>{"stat", "count", "bn.running_mean",
                                                       "bn.running_var",
                                                       "bn.num_batches_tracked"}));
  EXPECT_EQ(buffer_names(m, false), (std::vector<std::string>{"stat", "count"}));
  EXPECT_EQ(m.buffers().size(), 5u);
  EXPECT_EQ(names(m), (std::vector<std::string>{"w", "bn.weight", "bn.bias"}));
  EXPECT_FALSE(m.stat.requires_grad());
  // The reference is the registered buffer: in-place writes through it are seen by
  // named_buffers(), and a later assignment through it replaces the buffer.
  {
    NoGradGuard g;
    m.stat.add_(1.0);
  }
  EXPECT_EQ(m.named_buffers()[0].second.to_vector<float>(), (std::vector<float>{1.5, 1.5}));
  m.absent = tensor({3.0});
  EXPECT_EQ(buffer_names(m, false), (std::vector<std::string>{"stat", "count", "absent"}));
  // Names are shared with parameters and submodules.
  EXPECT_THROW(m.register_buffer("w", ones({1})), Error);
  EXPECT_THROW(m.register_buffer("bn", ones({1})), Error);
  EXPECT_THROW(m.register_buffer("stat", ones({1})), Error);
  EXPECT_THROW(m.register_parameter("stat", ones({1})), Error);
  EXPECT_THROW(m.register_module("count", std::make_shared<nn::ReLU>()), Error);
  EXPECT_THROW(m.register_buffer("a.b", ones({1})), Error);
  EXPECT_EQ(m.buffers().size(), 6u) << "failed registrations add nothing";
}

TEST(ModuleBuffers, ToDTypeConvertsFloatBuffersOnly) {
  WithBuffers m;
  m.to(DType::kFloat64);
  EXPECT_EQ(m.w.dtype(), DType::kFloat64);
  EXPECT_EQ(m.stat.dtype(), DType::kFloat64);
  EXPECT_EQ((*m.bn)->running_var.dtype(), DType::kFloat64);
  EXPECT_EQ(m.count.dtype(), DType::kInt64);
  EXPECT_EQ((*m.bn)->num_batches_tracked.dtype(), DType::kInt64);
  EXPECT_EQ(m.stat.to_vector<double>(), (std::vector<double>{0.5, 0.5}));
  // The converted module still trains: BatchNorm in float64 updates its float64 statistics.
  Tensor x = tensor({1.0, 2.0, 3.0, 6.0}, {2, 2}, TensorOptions(DType::kFloat64));
  Tensor y = m.bn->forward(x);
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  EXPECT_NEAR((*m.bn)->running_mean.to_vector<double>()[1], 0.4, 1e-12);
  EXPECT_EQ((*m.bn)->num_batches_tracked.item<int64_t>(), 1);
  m.to(Device{});  // same device: nothing moves
  EXPECT_EQ(m.count.dtype(), DType::kInt64);
  EXPECT_NE(m.repr().find("BatchNorm1d(2, eps=1e-05, momentum=0.1, affine=true, "
                          "track_running_stats=true)"),
            std::string::npos)
      << m.repr();
}
