// data: IDX reader on small .gz files written here, Fashion-MNIST layout, DataLoader batching
// and deterministic shuffling.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(d ? d : "/tmp") + "/data_" + std::to_string(::getpid()) + "/" + name;
  fs::create_directories(dir);
  return dir;
}

void put_be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string idx_images(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t pixels) {
  std::string s;
  put_be32(s, magic);
  put_be32(s, n);
  put_be32(s, rows);
  put_be32(s, cols);
  for (size_t i = 0; i < pixels; ++i) s.push_back(char(i * 37 % 256));
  return s;
}
std::string idx_labels(uint32_t magic, uint32_t n, size_t count) {
  std::string s;
  put_be32(s, magic);
  put_be32(s, n);
  for (size_t i = 0; i < count; ++i) s.push_back(char(i % 10));
  return s;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message: " << e.what() << "\nexpected: " << n;
  }
}

TEST(Idx, ReadsImagesAndLabels) {
  const std::string dir = tmp_dir("idx");
  write_gz(dir + "/im.gz", idx_images(2051, 5, 2, 3, 30));
  write_gz(dir + "/lab.gz", idx_labels(2049, 5, 5));
  data::IdxImages im = data::read_idx_images(dir + "/im.gz");
  EXPECT_EQ(im.n, 5);
  EXPECT_EQ(im.rows, 2);
  EXPECT_EQ(im.cols, 3);
  ASSERT_EQ(im.pixels.size(), 30u);
  for (size_t i = 0; i < 30; ++i) EXPECT_EQ(im.pixels[i], uint8_t(i * 37 % 256));
  EXPECT_EQ(data::read_idx_labels(dir + "/lab.gz"), (std::vector<uint8_t>{0, 1, 2, 3, 4}));
}

TEST(Idx, BadFilesGiveClearErrors) {
  const std::string dir = tmp_dir("bad");
  write_gz(dir + "/magic.gz", idx_images(2052, 1, 2, 2, 4));
  expect_error([&] { data::read_idx_images(dir + "/magic.gz"); },
               {dir + "/magic.gz", "bad magic number 2052", "2051"});
  write_gz(dir + "/labels_as_images.gz", idx_labels(2049, 4, 4));
  expect_error([&] { data::read_idx_images(dir + "/labels_as_images.gz"); },
               {"labels_as_images.gz", "looks like a label file"});
  write_gz(dir + "/lmagic.gz", idx_images(2051, 1, 2, 2, 4));
  expect_error([&] { data::read_idx_labels(dir + "/lmagic.gz"); },
               {"lmagic.gz", "bad magic number 2051", "2049"});
  write_gz(dir + "/short.gz", idx_images(2051, 3, 2, 2, 10));
  expect_error([&] { data::read_idx_images(dir + "/short.gz"); },
               {"short.gz", "3 images of 2x2", "truncated"});
  write_gz(dir + "/long.gz", idx_labels(2049, 3, 5));
  expect_error([&] { data::read_idx_labels(dir + "/long.gz"); }, {"long.gz", "3 labels", "5 bytes"});
  write_gz(dir + "/tiny.gz", std::string("\0\0\x08", 3));
  expect_error([&] { data::read_idx_images(dir + "/tiny.gz"); }, {"tiny.gz", "header"});
  expect_error([&] { data::read_idx_images(dir + "/missing.gz"); }, {"missing.gz"});
  // A corrupt gzip stream (valid gzip header, garbage afterwards).
  {
    std::string gz;
    write_gz(dir + "/ok.gz", idx_images(2051, 10, 28, 28, 7840));
    FILE* f = fopen((dir + "/ok.gz").c_str(), "rb");
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    gz.assign(buf, n);
    for (size_t i = 20; i < gz.size(); ++i) gz[i] = char(gz[i] ^ 0x5a);
    FILE* g = fopen((dir + "/corrupt.gz").c_str(), "wb");
    fwrite(gz.data(), 1, gz.size(), g);
    fclose(g);
    expect_error([&] { data::read_idx_images(dir + "/corrupt.gz"); }, {"corrupt.gz"});
  }
}

TEST(FashionMnist, LoadsAFakeRoot) {
  const std::string dir = tmp_dir("fake");
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx_images(2051, 7, 28, 28, 7 * 784));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", idx_labels(2049, 7, 7));
  data::FashionMnist ds(dir, /*train=*/false);
  EXPECT_EQ(ds.size(), 7);
  EXPECT_EQ(ds.x_shape(), (Shape{784}));
  EXPECT_EQ(ds.y_dtype(), kInt64);
  Tensor x = ds.x_tensor(), y = ds.y_tensor();
  EXPECT_EQ(x.shape(), (Shape{7, 784}));
  EXPECT_EQ(x.dtype(), kFloat32);
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < xv.size(); i += 101) EXPECT_FLOAT_EQ(xv[i], float(i * 37 % 256) / 255.0f);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  // Normalized variant.
  data::FashionMnist dn(dir, false, /*normalize=*/true);
  EXPECT_NEAR(dn.x_data()[1], (37 / 255.0f - 0.2860f) / 0.3530f, 1e-5);
  // Train files are missing here: the error names the file.
  expect_error([&] { data::FashionMnist(dir, true); }, {"train-images-idx3-ubyte.gz"});
  // Label count mismatch.
  const std::string d2 = tmp_dir("fake2");
  write_gz(d2 + "/train-images-idx3-ubyte.gz", idx_images(2051, 3, 28, 28, 3 * 784));
  write_gz(d2 + "/train-labels-idx1-ubyte.gz", idx_labels(2049, 4, 4));
  expect_error([&] { data::FashionMnist(d2, true); }, {"3 images", "4 labels"});
  // Wrong image size.
  const std::string d3 = tmp_dir("fake3");
  write_gz(d3 + "/train-images-idx3-ubyte.gz", idx_images(2051, 2, 2, 2, 8));
  write_gz(d3 + "/train-labels-idx1-ubyte.gz", idx_labels(2049, 2, 2));
  expect_error([&] { data::FashionMnist(d3, true); }, {"28x28", "2x2"});
}

TEST(FashionMnist, RealDataset) {
  if (!fs::exists(std::string(data::FashionMnist::kDefaultRoot) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  data::FashionMnist test(data::FashionMnist::kDefaultRoot, false);
  EXPECT_EQ(test.size(), 10000);
  auto [lo, hi] = std::minmax_element(test.x_data().begin(), test.x_data().end());
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);
  std::vector<int> count(10, 0);
  for (int64_t l : test.labels()) ++count[l];
  for (int c : count) EXPECT_EQ(c, 1000);   // the test set is balanced
}

data::TensorDataset counting(int n) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int i = 0; i < n; ++i) {
    x.push_back(float(i));
    x.push_back(float(10 * i));
    y.push_back(i);
  }
  return data::TensorDataset(x, {2}, y);
}

TEST(DataLoader, BatchesInOrder) {
  auto ds = counting(10);
  data::DataLoader loader(ds, 4);
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<std::vector<int64_t>> ys;
  for (auto& b : loader) {
    EXPECT_EQ(b.x.dim(), 2);
    EXPECT_EQ(b.x.size(1), 2);
    auto xv = b.x.to_vector<float>();
    auto yv = b.y.to_vector<int64_t>();
    for (size_t i = 0; i < yv.size(); ++i) {
      EXPECT_EQ(xv[2 * i], float(yv[i]));
      EXPECT_EQ(xv[2 * i + 1], float(10 * yv[i]));
    }
    ys.push_back(yv);
  }
  EXPECT_EQ(ys, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  data::DataLoader dl(ds, 4, false, 0, /*drop_last=*/true);
  int n = 0;
  for (auto& b : dl) {
    EXPECT_EQ(b.y.size(0), 4);
    ++n;
  }
  EXPECT_EQ(n, 2);
  EXPECT_THROW(data::DataLoader(ds, 0), Error);
}

std::vector<int64_t> epoch_order(data::DataLoader& l) {
  std::vector<int64_t> out;
  for (auto& b : l)
    for (int64_t v : b.y.to_vector<int64_t>()) out.push_back(v);
  return out;
}

TEST(DataLoader, DeterministicShuffle) {
  auto ds = counting(50);
  data::DataLoader a(ds, 8, /*shuffle=*/true, /*seed=*/42);
  data::DataLoader b(ds, 8, true, 42);
  data::DataLoader c(ds, 8, true, 43);
  auto a0 = epoch_order(a), a1 = epoch_order(a);
  EXPECT_EQ(a0, epoch_order(b));
  EXPECT_EQ(a1, epoch_order(b));
  EXPECT_NE(a0, a1);                 // a new order each epoch
  EXPECT_NE(a0, epoch_order(c));     // and per seed
  std::vector<int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);   // a permutation
  // The documented algorithm: Fisher-Yates with std::mt19937_64(seed + epoch).
  std::vector<int64_t> want(50);
  for (int i = 0; i < 50; ++i) want[i] = i;
  std::mt19937_64 rng(42 + 1);
  for (int64_t i = 49; i > 0; --i) {
    std::uniform_int_distribution<int64_t> pick(0, i);
    std::swap(want[i], want[pick(rng)]);
  }
  EXPECT_EQ(a1, want);
  // Resuming at epoch 1 replays epoch 1's order.
  data::DataLoader r(ds, 8, true, 42);
  r.set_epoch(1);
  EXPECT_EQ(epoch_order(r), a1);
}

TEST(DataLoader, FloatTargets) {
  data::TensorDataset ds({1, 2, 3, 4, 5, 6}, {1}, std::vector<float>{10, 20, 30, 40, 50, 60}, {1});
  EXPECT_EQ(ds.size(), 6);
  data::DataLoader l(ds, 4);
  auto it = l.begin();
  EXPECT_EQ((*it).y.dtype(), kFloat32);
  EXPECT_EQ((*it).y.shape(), (Shape{4, 1}));
  EXPECT_EQ((*it).y.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
  EXPECT_EQ(ds.head(2).size(), 2);
}

}  // namespace
