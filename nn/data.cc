#include "nn/data.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sloth::data {
namespace {

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The whole (decompressed) file. gzopen reads plain files too.
std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail("cannot open '%s': %s", path, errno ? std::strerror(errno) : "gzopen failed");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      fail("'%s': corrupt gzip data (%s)", path, msg);
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  gzclose(f);
  return out;
}

uint32_t be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + at;
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  std::string b = read_gz(path);
  if (b.size() < 4)
    fail("'%s': not an IDX image file (%d bytes, the 16-byte header is incomplete)", path,
         int64_t(b.size()));
  uint32_t magic = be32(b, 0);
  if (magic != 2051)
    fail("'%s': bad magic number %d for an IDX image file (expected 2051 = 0x00000803)%s", path,
         int64_t(magic), magic == 2049 ? "; this looks like a label file" : "");
  if (b.size() < 16)
    fail("'%s': truncated IDX image file (%d bytes, the 16-byte header is incomplete)", path,
         int64_t(b.size()));
  IdxImages im;
  im.n = be32(b, 4);
  im.rows = be32(b, 8);
  im.cols = be32(b, 12);
  const uint64_t want = 16 + uint64_t(im.n) * uint64_t(im.rows) * uint64_t(im.cols);
  if (b.size() != want)
    fail("'%s': size mismatch: the header says %d images of %dx%d (%d bytes in all) but the "
         "file has %d bytes%s",
         path, im.n, im.rows, im.cols, int64_t(want), int64_t(b.size()),
         b.size() < want ? " (truncated)" : "");
  im.pixels.assign(b.begin() + 16, b.end());
  return im;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  std::string b = read_gz(path);
  if (b.size() < 4)
    fail("'%s': not an IDX label file (%d bytes, the 8-byte header is incomplete)", path,
         int64_t(b.size()));
  uint32_t magic = be32(b, 0);
  if (magic != 2049)
    fail("'%s': bad magic number %d for an IDX label file (expected 2049 = 0x00000801)%s", path,
         int64_t(magic), magic == 2051 ? "; this looks like an image file" : "");
  if (b.size() < 8)
    fail("'%s': truncated IDX label file (%d bytes, the 8-byte header is incomplete)", path,
         int64_t(b.size()));
  const uint64_t n = be32(b, 4);
  if (b.size() != 8 + n)
    fail("'%s': size mismatch: the header says %d labels but the file has %d bytes of labels%s",
         path, int64_t(n), int64_t(b.size() - 8), b.size() < 8 + n ? " (truncated)" : "");
  return std::vector<uint8_t>(b.begin() + 8, b.end());
}

// ---- TensorDataset ---------------------------------------------------------------------------

TensorDataset::TensorDataset(std::vector<float> x, Shape xs, std::vector<int64_t> labels)
    : n_(int64_t(labels.size())), x_shape_(std::move(xs)), y_shape_{}, y_dtype_(kInt64),
      x_(std::move(x)), labels_(std::move(labels)) {
  if (int64_t(x_.size()) != n_ * numel_of(x_shape_))
    fail("TensorDataset: %d labels need %d x values of shape %s each, got %d values", n_,
         n_ * numel_of(x_shape_), shape_str(x_shape_), int64_t(x_.size()));
}

TensorDataset::TensorDataset(std::vector<float> x, Shape xs, std::vector<float> targets, Shape ys)
    : x_shape_(std::move(xs)), y_shape_(std::move(ys)), y_dtype_(kFloat32), x_(std::move(x)),
      targets_(std::move(targets)) {
  const int64_t per = numel_of(y_shape_);
  if (per <= 0 || int64_t(targets_.size()) % per)
    fail("TensorDataset: %d targets do not split into samples of shape %s",
         int64_t(targets_.size()), shape_str(y_shape_));
  n_ = int64_t(targets_.size()) / per;
  if (int64_t(x_.size()) != n_ * numel_of(x_shape_))
    fail("TensorDataset: %d samples need %d x values of shape %s each, got %d values", n_,
         n_ * numel_of(x_shape_), shape_str(x_shape_), int64_t(x_.size()));
}

void TensorDataset::get(int64_t i, float* x, void* y) const {
  const int64_t dx = numel_of(x_shape_), dy = numel_of(y_shape_);
  std::memcpy(x, x_.data() + i * dx, dx * sizeof(float));
  if (y_dtype_ == kInt64)
    std::memcpy(y, labels_.data() + i * dy, dy * sizeof(int64_t));
  else
    std::memcpy(y, targets_.data() + i * dy, dy * sizeof(float));
}

TensorDataset TensorDataset::head(int64_t n) const {
  n = std::clamp<int64_t>(n, 0, n_);
  const int64_t dx = numel_of(x_shape_), dy = numel_of(y_shape_);
  std::vector<float> x(x_.begin(), x_.begin() + n * dx);
  if (y_dtype_ == kInt64)
    return TensorDataset(std::move(x), x_shape_,
                         std::vector<int64_t>(labels_.begin(), labels_.begin() + n * dy));
  return TensorDataset(std::move(x), x_shape_,
                       std::vector<float>(targets_.begin(), targets_.begin() + n * dy), y_shape_);
}

Tensor TensorDataset::x_tensor() const {
  Shape s{n_};
  s.insert(s.end(), x_shape_.begin(), x_shape_.end());
  return from_vector<float>(x_, s);
}

Tensor TensorDataset::y_tensor() const {
  Shape s{n_};
  s.insert(s.end(), y_shape_.begin(), y_shape_.end());
  return y_dtype_ == kInt64 ? from_vector<int64_t>(labels_, s) : from_vector<float>(targets_, s);
}

// ---- Fashion-MNIST ---------------------------------------------------------------------------

FashionMnist::FashionMnist(const std::string& root, bool train, bool normalize) {
  const std::string prefix = root + "/" + (train ? "train" : "t10k");
  const std::string ip = prefix + "-images-idx3-ubyte.gz", lp = prefix + "-labels-idx1-ubyte.gz";
  IdxImages im = read_idx_images(ip);
  std::vector<uint8_t> lab = read_idx_labels(lp);
  if (im.rows != 28 || im.cols != 28)
    fail("'%s': Fashion-MNIST images are 28x28, this file has %dx%d", ip, im.rows, im.cols);
  if (int64_t(lab.size()) != im.n)
    fail("Fashion-MNIST: '%s' has %d images but '%s' has %d labels", ip, im.n, lp,
         int64_t(lab.size()));
  n_ = im.n;
  x_shape_ = {im.rows * im.cols};
  y_shape_ = {};
  y_dtype_ = kInt64;
  x_.resize(im.pixels.size());
  const float mean = 0.2860f, inv_std = 1.0f / 0.3530f;
  for (size_t i = 0; i < im.pixels.size(); ++i) {
    float v = im.pixels[i] / 255.0f;
    x_[i] = normalize ? (v - mean) * inv_std : v;
  }
  labels_.resize(lab.size());
  for (size_t i = 0; i < lab.size(); ++i) {
    if (lab[i] > 9) fail("'%s': label %d at index %d is out of range [0, 10)", lp, int64_t(lab[i]), int64_t(i));
    labels_[i] = lab[i];
  }
}

const char* FashionMnist::class_name(int64_t label) {
  static const char* names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return label >= 0 && label < 10 ? names[label] : "?";
}

// ---- DataLoader ------------------------------------------------------------------------------

DataLoader::DataLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                       bool drop_last)
    : dataset_(&dataset), batch_size_(batch_size), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
  if (batch_size <= 0) fail("DataLoader: batch_size must be positive, got %d", batch_size);
  if (dataset.y_dtype() != kInt64 && dataset.y_dtype() != kFloat32)
    fail("DataLoader: targets must be int64 or float32, got %s", dtype_name(dataset.y_dtype()));
}

int64_t DataLoader::num_batches() const {
  const int64_t n = dataset_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

DataLoader::Iterator DataLoader::begin() {
  const int64_t n = dataset_->size();
  order_.resize(n);
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  if (shuffle_) {
    std::mt19937_64 rng(seed_ + uint64_t(next_epoch_));
    for (int64_t i = n - 1; i > 0; --i) {
      std::uniform_int_distribution<int64_t> pick(0, i);
      std::swap(order_[i], order_[pick(rng)]);
    }
  }
  ++next_epoch_;
  return Iterator(this, 0);
}

namespace {
void* aligned_buffer(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

Batch DataLoader::batch(int64_t b) const {
  if (order_.size() != size_t(dataset_->size()))
    fail("DataLoader::batch: no epoch started (iterate with range-for or call begin() first)");
  const int64_t nb = num_batches();
  if (b < 0 || b >= nb) fail("DataLoader::batch: batch %d out of range [0, %d)", b, nb);
  const int64_t start = b * batch_size_;
  const int64_t count = std::min(batch_size_, dataset_->size() - start);
  Shape xs = dataset_->x_shape(), ys = dataset_->y_shape();
  const int64_t dx = numel_of(xs), dy = numel_of(ys);
  const size_t ybytes = dataset_->y_dtype() == kInt64 ? sizeof(int64_t) : sizeof(float);
  auto* x = static_cast<float*>(aligned_buffer(count * dx * sizeof(float)));
  auto* y = static_cast<char*>(aligned_buffer(count * dy * ybytes));
  for (int64_t i = 0; i < count; ++i)
    dataset_->get(order_[start + i], x + i * dx, y + i * dy * ybytes);
  xs.insert(xs.begin(), count);
  ys.insert(ys.begin(), count);
  Batch out;
  out.x = from_blob(x, xs, kFloat32, [](void* p) { std::free(p); });
  out.y = from_blob(y, ys, dataset_->y_dtype(), [](void* p) { std::free(p); });
  return out;
}

Batch& DataLoader::Iterator::operator*() {
  if (!loaded_) {
    current_ = loader_->batch(batch_);
    loaded_ = true;
  }
  return current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++batch_;
  loaded_ = false;
  current_ = Batch();
  return *this;
}

}  // namespace sloth::data
