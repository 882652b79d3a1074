// The tensor library without nn/optim/data (what nn itself builds on). Users include
// "sloth/sloth.h", which brings this and nn.
//
//   sloth::Tensor x = sloth::randn({4, 3});
//   sloth::Tensor y = sloth::relu(sloth::matmul(x, w) + b);   // recorded, not computed
//   sloth::mark_step();                                        // one graph, one plan, run
//   std::cout << y << "\n";                                    // reading is a sync point
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/float_env.h"  // set_flush_denormal
#include "sloth/autograd_api.h"
#include "sloth/compat.h"
#include "sloth/func.h"
#include "sloth/indexing.h"
#include "sloth/jit.h"
#include "sloth/lazy_api.h"
#include "sloth/ops.h"
#include "sloth/profiler.h"
#include "sloth/tensor.h"
