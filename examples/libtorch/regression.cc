// pytorch/examples cpp/regression, ported by the rename only (torch:: -> sloth::,
// <torch/torch.h> -> "sloth/sloth.h"): fits one Linear layer to a random 4th-degree
// polynomial with SGD on the smooth L1 loss until the loss is below 1e-3. Built and run by
// `bazel test //examples/libtorch:regression` (a regression test of the LibTorch API).
#include "sloth/sloth.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#define POLY_DEGREE 4

// Builds features i.e. a matrix with columns [x, x^2, x^3, x^4].
sloth::Tensor make_features(sloth::Tensor x) {
  x = x.unsqueeze(1);
  std::vector<sloth::Tensor> xs;
  for (int64_t i = 0; i < POLY_DEGREE; ++i) xs.push_back(x.pow(i + 1));
  return sloth::cat(xs, 1);
}

// Approximated function.
sloth::Tensor f(sloth::Tensor x, sloth::Tensor W_target, sloth::Tensor b_target) {
  return x.mm(W_target) + b_target.item();
}

// Creates a string description of a polynomial.
std::string poly_desc(sloth::Tensor W, sloth::Tensor b) {
  auto size = W.size(0);
  std::ostringstream stream;
  stream << "y = ";
  for (int64_t i = 0; i < size; ++i)
    stream << W[i].item<float>() << " x^" << size - i << " ";
  stream << "+ " << b[0].item<float>();
  return stream.str();
}

// Builds a batch i.e. (x, f(x)) pair.
std::pair<sloth::Tensor, sloth::Tensor> get_batch(sloth::Tensor W_target, sloth::Tensor b_target,
                                                  int64_t batch_size = 32) {
  auto x = sloth::randn({batch_size});
  x = make_features(x);
  auto y = f(x, W_target, b_target);
  return std::make_pair(x, y);
}

int main() {
  auto W_target = sloth::randn({POLY_DEGREE, 1}) * 5;
  auto b_target = sloth::randn({1}) * 5;

  // Define the model and optimizer
  auto fc = sloth::nn::Linear(W_target.size(0), 1);
  sloth::optim::SGD optim(fc->parameters(), .1);

  float loss = 0;
  int64_t batch_idx = 0;

  while (++batch_idx) {
    // Get data
    sloth::Tensor batch_x, batch_y;
    std::tie(batch_x, batch_y) = get_batch(W_target, b_target);

    // Reset gradients
    optim.zero_grad();

    // Forward pass
    auto output = sloth::smooth_l1_loss(fc(batch_x), batch_y);
    loss = output.item<float>();

    // Backward pass
    output.backward();

    // Apply gradients
    optim.step();

    // Stop criterion
    if (loss < 1e-3f) break;
    if (batch_idx > 20000) {   // (not in the original: a test must end)
      std::cout << "did not converge: loss " << loss << std::endl;
      return 1;
    }
  }

  std::cout << "Loss: " << loss << " after " << batch_idx << " batches" << std::endl;
  std::cout << "==> Learned function:\t" << poly_desc(fc->weight.view({-1}), fc->bias)
            << std::endl;
  std::cout << "==> Actual function:\t" << poly_desc(W_target.view({-1}), b_target) << std::endl;
  return 0;
}
