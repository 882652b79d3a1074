// Everything of sloth::nn, sloth::optim and sloth::data.
#pragma once

#include "nn/checkpoint.h"
#include "nn/conv.h"     // convolution and pooling
#include "nn/pooling.h"  // convolution and pooling
#include "nn/data.h"
#include "nn/data_pipeline.h"  // LibTorch data pipeline: datasets::MNIST, map, make_data_loader
#include "nn/holder.h"
#include "nn/module.h"
// ---- normalization, layers, clipping (nn) ----
#include "nn/clip_grad.h"
#include "nn/layers.h"
#include "nn/normalization.h"
#include "nn/optim.h"
// ---- attention and transformer modules ----
#include "nn/attention.h"
#include "nn/transformer.h"
#include "nn/rnn.h"  // recurrent layers: RNN, LSTM, GRU and their cells
// ---- LibTorch API: loss modules ----
#include "nn/loss.h"
#include "nn/activation.h"  // LibTorch API: activation modules
#include "nn/functional.h"  // LibTorch API: torch::nn::functional (F::)
#include "nn/distance.h"    // LibTorch API: cosine_similarity, pairwise_distance
#include "nn/upsampling.h"  // LibTorch API: F::interpolate, nn::Upsample
#include "nn/init.h"        // LibTorch API: torch::nn::init
#include "nn/containers.h"  // LibTorch API: ModuleList, ModuleDict
#include "nn/distributed.h"  // distributed: DistributedDataParallel, DistributedSampler
