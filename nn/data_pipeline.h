// LibTorch's data pipeline (torch::data): datasets written as CRTP classes with get(index),
// transforms applied with .map(), samplers, and make_data_loader with prefetching workers.
//
//   struct MyData : data::datasets::Dataset<MyData> {
//     data::Example<> get(size_t i) override { ... return {x, y}; }
//     std::optional<size_t> size() const override { return n; }
//   };
//   auto ds = data::datasets::MNIST(root).map(data::transforms::Normalize<>(0.1307, 0.3081))
//                                        .map(data::transforms::Stack<>());
//   auto loader = data::make_data_loader<data::samplers::RandomSampler>(
//       std::move(ds), data::DataLoaderOptions().batch_size(64).workers(2));
//   for (auto& batch : *loader) { batch.data ...; batch.target ...; }
//
// With workers(n > 0), n threads build batches (get_batch and the transforms) while the
// consumer runs its step; at most max_jobs (default 2 * workers) batches are in flight, they
// arrive in the sampler's order, an exception thrown by a worker is rethrown by the consumer
// when it reaches that batch, and the loader joins its threads when destroyed or when a new
// epoch starts. Recording on a worker thread is safe: a sync waits for a worker's batch to
// finish (see lazy::trace_lock), and workers never auto-flush.
//
// The fast path the examples use is still data::FashionMnist + data::DataLoader (nn/data.h):
// one memcpy per sample row into one batch buffer, no per-sample tensors.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/data.h"
#include "nn/distributed.h"
#include "nn/holder.h"
#include "sloth/sloth_core.h"

namespace sloth::data {

// One sample (or, after Stack, one batch): data and target.
template <typename Data = Tensor, typename Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;
  Example() = default;
  Example(Data d, Target t) : data(std::move(d)), target(std::move(t)) {}
  Data data;
  Target target;
};

namespace datasets {

// A dataset producing whole batches: get_batch(indices) -> Batch.
template <typename Self, typename Batch, typename BatchRequest = std::vector<size_t>>
class BatchDataset {
 public:
  using SelfType = Self;
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;
  virtual ~BatchDataset() = default;
  virtual Batch get_batch(BatchRequest request) = 0;
  virtual std::optional<size_t> size() const = 0;

  // Returns a dataset that applies `transform` to what this one produces (*this is moved).
  template <typename Transform>
  auto map(Transform transform) &;
  template <typename Transform>
  auto map(Transform transform) &&;
};

// A dataset of single examples: get(index); get_batch gathers get() for each index.
template <typename Self, typename SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;
  virtual SingleExample get(size_t index) = 0;
  std::vector<SingleExample> get_batch(std::vector<size_t> indices) override {
    std::vector<SingleExample> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

// The result of dataset.map(transform).
template <typename Source, typename Transform>
class MapDataset : public BatchDataset<MapDataset<Source, Transform>,
                                       typename Transform::OutputBatchType,
                                       typename Source::BatchRequestType> {
 public:
  using DatasetType = Source;
  using TransformType = Transform;
  MapDataset(Source dataset, Transform transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}
  typename Transform::OutputBatchType get_batch(typename Source::BatchRequestType request) override {
    return transform_.apply_batch(dataset_.get_batch(std::move(request)));
  }
  std::optional<size_t> size() const override { return dataset_.size(); }
  const Source& dataset() const { return dataset_; }
  const Transform& transform() const { return transform_; }

 private:
  Source dataset_;
  Transform transform_;
};

template <typename Self, typename Batch, typename Req>
template <typename Transform>
auto BatchDataset<Self, Batch, Req>::map(Transform transform) & {
  return MapDataset<Self, Transform>(static_cast<Self&>(*this), std::move(transform));
}
template <typename Self, typename Batch, typename Req>
template <typename Transform>
auto BatchDataset<Self, Batch, Req>::map(Transform transform) && {
  return MapDataset<Self, Transform>(std::move(static_cast<Self&>(*this)), std::move(transform));
}

}  // namespace datasets

namespace transforms {

// Maps a whole batch.
template <typename Input, typename Output = Input>
class BatchTransform {
 public:
  using InputBatchType = Input;
  using OutputBatchType = Output;
  virtual ~BatchTransform() = default;
  virtual Output apply_batch(Input input) = 0;
};

// Maps each example of a batch (a std::vector of examples).
template <typename Input, typename Output = Input>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual Output apply(Input input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input) override {
    std::vector<Output> out;
    out.reserve(input.size());
    for (auto& e : input) out.push_back(apply(std::move(e)));
    return out;
  }
};

// Applies a function to each example's data, keeping its target.
template <typename Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  virtual Tensor operator()(Tensor input) = 0;
  E apply(E input) override {
    input.data = (*this)(std::move(input.data));
    return input;
  }
};

// TensorLambda<>([](Tensor x) { return x * 2; }).
template <typename Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  explicit TensorLambda(std::function<Tensor(Tensor)> f) : f_(std::move(f)) {}
  Tensor operator()(Tensor input) override { return f_(std::move(input)); }
 private:
  std::function<Tensor(Tensor)> f_;
};

// Lambda<Example<>>(f): a function on each example.
template <typename Input, typename Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  explicit Lambda(std::function<Output(Input)> f) : f_(std::move(f)) {}
  Output apply(Input input) override { return f_(std::move(input)); }
 private:
  std::function<Output(Input)> f_;
};

// (data - mean) / stddev, with one value per channel (dimension 0 of the data) or one for all.
template <typename Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(double mean, double stddev) : Normalize(std::vector<double>{mean}, std::vector<double>{stddev}) {}
  Normalize(std::vector<double> mean, std::vector<double> stddev)
      : mean_(std::move(mean)), std_(std::move(stddev)) {
    if (mean_.size() != std_.size() || mean_.empty())
      throw Error("transforms::Normalize: mean and stddev need the same number of values (one "
                  "per channel, or one for all), got " + std::to_string(mean_.size()) + " and " +
                  std::to_string(std_.size()));
  }
  Tensor operator()(Tensor input) override {
    if (mean_.size() == 1) return (input - mean_[0]) / std_[0];
    Shape s(size_t(std::max<int64_t>(input.dim(), 1)), 1);
    s[0] = int64_t(mean_.size());
    Tensor m = tensor(mean_, s, TensorOptions().dtype(input.dtype()));
    Tensor d = tensor(std_, s, TensorOptions().dtype(input.dtype()));
    return (input - m) / d;
  }
 private:
  std::vector<double> mean_, std_;
};

// Stacks a batch of examples into one example: data [B, ...], target [B, ...].
template <typename E = Example<>>
struct Stack;
template <>
struct Stack<Example<>> : BatchTransform<std::vector<Example<>>, Example<>> {
  Example<> apply_batch(std::vector<Example<>> examples) override {
    if (examples.empty())
      throw Error("transforms::Stack: the batch is empty (a sampler returned no indices)");
    std::vector<Tensor> d, t;
    d.reserve(examples.size());
    t.reserve(examples.size());
    for (auto& e : examples) {
      d.push_back(std::move(e.data));
      t.push_back(std::move(e.target));
    }
    return {stack(d, 0), stack(t, 0)};
  }
};

}  // namespace transforms

namespace samplers {

// The sampler interface: reset(new_size) starts an epoch, next(n) gives the next indices.
class Sampler {
 public:
  using BatchRequestType = std::vector<size_t>;
  virtual ~Sampler() = default;
  virtual void reset(std::optional<size_t> new_size = std::nullopt) = 0;
  virtual std::optional<std::vector<size_t>> next(size_t batch_size) = 0;
};

// 0, 1, ..., size - 1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    if (new_size) size_ = *new_size;
    index_ = 0;
  }
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    if (index_ >= size_) return std::nullopt;
    size_t n = std::min(batch_size, size_ - index_);
    std::vector<size_t> out(n);
    std::iota(out.begin(), out.end(), index_);
    index_ += n;
    return out;
  }
  size_t index() const { return index_; }
 private:
  size_t size_, index_ = 0;
};

// A new permutation at each reset(): Fisher-Yates driven by std::mt19937_64(seed + epoch), so
// runs are reproducible (LibTorch draws it with randperm from the global generator).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(size_t size, uint64_t seed = 0) : size_(size), seed_(seed) { reset(); }
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    if (new_size) size_ = *new_size;
    order_.resize(size_);
    std::iota(order_.begin(), order_.end(), size_t{0});
    std::mt19937_64 rng(seed_ + epoch_++);
    for (size_t i = size_; i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
    index_ = 0;
  }
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    if (index_ >= size_) return std::nullopt;
    size_t n = std::min(batch_size, size_ - index_);
    std::vector<size_t> out(order_.begin() + index_, order_.begin() + index_ + n);
    index_ += n;
    return out;
  }
  size_t index() const { return index_; }
 private:
  size_t size_;
  uint64_t seed_;
  uint64_t epoch_ = 0;
  size_t index_ = 0;
  std::vector<size_t> order_;
};

// data::DistributedSampler (nn/distributed.h) as a loader sampler: this rank's share of each
// epoch; each reset() after the first moves to the next epoch (as set_epoch(e) would).
class DistributedSampler : public Sampler {
 public:
  explicit DistributedSampler(size_t size, int num_replicas = -1, int rank = -1,
                              bool shuffle = true, uint64_t seed = 0, bool drop_last = false)
      : inner_(int64_t(size), num_replicas, rank, shuffle, seed, drop_last) {}
  explicit DistributedSampler(data::DistributedSampler inner) : inner_(std::move(inner)) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    (void)new_size;
    inner_.set_epoch(epoch_++);
    auto idx = inner_.indices();
    order_.assign(idx.begin(), idx.end());
    index_ = 0;
  }
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    if (index_ >= order_.size()) return std::nullopt;
    size_t n = std::min(batch_size, order_.size() - index_);
    std::vector<size_t> out(order_.begin() + index_, order_.begin() + index_ + n);
    index_ += n;
    return out;
  }
  void set_epoch(size_t epoch) { epoch_ = int64_t(epoch); }
 private:
  data::DistributedSampler inner_;
  int64_t epoch_ = 0;
  size_t index_ = 0;
  std::vector<size_t> order_;
};
using DistributedRandomSampler = DistributedSampler;

}  // namespace samplers

// DataLoaderOptions().batch_size(64).workers(2).
struct DataLoaderOptions {
  DataLoaderOptions() = default;
  DataLoaderOptions(size_t batch_size) : batch_size_(batch_size) {}  // NOLINT: LibTorch converts
  SLOTH_NN_ARG(size_t, batch_size) = 1;
  SLOTH_NN_ARG(size_t, workers) = 0;
  SLOTH_NN_ARG(std::optional<size_t>, max_jobs);
  SLOTH_NN_ARG(bool, drop_last) = false;
  SLOTH_NN_ARG(bool, enforce_ordering) = true;
};

namespace detail {
// Runs one worker job with the trace lock held and auto-flush off (nn/data_pipeline.cc).
void run_worker_job(const std::function<void()>& job);
}  // namespace detail

// Iterates a dataset's batches in the sampler's order; see the header comment.
template <typename DatasetT, typename SamplerT>
class StatelessDataLoader {
 public:
  using Batch = typename DatasetT::BatchType;
  using BatchRequest = std::vector<size_t>;

  StatelessDataLoader(DatasetT dataset, SamplerT sampler, DataLoaderOptions options)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
    if (options_.batch_size() == 0)
      throw Error("make_data_loader: batch_size must be at least 1, got 0");
    max_jobs_ = options_.max_jobs().value_or(2 * options_.workers());
    if (options_.workers() > 0 && max_jobs_ == 0) max_jobs_ = 1;
  }
  ~StatelessDataLoader() { stop_workers(); }
  StatelessDataLoader(const StatelessDataLoader&) = delete;
  StatelessDataLoader& operator=(const StatelessDataLoader&) = delete;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;
    Iterator() = default;
    explicit Iterator(StatelessDataLoader* l) : loader_(l) { advance(); }
    Batch& operator*() { return *current_; }
    Batch* operator->() { return &*current_; }
    Iterator& operator++() { advance(); return *this; }
    bool operator==(const Iterator& o) const { return done() == o.done(); }
    bool operator!=(const Iterator& o) const { return !(*this == o); }
   private:
    bool done() const { return !current_.has_value(); }
    void advance() {
      current_.reset();
      if (loader_) current_ = loader_->next_batch();
      if (!current_) loader_ = nullptr;
    }
    StatelessDataLoader* loader_ = nullptr;
    std::optional<Batch> current_;
  };

  // Starts an epoch: resets the sampler (and drops batches of an unfinished epoch).
  Iterator begin() {
    stop_workers();
    sampler_.reset(dataset_.size());
    if (options_.workers() > 0) start_workers();
    return Iterator(this);
  }
  Iterator end() { return Iterator(); }
  const DataLoaderOptions& options() const { return options_; }

 private:
  struct Result {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  std::optional<BatchRequest> next_request() {
    auto r = sampler_.next(options_.batch_size());
    if (r && options_.drop_last() && r->size() < options_.batch_size()) return std::nullopt;
    if (r && r->empty()) return std::nullopt;
    return r;
  }

  std::optional<Batch> next_batch() {
    if (options_.workers() == 0) {
      auto r = next_request();
      if (!r) return std::nullopt;
      return dataset_.get_batch(std::move(*r));
    }
    std::unique_lock<std::mutex> l(mu_);
    fill_queue(l);
    if (next_out_ == next_seq_) return std::nullopt;  // nothing in flight: epoch done
    const uint64_t want = next_out_;
    done_cv_.wait(l, [&] { return results_.count(want) > 0; });
    Result r = std::move(results_[want]);
    results_.erase(want);
    ++next_out_;
    fill_queue(l);
    if (r.error) std::rethrow_exception(r.error);
    return std::move(r.batch);
  }

  // Keeps up to max_jobs batches requested (the sampler runs on the consumer's thread).
  void fill_queue(std::unique_lock<std::mutex>&) {
    while (!sampler_done_ && next_seq_ - next_out_ < max_jobs_) {
      auto r = next_request();
      if (!r) { sampler_done_ = true; break; }
      jobs_.emplace_back(next_seq_++, std::move(*r));
      job_cv_.notify_one();
    }
  }

  void start_workers() {
    stopping_ = false;
    sampler_done_ = false;
    next_seq_ = next_out_ = 0;
    jobs_.clear();
    results_.clear();
    for (size_t i = 0; i < options_.workers(); ++i)
      threads_.emplace_back([this] { worker_loop(); });
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
      jobs_.clear();
    }
    job_cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    results_.clear();
  }

  void worker_loop() {
    for (;;) {
      std::pair<uint64_t, BatchRequest> job;
      {
        std::unique_lock<std::mutex> l(mu_);
        job_cv_.wait(l, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.erase(jobs_.begin());
      }
      Result r;
      try {
        detail::run_worker_job([&] { r.batch.emplace(dataset_.get_batch(std::move(job.second))); });
      } catch (...) {
        r.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return;
        results_.emplace(job.first, std::move(r));
      }
      done_cv_.notify_all();
    }
  }

  DatasetT dataset_;
  SamplerT sampler_;
  DataLoaderOptions options_;
  size_t max_jobs_ = 0;
  std::mutex mu_;
  std::condition_variable job_cv_, done_cv_;
  std::vector<std::pair<uint64_t, BatchRequest>> jobs_;
  std::map<uint64_t, Result> results_;
  std::vector<std::thread> threads_;
  uint64_t next_seq_ = 0, next_out_ = 0;
  bool stopping_ = false, sampler_done_ = false;
};

// make_data_loader<SequentialSampler>(std::move(dataset), DataLoaderOptions().batch_size(64)):
// the sampler is built from dataset.size() (RandomSampler by default, as LibTorch).
template <typename SamplerT = samplers::RandomSampler, typename DatasetT>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(
    DatasetT dataset, DataLoaderOptions options = DataLoaderOptions()) {
  auto size = dataset.size();
  if (!size)
    throw Error("make_data_loader: the dataset has no size(); pass a sampler: "
                "make_data_loader(std::move(dataset), sampler, options)");
  SamplerT sampler(*size);
  return std::make_unique<StatelessDataLoader<DatasetT, SamplerT>>(
      std::move(dataset), std::move(sampler), std::move(options));
}
template <typename SamplerT = samplers::RandomSampler, typename DatasetT>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(DatasetT dataset,
                                                                          size_t batch_size) {
  return make_data_loader<SamplerT>(std::move(dataset), DataLoaderOptions(batch_size));
}
template <typename DatasetT, typename SamplerT>
  requires std::is_base_of_v<samplers::Sampler, SamplerT>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(
    DatasetT dataset, SamplerT sampler, DataLoaderOptions options = DataLoaderOptions()) {
  return std::make_unique<StatelessDataLoader<DatasetT, SamplerT>>(
      std::move(dataset), std::move(sampler), std::move(options));
}

namespace datasets {

// LibTorch's MNIST: the four IDX files in root (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; each may be gzip-compressed as NAME.gz, as
// Debian's Fashion-MNIST is). images(): float32 [N, 1, 28, 28] in [0, 1] (pixel / 255);
// targets(): int64 [N]. get(i) is {images()[i], targets()[i]}.
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override { return size_t(n_); }
  bool is_train() const noexcept { return train_; }
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }

 private:
  bool train_;
  int64_t n_ = 0, rows_ = 0, cols_ = 0;
  std::shared_ptr<std::vector<float>> pixels_;     // shared with the tensors made from them
  std::shared_ptr<std::vector<int64_t>> labels_;
  Tensor images_, targets_;
};

}  // namespace datasets

}  // namespace sloth::data
