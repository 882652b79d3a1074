// Programs written as a LibTorch user writes them (the port is the rename torch:: -> sloth::):
// an LSTM classifier behind module holders, batches made on a data-loader thread and handed
// over through a queue, Adam with weight decay, StepLR, torch::nn::utils::clip_grad_norm_ (a
// double: it reads the norm), label smoothing, no mark_step, the loss read with item() every
// step; a conv net whose modules are members by value (a Sequential with BatchNorm2d, read back
// with ->as<>()), gradient accumulation over two micro-batches, SGD with Nesterov momentum, an
// accuracy count with item<int64_t>() per micro-batch, then eval mode. They must give PyTorch
// 1.13's numbers; the expected values come from tests/user_program_test.py and
// tests/user_program_cnn.py.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/pytorch_values.h"

namespace {

using sloth::testing::expect_close;
using sloth::testing::values;

constexpr int64_t kV = 20, kE = 16, kH = 24, kC = 5, kB = 8, kT = 7;

struct NetImpl : sloth::nn::Module {
  NetImpl()
      : emb(register_module("emb", sloth::nn::Embedding(kV, kE))),
        lstm(register_module(
            "lstm", sloth::nn::LSTM(sloth::nn::LSTMOptions(kE, kH).batch_first(true)))),
        norm(register_module("norm", sloth::nn::LayerNorm(sloth::nn::LayerNormOptions({kH})))),
        fc(register_module("fc", sloth::nn::Linear(kH, kC))) {}
  sloth::Tensor forward(sloth::Tensor tok) {
    auto [out, state] = lstm->forward(emb->forward(tok));
    auto z = norm->forward(out.select(1, -1));
    return fc->forward(sloth::gelu(z));
  }
  sloth::nn::Embedding emb;
  sloth::nn::LSTM lstm;
  sloth::nn::LayerNorm norm;
  sloth::nn::Linear fc;
};
SLOTH_MODULE(Net);

struct Batch {
  sloth::Tensor tok, y;
};

// The batch of a step, as the generator makes it (plain host data, then tensors).
Batch make_batch(int64_t step) {
  std::vector<int64_t> tok(kB * kT), y(kB);
  for (int64_t i = 0; i < kB; ++i) {
    int64_t sum = 0;
    for (int64_t j = 0; j < kT; ++j) {
      tok[i * kT + j] = (step * 13 + i * 7 + j * 3 + (i * j) % 5) % kV;
      sum += tok[i * kT + j];
    }
    y[i] = sum % kC;
  }
  return {sloth::from_blob(tok.data(), {kB, kT}, sloth::kInt64).clone(),
          sloth::from_blob(y.data(), {kB}, sloth::kInt64).clone()};
}

// A bounded queue between the loader thread and the training loop.
class BatchQueue {
 public:
  void push(Batch b) {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return items_.size() < 2; });
    items_.push_back(std::move(b));
    ready_.notify_one();
  }
  Batch pop() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !items_.empty(); });
    Batch b = std::move(items_.front());
    items_.pop_front();
    room_.notify_one();
    return b;
  }

 private:
  std::mutex mu_;
  std::condition_variable room_, ready_;
  std::deque<Batch> items_;
};

TEST(UserProgram, LstmClassifierWithLoaderThreadMatchesPyTorch) {
  Net net;
  {
    sloth::NoGradGuard no_grad;
    int k = 0;
    for (auto& p : net->named_parameters()) {
      const int64_t n = p.value().numel();
      std::vector<double> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = 0.2 * std::sin(0.37 * static_cast<double>(i) + k);
      p.value().copy_(sloth::tensor(v).reshape(p.value().sizes()));
      ++k;
    }
    EXPECT_EQ(k, 9);
  }
  constexpr int kSteps = 30;
  BatchQueue queue;
  std::thread loader([&] {
    for (int64_t s = 0; s < kSteps; ++s) queue.push(make_batch(s));
  });

  sloth::optim::Adam opt(net->parameters(), sloth::optim::AdamOptions(0.02).weight_decay(1e-4));
  sloth::optim::StepLR sched(opt, /*step_size=*/10, /*gamma=*/0.5);
  std::vector<double> losses, norms;
  auto avg = sloth::zeros({});
  for (int step = 0; step < kSteps; ++step) {
    Batch b = queue.pop();
    opt.zero_grad();
    auto loss = sloth::nn::functional::cross_entropy(
        net->forward(b.tok), b.y,
        sloth::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
    loss.backward();
    norms.push_back(sloth::nn::utils::clip_grad_norm_(net->parameters(), 1.0));
    opt.step();
    sched.step();
    avg = avg * 0.9 + loss.detach() * 0.1;
    losses.push_back(loss.item<double>());
  }
  loader.join();

  // float32 math in a different order than PyTorch's kernels: agreement to ~1e-6 relative.
  expect_close(losses, {1.81382048, 1.73831165, 1.54397166, 1.67234707, 1.65417409, 1.59881282,
                        1.67390394, 1.55006659, 1.61613703, 1.6770339, 1.58814001, 1.66094804,
                        1.55607963, 1.59639907, 1.67408979, 1.5882839, 1.65403223, 1.56069982,
                        1.59388399, 1.67149305, 1.59063506, 1.64708602, 1.56157756, 1.58995485,
                        1.66824603, 1.59171724, 1.64575291, 1.5635401, 1.59048533, 1.66644871},
               "losses", 2e-5);
  expect_close(norms, {1.01632226, 0.951557875, 0.91954726, 0.994515538, 0.907535613,
                       0.864502549, 0.917901158, 0.894172192, 0.970779419, 0.898875654,
                       0.855444789, 0.910203636, 0.887582242, 0.96158731, 0.89337796,
                       0.854776621, 0.906365514, 0.887174547, 0.958712816, 0.890854061,
                       0.855232, 0.903928816, 0.885625303, 0.957080841, 0.889446199,
                       0.855584145, 0.903342903, 0.885938704, 0.957125366, 0.888963044},
               "clip_grad_norm_", 2e-5);
  EXPECT_NEAR(avg.item<double>(), 1.54842901, 2e-5);
  expect_close(values(net->fc->bias),
               {0.149839506, 0.113820955, 0.0382495075, 0.104392134, 0.000933002157}, "fc.bias",
               2e-5);
  EXPECT_NEAR(net->lstm->named_parameters()["weight_hh_l0"].to(sloth::kFloat64).sum().item<double>(),
              0.403900551, 1e-4);
  expect_close(values(net->emb->weight[3]),
               {-0.163642541, -0.144716918, -0.110171288, -0.109371118, -0.0407958105,
                0.0497067422, 0.121762395, 0.16445601, 0.174739242, 0.152142689, 0.125773713,
                0.131955951, 0.0804993212, -0.00514471484, -0.0903361961, -0.147670969},
               "emb.weight[3]", 2e-5);

  net->eval();
  sloth::NoGradGuard no_grad;
  Batch b = make_batch(100);
  expect_close(values(net->forward(b.tok)[0]),
               {0.121377669, 0.0949535072, 0.00824526697, 0.0893519223, 0.0295556542},
               "eval logits[0]", 2e-5);
}

struct ConvNet : sloth::nn::Module {
  ConvNet() {
    register_module("features", features);
    register_module("drop", drop);
    register_module("fc", fc);
  }
  sloth::Tensor forward(sloth::Tensor x) { return fc(drop(features->forward(x))); }
  sloth::nn::Sequential features{
      sloth::nn::Conv2d(sloth::nn::Conv2dOptions(1, 4, 3).padding(1)),
      sloth::nn::BatchNorm2d(4), sloth::nn::ReLU(), sloth::nn::MaxPool2d(2), sloth::nn::Flatten()};
  sloth::nn::Dropout drop{sloth::nn::DropoutOptions(0.0)};
  sloth::nn::Linear fc{64, 3};
};

std::pair<sloth::Tensor, sloth::Tensor> images(int step, int half) {
  std::vector<double> x(3 * 64);
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(i);
    x[i] = 0.5 * std::sin(0.13 * d + 0.7 * step + 1.9 * half) + 0.1 * std::cos(0.029 * d * d);
  }
  std::vector<int64_t> y;
  for (int j = 0; j < 3; ++j) y.push_back((step + half + j) % 3);
  return {sloth::tensor(x).reshape({3, 1, 8, 8}).to(sloth::kFloat),
          sloth::tensor(std::vector<double>(y.begin(), y.end())).to(sloth::kLong)};
}

TEST(UserProgram, ConvNetByValueWithAccumulationMatchesPyTorch) {
  ConvNet net;  // by value, as LibTorch's examples hold a module struct
  {
    sloth::NoGradGuard no_grad;
    int k = 0;
    for (auto& p : net.named_parameters()) {
      const int64_t n = p.value().numel();
      std::vector<double> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = 0.3 * std::sin(0.41 * static_cast<double>(i) + k);
      p.value().copy_(sloth::tensor(v).reshape(p.value().sizes()));
      ++k;
    }
    EXPECT_EQ(k, 6);
  }
  sloth::optim::SGD opt(net.parameters(),
                        sloth::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(5e-4));
  std::vector<double> losses;
  std::vector<int64_t> correct;
  net.train();
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    double total = 0;
    int64_t right = 0;
    for (int half = 0; half < 2; ++half) {
      auto [x, y] = images(step, half);
      auto out = net.forward(x);
      auto loss = sloth::nn::functional::cross_entropy(out, y) / 2;
      loss.backward();
      total += loss.item<double>();
      right += out.argmax(1).eq(y).sum().item<int64_t>();
    }
    opt.step();
    losses.push_back(total);
    correct.push_back(right);
  }
  expect_close(losses, {1.16941386, 1.24782681, 1.74043894, 1.42147297, 1.05504137, 1.01592135,
                        1.06665146, 1.55754453, 1.33260608, 1.0434655, 0.991668612, 1.07550347,
                        1.33884698, 1.17965513, 1.24333519, 1.16143996, 1.08966798, 1.07880217,
                        1.14552832, 1.1616931},
               "losses", 2e-5);
  EXPECT_EQ(correct, (std::vector<int64_t>{1, 0, 0, 0, 4, 3, 1, 0, 0, 3, 6, 2, 0, 0, 0, 0, 4, 2,
                                           0, 0}));
  auto bn = net.features[1]->as<sloth::nn::BatchNorm2d>();
  ASSERT_NE(bn, nullptr);
  expect_close(values(bn->running_mean), {0.256062508, 0.278039068, 0.292369097, 0.23139511},
               "running_mean", 2e-5);
  expect_close(values(bn->running_var), {0.170644566, 0.27222082, 0.190011576, 0.194999173},
               "running_var", 2e-5);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 40);
  expect_close(values(net.fc->bias), {-0.221292511, -0.212421358, -0.215820059}, "fc.bias", 2e-5);

  net.eval();
  sloth::NoGradGuard no_grad;
  auto [x, y] = images(50, 0);
  expect_close(values(net.forward(x)),
               {-0.20861946, -0.196237311, -0.220267266, -0.217336193, -0.202703118, -0.200977609,
                -0.219479665, -0.230163097, -0.245071754},
               "eval logits", 2e-5);
}

}  // namespace
