// Everything of sloth::nn, sloth::optim and sloth::data.
#pragma once

#include "nn/checkpoint.h"
#include "nn/conv.h"     // convolution and pooling
#include "nn/pooling.h"  // convolution and pooling
#include "nn/data.h"
#include "nn/module.h"
#include "nn/optim.h"
