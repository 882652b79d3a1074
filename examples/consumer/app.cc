// A consumer program: fits y = 2x + 1 with three lines of autograd and prints the result.
#include <cmath>
#include <iostream>

#include "sloth/sloth.h"

int main() {
  using namespace sloth;
  Tensor x = linspace(-1, 1, 64).reshape({64, 1});
  Tensor y = x * 2.0 + 1.0;
  Tensor w = zeros({1, 1}, TensorOptions().requires_grad());
  Tensor b = zeros({1}, TensorOptions().requires_grad());
  for (int step = 0; step < 200; ++step) {
    Tensor loss = mse_loss(matmul(x, w) + b, y);
    loss.backward();
    {
      NoGradGuard no_grad;
      w.sub_(w.grad() * 0.5);
      b.sub_(b.grad() * 0.5);
      w.grad().zero_();
      b.grad().zero_();
    }
    mark_step();
  }
  double wv = w.item(), bv = b.item();
  std::cout << "fitted y = " << wv << " x + " << bv << "\n";
  std::cout << metrics().to_string() << "\n";
  return std::fabs(wv - 2) < 1e-3 && std::fabs(bv - 1) < 1e-3 ? 0 : 1;
}
