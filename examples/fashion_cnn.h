// The Fashion-MNIST CNN of `train_fashion_mnist --model=cnn` and of benchmarks/cnn_bench.cc;
// tools/fashion_mnist.py and benchmarks/libtorch_workloads.cc build the same model in PyTorch
// and LibTorch, with the same parameter and buffer names ("features.0.weight",
// "features.1.running_mean", "classifier.1.weight", ...), so a state dict maps one to one.
//
//   features:   Conv2d(1, 32, 3, padding 1), BatchNorm2d(32), ReLU, MaxPool2d(2)      28 -> 14
//               Conv2d(32, 64, 3, padding 1), BatchNorm2d(64), ReLU, MaxPool2d(2)     14 -> 7
//   classifier: Flatten, Linear(3136, 128), ReLU, Dropout(p), Linear(128, 10)
#pragma once

#include <memory>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace sloth::examples {

class FashionCnn : public nn::Module {
 public:
  explicit FashionCnn(double dropout = 0.3) : Module("FashionCnn") {
    features = register_module("features", std::make_shared<nn::Sequential>());
    for (auto [in, out] : {std::pair<int64_t, int64_t>{1, 32}, {32, 64}}) {
      features->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, out, 3).padding(1)));
      features->push_back(std::make_shared<nn::BatchNorm2d>(out));
      features->push_back(std::make_shared<nn::ReLU>());
      features->push_back(std::make_shared<nn::MaxPool2d>(nn::MaxPool2dOptions(2)));
    }
    classifier = register_module(
        "classifier",
        std::make_shared<nn::Sequential>(
            std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64 * 7 * 7, 128),
            std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(dropout),
            std::make_shared<nn::Linear>(128, 10)));
  }

  // x: images [B, 1, 28, 28], or rows of 784 pixels [B, 784] as data::FashionMnist yields
  // them. Returns logits [B, 10].
  Tensor forward(const Tensor& x) override {
    Tensor images = x.dim() == 2 ? x.view({x.size(0), 1, 28, 28}) : x;
    return classifier->forward(features->forward(images));
  }

  std::shared_ptr<nn::Sequential> features, classifier;
};

}  // namespace sloth::examples
