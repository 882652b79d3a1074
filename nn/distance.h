// Distances as LibTorch has them: torch::cosine_similarity / pairwise_distance, their F::
// forms with options, and the modules nn::CosineSimilarity and nn::PairwiseDistance.
#pragma once

#include <cstdint>

#include "nn/holder.h"
#include "nn/module.h"

namespace sloth {

// Cosine of the angle between x1 and x2 along `dim` (after broadcasting them), with PyTorch
// 1.13's formula: each squared norm is clamped at eps^2, the clamp passing the gradient.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// The p-norm of x1 - x2 + eps along the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6,
                         bool keepdim = false);

}  // namespace sloth

namespace sloth::nn {

class CosineSimilarityOptions {
  SLOTH_NN_ARG(int64_t, dim) = 1;
  SLOTH_NN_ARG(double, eps) = 1e-8;
};
class PairwiseDistanceOptions {
  SLOTH_NN_ARG(double, p) = 2;
  SLOTH_NN_ARG(double, eps) = 1e-6;
  SLOTH_NN_ARG(bool, keepdim) = false;
};

class CosineSimilarityImpl : public Module {
 public:
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {})
      : Module("CosineSimilarity"), options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  CosineSimilarityOptions options;
 protected:
  std::string extra_repr() const override;
};
class PairwiseDistanceImpl : public Module {
 public:
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {})
      : Module("PairwiseDistance"), options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  PairwiseDistanceOptions options;
 protected:
  std::string extra_repr() const override;
};
SLOTH_MODULE(CosineSimilarity);
SLOTH_MODULE(PairwiseDistance);

namespace functional {
using CosineSimilarityFuncOptions = CosineSimilarityOptions;
using PairwiseDistanceFuncOptions = PairwiseDistanceOptions;
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2,
                         const CosineSimilarityFuncOptions& options = {});
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2,
                         const PairwiseDistanceFuncOptions& options = {});
}  // namespace functional

}  // namespace sloth::nn
