// The shortest training loop: fit y = 3x + 2 (plus noise) with nn::Linear and SGD.
#include <cstdio>

#include "nn/nn.h"
#include "sloth/sloth.h"

int main() {
  using namespace sloth;
  manual_seed(0);
  Tensor x = randn({256, 1});
  Tensor y = 3 * x + 2 + 0.1 * randn({256, 1});

  nn::Linear model(1, 1);   // a holder: model->weight, model(x)
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  for (int step = 0; step < 100; ++step) {
    Tensor loss = mse_loss(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    mark_step();  // one graph per step
    if (step % 20 == 0) printf("step %3d  loss %.5f\n", step, loss.item());
  }
  printf("fitted: y = %.4f x + %.4f   (true: y = 3x + 2)\n", model->weight.item(),
         model->bias.item());
  printf("%s\n", metrics().to_string().c_str());
  return 0;
}
