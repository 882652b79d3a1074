// pytorch/examples cpp/autograd, ported by the rename only (torch:: -> sloth::,
// <torch/torch.h> -> "sloth/sloth.h"): basic autograd operations, higher-order gradients and
// custom autograd functions, printing what LibTorch prints. Run by
// `bazel test //examples/libtorch:autograd`.
#include "sloth/sloth.h"

#include <iostream>

using namespace sloth::autograd;

void basic_autograd_operations_example() {
  std::cout << "====== Running: \"Basic autograd operations\" ======" << std::endl;

  // Create a tensor and set requires_grad() to track computation with it
  auto x = sloth::ones({2, 2}, sloth::requires_grad());
  std::cout << x << std::endl;

  // A tensor operation; y has a grad_fn
  auto y = x + 2;
  std::cout << y << std::endl;
  std::cout << y.grad_fn()->name() << std::endl;

  auto z = y * y * 3;
  auto out = z.mean();
  std::cout << z << std::endl;
  std::cout << z.grad_fn()->name() << std::endl;
  std::cout << out << std::endl;
  std::cout << out.grad_fn()->name() << std::endl;

  // requires_grad_() changes the flag in place
  auto a = sloth::randn({2, 2});
  a = ((a * 3) / (a - 1));
  std::cout << a.requires_grad() << std::endl;
  a.requires_grad_(true);
  std::cout << a.requires_grad() << std::endl;
  auto b = (a * a).sum();
  std::cout << b.grad_fn()->name() << std::endl;

  // Backprop: d(out)/dx
  out.backward();
  std::cout << x.grad() << std::endl;

  // A vector-Jacobian product
  x = sloth::randn(3, sloth::requires_grad());
  y = x * 2;
  while (y.norm().item<double>() < 1000) y = y * 2;
  std::cout << y << std::endl;
  std::cout << y.grad_fn()->name() << std::endl;
  auto v = sloth::tensor({0.1, 1.0, 0.0001}, sloth::kFloat);
  y.backward(v);
  std::cout << x.grad() << std::endl;

  // Stop tracking history
  std::cout << x.requires_grad() << std::endl;
  std::cout << x.pow(2).requires_grad() << std::endl;
  {
    sloth::NoGradGuard no_grad;
    std::cout << x.pow(2).requires_grad() << std::endl;
  }

  // detach() gives a tensor with the same content that does not require grad
  std::cout << x.requires_grad() << std::endl;
  y = x.detach();
  std::cout << y.requires_grad() << std::endl;
  std::cout << x.eq(y).all().item<bool>() << std::endl;
}

void compute_higher_order_gradients_example() {
  std::cout << "====== Running \"Computing higher-order gradients in C++\" ======" << std::endl;

  // One use of higher-order gradients is a gradient penalty.
  auto model = sloth::nn::Linear(4, 3);
  auto input = sloth::randn({3, 4}).requires_grad_(true);
  auto output = model(input);

  // Calculate loss
  auto target = sloth::randn({3, 3});
  auto loss = sloth::nn::MSELoss()(output, target);

  // Use norm of gradients as penalty
  auto grad_output = sloth::ones_like(output);
  auto gradient = sloth::autograd::grad({output}, {input}, /*grad_outputs=*/{grad_output},
                                        /*create_graph=*/true)[0];
  auto gradient_penalty = sloth::pow((gradient.norm(2, /*dim=*/1) - 1), 2).mean();

  // Add gradient penalty to loss
  auto combined_loss = loss + gradient_penalty;
  combined_loss.backward();

  std::cout << input.grad() << std::endl;
}

// Inherit from Function
class LinearFunction : public Function<LinearFunction> {
 public:
  // Note that both forward and backward are static functions

  // bias is an optional argument
  static sloth::Tensor forward(AutogradContext* ctx, sloth::Tensor input, sloth::Tensor weight,
                               sloth::Tensor bias = sloth::Tensor()) {
    ctx->save_for_backward({input, weight, bias});
    auto output = input.mm(weight.t());
    if (bias.defined()) output += bias.unsqueeze(0).expand_as(output);
    return output;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto input = saved[0];
    auto weight = saved[1];
    auto bias = saved[2];

    auto grad_output = grad_outputs[0];
    auto grad_input = grad_output.mm(weight);
    auto grad_weight = grad_output.t().mm(input);
    auto grad_bias = sloth::Tensor();
    if (bias.defined()) grad_bias = grad_output.sum(0);

    return {grad_input, grad_weight, grad_bias};
  }
};

class MulConstant : public Function<MulConstant> {
 public:
  static sloth::Tensor forward(AutogradContext* ctx, sloth::Tensor tensor, double constant) {
    // ctx is a context object that can be used to stash information for backward computation
    ctx->saved_data["constant"] = constant;
    return tensor * constant;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // We return as many input gradients as there were arguments.
    // Gradients of non-tensor arguments to forward must be `sloth::Tensor()`.
    return {grad_outputs[0] * ctx->saved_data["constant"].toDouble(), sloth::Tensor()};
  }
};

void custom_autograd_function_example() {
  std::cout << "====== Running \"Using custom autograd function in C++\" ======" << std::endl;
  {
    auto x = sloth::randn({2, 3}).requires_grad_();
    auto weight = sloth::randn({4, 3}).requires_grad_();
    auto y = LinearFunction::apply(x, weight);
    y.sum().backward();

    std::cout << x.grad() << std::endl;
    std::cout << weight.grad() << std::endl;
  }
  {
    auto x = sloth::randn({2}).requires_grad_();
    auto y = MulConstant::apply(x, 5.5);
    y.sum().backward();

    std::cout << x.grad() << std::endl;
  }
}

int main() {
  std::cout << std::boolalpha;

  basic_autograd_operations_example();

  std::cout << "\n";

  compute_higher_order_gradients_example();

  std::cout << "\n";

  custom_autograd_function_example();
}
