// LibTorch eager side of sloth's benchmarks (workloads 2-4 of issue 5). Not a Bazel target:
// compare.sh builds it with g++ -O3 -std=c++17 against Debian's libtorch-dev.
//   ./libtorch_workloads [threads] [min_seconds_per_workload]
// Prints one line per workload: "name median_ms min_ms reps".
// Keep the workloads in step with benchmarks/bench_common.h and the *_bench.cc files.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
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

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  if (argc > 2) g_min_s = std::atof(argv[2]);
  if (threads > 0) at::set_num_threads(threads);
  std::printf("# libtorch %s, at::get_num_threads()=%d\n", TORCH_VERSION, at::get_num_threads());
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
  return 0;
}
