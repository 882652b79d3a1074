// sloth: a C++20 lazy-tensor runtime with graph batching. Include this one header: it brings
// the tensor library and sloth::nn, sloth::optim and sloth::data, as <torch/torch.h> does.
//
//   sloth::Tensor x = sloth::randn({4, 3});
//   sloth::Tensor y = sloth::relu(sloth::matmul(x, w) + b);   // recorded, not computed
//   sloth::mark_step();                                        // one graph, one plan, run
//   std::cout << y << "\n";                                    // reading is a sync point
#pragma once

#include "sloth/sloth_core.h"
#include "nn/nn.h"
