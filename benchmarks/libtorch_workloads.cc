// LibTorch eager side of sloth's benchmarks (workloads 2-4 of issue 5; the models of issue 13).
// Not a Bazel target: compare.sh builds it with g++ -O3 -std=c++17 against Debian's
// libtorch-dev.
//   ./libtorch_workloads [threads] [min_seconds_per_workload] [base|models]
// Prints one line per workload: "name median_ms min_ms reps". "base" (the default) runs the
// workloads of issue 5; "models" runs issue 13's (CNN training step, transformer block training
// step, conv2d forward and forward+backward), each name suffixed with "_t<threads>" because
// compare.sh runs them at 1 and 2 threads.
// Keep the workloads in step with benchmarks/bench_common.h and the *_bench.cc files.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

double g_min_s = 2.0;

// Warm up, then repeat until g_min_s has passed (at least 5 reps); report the median.
void measure(const std::string& name, const std::function<void()>& fn, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  auto start = std::chrono::steady_clock::now();
  while (t.size() < 5 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < g_min_s) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (t.size() >= 100000) break;
  }
  std::vector<double> s = t;
  std::sort(s.begin(), s.end());
  std::printf("%s %.6f %.6f %zu\n", name.c_str(), s[s.size() / 2], s.front(), s.size());
  std::fflush(stdout);
}

constexpr int64_t kChainN = int64_t{1} << 24;

torch::Tensor chain(int k, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
  torch::Tensor y = a;
  for (int i = 0; i < k; ++i) {
    switch (i % 3) {
      case 0: y = y + b; break;
      case 1: y = y * c; break;
      default: y = y * 0.5; break;
    }
  }
  return y;
}

struct Mlp : torch::nn::Module {
  std::vector<torch::nn::Linear> layers;
  explicit Mlp(const std::vector<int64_t>& s) {
    for (size_t i = 0; i + 1 < s.size(); ++i)
      layers.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(s[i], s[i + 1])));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i]->forward(x);
      if (i + 1 < layers.size()) x = torch::relu(x);
    }
    return x;
  }
};

void train(const std::string& name, const std::vector<int64_t>& sizes, int64_t batch, bool ce) {
  torch::manual_seed(5);
  auto model = std::make_shared<Mlp>(sizes);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::Tensor x = torch::randn({batch, sizes.front()});
  torch::Tensor y = ce ? torch::randint(0, sizes.back(), {batch}, torch::kLong)
                       : torch::randn({batch, sizes.back()});
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor out = model->forward(x);
    torch::Tensor loss = ce ? torch::nn::functional::cross_entropy(out, y)
                            : torch::mse_loss(out, y);
    loss.backward();
    opt.step();
    volatile float l = loss.item<float>();
    (void)l;
  };
  measure(name, step, ce ? 5 : 50);
}

// The tiny MLP over a dataset of 64 batches stepped through in turn, with a teacher's targets
// (x . w + 0.1 noise): sloth's BM_TrainTinyMlp*Data (train_bench.cc says why).
void train_tiny_data(const std::string& name) {
  torch::manual_seed(6);
  const std::vector<int64_t> sizes = {32, 64, 64, 1};
  auto model = std::make_shared<Mlp>(sizes);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::Tensor w = torch::randn({32, 1}) / std::sqrt(32.0);
  std::vector<torch::Tensor> xs, ys;
  for (int i = 0; i < 64; ++i) {
    xs.push_back(torch::randn({16, 32}));
    ys.push_back(torch::matmul(xs.back(), w) + 0.1 * torch::randn({16, 1}));
  }
  size_t k = 0;
  auto step = [&] {
    const size_t i = k++ % xs.size();
    opt.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(xs[i]), ys[i]);
    loss.backward();
    opt.step();
    volatile float l = loss.item<float>();
    (void)l;
  };
  measure(name, step, 50);
}

// ---- issue 13: the models (keep in step with benchmarks/cnn_bench.cc, transformer_bench.cc and
// conv_bench.cc, and with tools/fashion_mnist.py and tools/char_lm.py) ----

// examples/train_fashion_mnist.cc --model=cnn: two blocks conv3x3(pad 1) + BatchNorm2d + ReLU +
// MaxPool2d(2) (1->32, 32->64), Flatten, Linear 3136->128, ReLU, Dropout(0.3), Linear 128->10.
struct Cnn : torch::nn::Module {
  torch::nn::Sequential net{
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)),
      torch::nn::BatchNorm2d(32), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)),
      torch::nn::BatchNorm2d(64), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Flatten(), torch::nn::Linear(64 * 7 * 7, 128), torch::nn::ReLU(),
      torch::nn::Dropout(0.3), torch::nn::Linear(128, 10)};
  Cnn() { register_module("net", net); }
  torch::Tensor forward(torch::Tensor x) { return net->forward(x); }
};

// One training step of the CNN at batch 128: forward (training mode: batch statistics,
// dropout), cross_entropy, backward, AdamW (lr 1e-3, wd 1e-2), loss read back.
void cnn_step(const std::string& suffix) {
  torch::manual_seed(13);
  auto model = std::make_shared<Cnn>();
  model->train();
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
  torch::Tensor x = torch::randn({128, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {128}, torch::kLong);
  measure("cnn_step_b128" + suffix, [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    volatile float l = loss.item<float>();
    (void)l;
  }, 5);
}

// One pre-norm transformer block (tools/char_lm.py's Block): x + attn(ln1(x)), then
// x + fc_out(gelu(fc(ln2(x)))); causal attention with matmul, masked_fill and softmax.
struct Block : torch::nn::Module {
  int64_t d, h;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, fc_out{nullptr};
  torch::Tensor causal;
  Block(int64_t d_, int64_t h_, int64_t T) : d(d_), h(h_) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc = register_module("fc", torch::nn::Linear(d, 4 * d));
    fc_out = register_module("fc_out", torch::nn::Linear(4 * d, d));
    causal = register_buffer("causal", torch::ones({T, T}, torch::kBool).tril());
  }
  torch::Tensor attn(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1);
    auto qkv3 = qkv->forward(x).split(d, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, h, d / h}).transpose(1, 2); };
    torch::Tensor q = heads(qkv3[0]), k = heads(qkv3[1]), v = heads(qkv3[2]);
    torch::Tensor s = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(d / h)));
    s = s.masked_fill(causal.logical_not(), -std::numeric_limits<float>::infinity());
    torch::Tensor y = torch::matmul(torch::softmax(s, -1), v);
    return proj->forward(y.transpose(1, 2).reshape({B, T, d}));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(ln1->forward(x));
    return x + fc_out->forward(torch::gelu(fc->forward(ln2->forward(x))));
  }
};

// One training step of one block (d=128, 4 heads, T=64, batch 32): forward, mse_loss against a
// fixed target, backward, AdamW, loss read back.
void transformer_block_step(const std::string& suffix) {
  const int64_t B = 32, T = 64, d = 128, h = 4;
  torch::manual_seed(14);
  auto block = std::make_shared<Block>(d, h, T);
  torch::optim::AdamW opt(block->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
  torch::Tensor x = torch::randn({B, T, d}), target = torch::randn({B, T, d});
  measure("transformer_block_step" + suffix, [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::mse_loss(block->forward(x), target);
    loss.backward();
    opt.step();
    volatile float l = loss.item<float>();
    (void)l;
  }, 5);
}

// The CNN's two conv layers at batch 128 (3x3, padding 1, bias): layer 0 [128,1,28,28] ->
// [128,32,28,28], layer 1 [128,32,14,14] -> [128,64,14,14]. Forward alone (no grad), and
// forward + backward with a fixed output gradient: weight and bias grads, and the input grad
// for layer 1 only (layer 0's input is the image, which needs none in the model).
void conv_layers(const std::string& suffix) {
  struct L { int64_t cin, cout, hw; };
  const L layers[2] = {{1, 32, 28}, {32, 64, 14}};
  for (int i = 0; i < 2; ++i) {
    const L& l = layers[i];
    torch::manual_seed(15 + i);
    torch::Tensor x = torch::randn({128, l.cin, l.hw, l.hw});
    torch::Tensor w = torch::randn({l.cout, l.cin, 3, 3}) * (1.0 / std::sqrt(9.0 * l.cin));
    torch::Tensor b = torch::randn({l.cout});
    torch::Tensor gy = torch::randn({128, l.cout, l.hw, l.hw});
    const std::string id = "layer" + std::to_string(i) + suffix;
    {
      torch::NoGradGuard ng;
      torch::Tensor y;
      measure("conv2d_fwd_" + id, [&] { y = torch::conv2d(x, w, b, 1, 1); });
    }
    x.requires_grad_(i == 1);
    w.requires_grad_(true);
    b.requires_grad_(true);
    measure("conv2d_fwdbwd_" + id, [&] {
      for (torch::Tensor* t : {&x, &w, &b}) t->mutable_grad().reset();
      torch::conv2d(x, w, b, 1, 1).backward(gy);
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  if (argc > 2) g_min_s = std::atof(argv[2]);
  const std::string group = argc > 3 ? argv[3] : "base";
  if (threads > 0) at::set_num_threads(threads);
  std::printf("# libtorch %s, at::get_num_threads()=%d\n", TORCH_VERSION, at::get_num_threads());
  if (group == "models") {
    const std::string suffix = "_t" + std::to_string(at::get_num_threads());
    cnn_step(suffix);
    transformer_block_step(suffix);
    conv_layers(suffix);
    return 0;
  }
  if (group != "base") {
    std::fprintf(stderr, "unknown workload group '%s' (expected base or models)\n", group.c_str());
    return 2;
  }
  torch::NoGradGuard* no_grad = new torch::NoGradGuard();

  {  // 2. elementwise chains over 16M floats
    torch::manual_seed(1);
    torch::Tensor a = torch::randn({kChainN}), b = torch::randn({kChainN}), c = torch::randn({kChainN}),
                  d = torch::randn({kChainN}), e = torch::randn({kChainN});
    for (int k : {1, 2, 4, 8, 16}) {
      torch::Tensor y;
      measure("chain_k" + std::to_string(k), [&] { y = chain(k, a, b, c); });
    }
    torch::Tensor y;
    measure("chain6", [&] { y = torch::relu(a * b + c) * d - e / 2; });
  }
  {  // 3. softmax / layer_norm [4096, 1024], matmul 1024
    torch::manual_seed(2);
    torch::Tensor x = torch::randn({4096, 1024});
    torch::Tensor w = torch::rand({1024}) + 0.5, b = torch::randn({1024});
    torch::Tensor y;
    measure("softmax_4096x1024", [&] { y = torch::softmax(x, -1); });
    measure("layer_norm_4096x1024", [&] { y = torch::layer_norm(x, {1024}, w, b); });
    torch::Tensor m1 = torch::randn({1024, 1024}), m2 = torch::randn({1024, 1024});
    measure("matmul_1024", [&] { y = torch::matmul(m1, m2); });
  }
  delete no_grad;
  // 4. training steps
  train("mlp_b256", {784, 1024, 1024, 10}, 256, true);
  train("mlp_b32", {784, 1024, 1024, 10}, 32, true);
  train("tiny_mlp_b16", {32, 64, 64, 1}, 16, false);
  // The same with denormals flushed (sloth's BM_TrainTinyMlp*Ftz; train_bench.cc says why).
  at::globalContext().setFlushDenormal(true);
  train("tiny_mlp_b16_ftz", {32, 64, 64, 1}, 16, false);
  at::globalContext().setFlushDenormal(false);
  train_tiny_data("tiny_mlp_b16_data");
  return 0;
}
