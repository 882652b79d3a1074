// LibTorch's data pipeline: the worker-job wrapper and datasets::MNIST.
#include "nn/data_pipeline.h"

#include <sys/stat.h>

#include "core/error.h"
#include "lazy/scheduler.h"

namespace sloth::data {
namespace detail {

void run_worker_job(const std::function<void()>& job) {
  lazy::WorkerTraceScope scope;
  job();
}

}  // namespace detail

namespace datasets {
namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// root/name, or root/name.gz when only the compressed file is there.
std::string idx_path(const std::string& root, const std::string& name) {
  std::string base = root.empty() || root.back() == '/' ? root + name : root + "/" + name;
  if (exists(base)) return base;
  if (exists(base + ".gz")) return base + ".gz";
  fail("datasets::MNIST: neither '%s' nor '%s.gz' exists; root must be the folder holding the "
       "four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
       "t10k-labels-idx1-ubyte, optionally gzip-compressed)",
       base, base);
}

}  // namespace

MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  const std::string prefix = train_ ? "train" : "t10k";
  const std::string ip = idx_path(root, prefix + "-images-idx3-ubyte");
  const std::string lp = idx_path(root, prefix + "-labels-idx1-ubyte");
  IdxImages im = read_idx_images(ip);
  std::vector<uint8_t> lab = read_idx_labels(lp);
  if (int64_t(lab.size()) != im.n)
    fail("datasets::MNIST: '%s' has %d images but '%s' has %d labels", ip, im.n, lp,
         int64_t(lab.size()));
  n_ = im.n;
  rows_ = im.rows;
  cols_ = im.cols;
  pixels_ = std::make_shared<std::vector<float>>(im.pixels.size());
  for (size_t i = 0; i < im.pixels.size(); ++i) (*pixels_)[i] = float(im.pixels[i]) / 255.0f;
  labels_ = std::make_shared<std::vector<int64_t>>(lab.begin(), lab.end());
  images_ = from_blob(pixels_->data(), Shape{n_, 1, rows_, cols_}, DType::kFloat32,
                      [keep = pixels_](void*) {});
  targets_ = from_blob(labels_->data(), Shape{n_}, DType::kInt64, [keep = labels_](void*) {});
}

Example<> MNIST::get(size_t index) {
  if (index >= size_t(n_))
    fail("datasets::MNIST::get: index %d is out of range for %d examples", int64_t(index), n_);
  // Data leaves over the host buffers (no copy, no select node): a batch of them has the same
  // graph whatever the indices, so the step's plan is found in the cache every time.
  const int64_t px = rows_ * cols_;
  Tensor x = from_blob(pixels_->data() + int64_t(index) * px, Shape{1, rows_, cols_},
                       DType::kFloat32, [keep = pixels_](void*) {});
  Tensor y = from_blob(labels_->data() + index, Shape{}, DType::kInt64, [keep = labels_](void*) {});
  return {std::move(x), std::move(y)};
}

}  // namespace datasets
}  // namespace sloth::data
