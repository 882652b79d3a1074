// quickstart: lazy recording, one batched sync, printing and metrics.
#include <iostream>

#include "sloth/sloth.h"

int main() {
  using namespace sloth;
  manual_seed(0);
  Tensor x = randn({4, 3});
  Tensor w = randn({3, 2}, TensorOptions().requires_grad());
  Tensor b = zeros({2}, TensorOptions().requires_grad());

  // Nothing is computed here: each call records a node of the lazy IR.
  Tensor h = relu(matmul(x, w) + b);
  Tensor loss = (h * h).mean();
  loss.backward();  // the backward pass is recorded as IR too
  std::cout << "pending IR for the loss:\n" << dump_ir({loss}) << "\n";

  // One sync runs every pending tensor (forward, backward, gradients) as ONE graph.
  reset_metrics();
  mark_step();
  std::cout << "after mark_step: " << metrics().to_string() << "\n\n";

  std::cout << "h = " << h << "\n";
  std::cout << "loss = " << loss.item() << "\n";
  std::cout << "dloss/dw = " << w.grad() << "\n";
  std::cout << "dloss/db = " << b.grad() << "\n";

  // The same program again hits the plan cache: no re-planning.
  for (int step = 0; step < 3; ++step) {
    Tensor xs = randn({4, 3});
    Tensor l = (relu(matmul(xs, w) + b).square()).mean();
    mark_step();
  }
  std::cout << "\nafter 3 more steps: " << metrics().to_string() << "\n";
  return 0;
}
