// sloth::data: in-memory datasets, Fashion-MNIST (IDX .gz files) and a DataLoader.
//
//   data::FashionMnist train("/usr/share/datasets/fashion-mnist", /*train=*/true);
//   data::DataLoader loader(train, /*batch_size=*/128, /*shuffle=*/true, /*seed=*/0);
//   for (auto& batch : loader) { ... batch.x [B, 784] float32, batch.y [B] int64 ... }
//
// Each range-for over a DataLoader is one epoch. With shuffle, epoch e (counting from 0, or
// from set_epoch) visits the samples in the order of a Fisher-Yates shuffle driven by
// std::mt19937_64(seed + e), so runs are reproducible. Each batch is assembled into one
// host buffer (one memcpy per sample row, no per-sample tensors) that becomes the batch
// tensor without another copy (from_blob).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sloth/sloth_core.h"

namespace sloth::data {

// A dataset of N samples, each x of x_shape() (float32) and y of y_shape() (int64 class ids
// or float32 targets).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Shape x_shape() const = 0;
  virtual Shape y_shape() const = 0;
  virtual DType y_dtype() const = 0;   // kInt64 or kFloat32
  // Writes sample i into x (numel(x_shape()) floats) and y (numel(y_shape()) elements).
  virtual void get(int64_t i, float* x, void* y) const = 0;
};

// Samples held in host memory: x is [N, ...] float32, y is [N, ...] int64 or float32.
class TensorDataset : public Dataset {
 public:
  TensorDataset() = default;
  TensorDataset(std::vector<float> x, Shape x_shape_per_sample, std::vector<int64_t> labels);
  TensorDataset(std::vector<float> x, Shape x_shape_per_sample, std::vector<float> targets,
                Shape y_shape_per_sample);
  int64_t size() const override { return n_; }
  Shape x_shape() const override { return x_shape_; }
  Shape y_shape() const override { return y_shape_; }
  DType y_dtype() const override { return y_dtype_; }
  void get(int64_t i, float* x, void* y) const override;
  // The first n samples (a copy).
  TensorDataset head(int64_t n) const;
  // All of x as one [N, ...] tensor and y as [N, ...] (one copy each).
  Tensor x_tensor() const;
  Tensor y_tensor() const;
  const std::vector<float>& x_data() const { return x_; }
  const std::vector<int64_t>& labels() const { return labels_; }

 protected:
  int64_t n_ = 0;
  Shape x_shape_, y_shape_;
  DType y_dtype_ = DType::kInt64;
  std::vector<float> x_;
  std::vector<int64_t> labels_;
  std::vector<float> targets_;
};

// IDX files (optionally gzip-compressed; read through zlib). Errors name the file.
struct IdxImages {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;   // n * rows * cols
};
IdxImages read_idx_images(const std::string& path);     // magic 2051 (0x00000803)
std::vector<uint8_t> read_idx_labels(const std::string& path);  // magic 2049 (0x00000801)

// Fashion-MNIST from Debian's dataset-fashion-mnist package: train (60,000) or test
// (10,000) images as float32 [N, 784] scaled to [0, 1] (pixel / 255; with normalize = true,
// standardized with the training set's mean 0.2860 and std 0.3530), labels int64 in [0, 10).
class FashionMnist : public TensorDataset {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  explicit FashionMnist(const std::string& root = kDefaultRoot, bool train = true,
                        bool normalize = false);
  static const char* class_name(int64_t label);
};

struct Batch {
  Tensor x, y;
};

class DataLoader {
 public:
  // The dataset must outlive the loader.
  DataLoader(const Dataset& dataset, int64_t batch_size, bool shuffle = false, uint64_t seed = 0,
             bool drop_last = false);

  class Iterator {
   public:
    Iterator(const DataLoader* loader, int64_t batch) : loader_(loader), batch_(batch) {}
    Batch& operator*();
    Batch* operator->() { return &**this; }
    Iterator& operator++();
    bool operator!=(const Iterator& o) const { return batch_ != o.batch_; }
    bool operator==(const Iterator& o) const { return batch_ == o.batch_; }
   private:
    const DataLoader* loader_;
    int64_t batch_;
    Batch current_;
    bool loaded_ = false;
  };
  // Starts the next epoch (shuffling with seed + epoch).
  Iterator begin();
  Iterator end() { return Iterator(this, num_batches()); }

  int64_t num_batches() const;
  int64_t batch_size() const { return batch_size_; }
  const Dataset& dataset() const { return *dataset_; }
  // The epoch the next begin() starts (for resuming a run).
  void set_epoch(int64_t epoch) { next_epoch_ = epoch; }
  int64_t epoch() const { return next_epoch_ - 1; }
  // Batch b of the current epoch.
  Batch batch(int64_t b) const;
  const std::vector<int64_t>& order() const { return order_; }

 private:
  const Dataset* dataset_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t next_epoch_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace sloth::data
