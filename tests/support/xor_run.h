// The synthetic training run shared by tests/train_smoke_test.cc (which asserts its loss,
// accuracy and plan misses) and benchmarks/train_smoke_bench.cc (which times it).
#pragma once

#include <cstdint>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace sloth::testing {

// Fraction of `ds` that `model` classifies right (argmax), in eval mode.
double accuracy(nn::Module& model, const data::Dataset& ds);

struct XorRun {
  double last_epoch_loss = 0;  // mean training loss of the last epoch
  double train_accuracy = 0;
  int64_t plan_misses = 0;     // since the run started
};
// An MLP 2-32-32-2 trained with Adam (lr 1e-2) for 40 epochs on 1,024 points labelled by the
// XOR of their quadrants (not linearly separable), batches of 128, a mark_step() per batch.
XorRun train_xor_quadrants();

}  // namespace sloth::testing
