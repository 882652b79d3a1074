// nn::DistributedDataParallel (nn/distributed.h).
#include "nn/distributed.h"

#include <random>
#include <string>
#include <utility>

#include "dist/dist.h"

namespace sloth::nn {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> m, double bucket_cap_mb)
    : Module("DistributedDataParallel"), module(std::move(m)) {
  if (!module) throw Error("DistributedDataParallel: the module is null; pass a module");
  if (!dist::is_initialized())
    throw Error("DistributedDataParallel: the process group is not initialized; call "
                "sloth::dist::init() before wrapping the model");
  register_module("module", module);
  {
    // Every rank starts from rank 0's model (parameters and buffers).
    NoGradGuard no_grad;
    for (Tensor& t : module->parameters()) dist::broadcast(t, 0);
    for (Tensor& t : module->buffers()) dist::broadcast(t, 0);
  }
  State& s = *state_;
  s.params = module->parameters();
  // Buckets in reverse registration order (backward produces the last layers' gradients
  // first), closed when they reach the cap or the dtype changes (one flat tensor per bucket).
  const double cap = bucket_cap_mb * 1024 * 1024;
  double bytes = 0;
  for (size_t k = s.params.size(); k-- > 0;) {
    const Tensor& p = s.params[k];
    const double b = static_cast<double>(p.numel()) * dtype_size(p.dtype());
    const bool new_bucket = s.buckets.empty() || bytes >= cap ||
                            s.params[s.buckets.back().front()].dtype() != p.dtype();
    if (new_bucket) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().push_back(k);
    bytes += b;
  }
  s.ready.assign(s.buckets.size(), 0);
  std::weak_ptr<State> weak = state_;
  for (size_t b = 0; b < s.buckets.size(); ++b)
    for (size_t k : s.buckets[b])
      s.params[k].register_post_accumulate_grad_hook([weak, b](Tensor&) {
        if (auto st = weak.lock()) st->on_grad_ready(b);
      });
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *state_;
  for (size_t b = 0; b < s.ready.size(); ++b) {
    if (s.ready[b] == 0) continue;
    std::string missing;
    auto named = named_parameters();  // "module.fc1.weight", as PyTorch names them
    for (size_t k : s.buckets[b])
      if (!s.params[k].grad().defined()) missing += (missing.empty() ? "" : ", ") + named[k].first;
    s.ready.assign(s.ready.size(), 0);
    throw Error("DistributedDataParallel: the previous backward gave no gradient to some "
                "parameters (" + (missing.empty() ? std::string("of bucket ") + std::to_string(b) : missing) +
                "), so their gradients were not averaged; every parameter must take part in "
                "the loss (or remove the unused ones from the model)");
  }
  return module->forward(x);
}

void DistributedDataParallel::State::on_grad_ready(size_t b) {
  if (!require_sync) return;
  if (++ready[b] < buckets[b].size()) return;
  ready[b] = 0;
  reduce(b);
}

// One flat all-reduce per bucket; each gradient then takes its slice back (in place, so a
// later accumulation or optimizer sees the average).
void DistributedDataParallel::State::reduce(size_t b) {
  NoGradGuard no_grad;
  const std::vector<size_t>& idx = buckets[b];
  std::vector<Tensor> flat_parts;
  flat_parts.reserve(idx.size());
  for (size_t k : idx) flat_parts.push_back(params[k].grad().reshape({-1}));
  // The functional all-reduce: the gradients become views of its result, with no copy that
  // would read it at once, so it stays in flight until the optimizer reads the gradients.
  Tensor flat = dist::all_reduced(idx.size() == 1 ? flat_parts[0] : cat(flat_parts, 0),
                                  dist::ReduceOp::kAvg);
  int64_t offset = 0;
  for (size_t k : idx) {
    Tensor& p = params[k];
    const int64_t n = p.numel();
    p.set_grad(flat.narrow(0, offset, n).reshape(p.shape()));
    offset += n;
  }
}

}  // namespace sloth::nn

namespace sloth::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : n_(dataset_size),
      replicas_(num_replicas < 0 ? dist::world_size() : num_replicas),
      rank_(rank < 0 ? dist::rank() : rank),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  if (dataset_size < 0)
    throw Error("DistributedSampler: dataset_size must be >= 0, got " + std::to_string(dataset_size));
  if (replicas_ < 1 || rank_ >= replicas_)
    throw Error("DistributedSampler: rank " + std::to_string(rank_) + " is outside [0, " +
                std::to_string(replicas_) + "); pass 0 <= rank < num_replicas");
  // PyTorch: drop_last cuts to floor(n / p) per rank, otherwise ceil(n / p) with padding.
  num_samples_ = drop_last ? n_ / replicas_ : (n_ + replicas_ - 1) / replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) all[i] = i;
  if (shuffle_) {
    std::mt19937_64 rng(seed_ + static_cast<uint64_t>(epoch_));
    for (int64_t i = n_ - 1; i > 0; --i) {
      std::uniform_int_distribution<int64_t> pick(0, i);
      std::swap(all[i], all[pick(rng)]);
    }
  }
  const int64_t total = num_samples_ * replicas_;
  for (int64_t k = 0; static_cast<int64_t>(all.size()) < total && n_ > 0; ++k)
    all.push_back(all[k % n_]);  // pad by repeating the start
  all.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += replicas_) mine.push_back(all[i]);
  return mine;
}

}  // namespace sloth::data
