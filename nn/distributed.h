// nn::DistributedDataParallel: data-parallel training over the ranks of sloth::dist, as
// PyTorch's DDP. Every rank runs the same step on its shard of the batch; the wrapper
//   - broadcasts the module's parameters and buffers from rank 0 when it is built, so every
//     rank starts from the same model;
//   - averages the gradients over the ranks during backward: parameters are grouped in
//     buckets of about bucket_cap_mb, in reverse order of registration (the order backward
//     produces their gradients), and when every parameter of a bucket has its gradient
//     accumulated, the bucket is flattened and all-reduced (kAvg) in one collective. The
//     collectives are lazy ops of the step graph, so a bucket's all-reduce can run while
//     earlier layers' backward still computes;
//   - under no_sync() skips the averaging, so gradients accumulate locally; the next backward
//     outside no_sync() averages the accumulated gradients (as PyTorch's no_sync()).
//
//   sloth::dist::init();
//   auto ddp = std::make_shared<nn::DistributedDataParallel>(model);
//   optim::SGD opt(ddp->parameters(), {.lr = 0.1});
//   loss_fn(ddp->forward(x_shard), y_shard).backward();  opt.step();
//
// Every parameter must receive a gradient in each synced backward (PyTorch's default
// find_unused_parameters = false); otherwise the next forward throws, naming them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace sloth::nn {

class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, double bucket_cap_mb = 25);
  Tensor forward(const Tensor& x) override;

  // While alive, backward does not average gradients (they accumulate locally).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.state_->require_sync) {
      ddp.state_->require_sync = false;
    }
    ~NoSync() { ddp_.state_->require_sync = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  std::shared_ptr<Module> module;
  // Parameter indices (into module->parameters()) of each bucket, in reduction order.
  const std::vector<std::vector<size_t>>& bucket_indices() const { return state_->buckets; }

  // What the parameters' gradient hooks share with the wrapper (they hold it weakly: a hook
  // that outlives the wrapper does nothing).
  struct State {
    std::vector<Tensor> params;                 // module->parameters(), registration order
    std::vector<std::vector<size_t>> buckets;   // parameter indices, in reduction order
    std::vector<size_t> ready;                  // per bucket: gradients accumulated so far
    bool require_sync = true;
    void on_grad_ready(size_t bucket);
    void reduce(size_t bucket);
  };

 private:
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace sloth::nn

namespace sloth::data {

// The sample indices of one rank, as PyTorch's DistributedSampler: every rank shuffles the
// whole index range with the same seed (std::mt19937_64(seed + epoch), Fisher-Yates, as
// DataLoader), pads it by repeating its start (or, with drop_last, cuts it) to a multiple of
// the world size, and takes every num_replicas-th index starting at its rank. So the shards
// are equal and, without padding, disjoint. Call set_epoch(e) before each epoch.
class DistributedSampler {
 public:
  // num_replicas / rank < 0: dist::world_size() / dist::rank().
  explicit DistributedSampler(int64_t dataset_size, int num_replicas = -1, int rank = -1,
                              bool shuffle = true, uint64_t seed = 0, bool drop_last = false);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // This rank's indices for the current epoch (size() of them).
  std::vector<int64_t> indices() const;
  int64_t size() const { return num_samples_; }

 private:
  int64_t n_, num_samples_;
  int replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

}  // namespace sloth::data
