// LibTorch's data pipeline (nn/data_pipeline.h): datasets::MNIST on IDX files written here
// (plain and gzip), map(Normalize)/map(Stack), samplers, make_data_loader with workers.
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace {

using namespace sloth;

void put_be32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s.push_back(char((v >> (8 * k)) & 0xff));
}

void write_file(const std::string& path, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_TRUE(f != nullptr);
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }
}

uint8_t pixel(int64_t img, int64_t p) { return uint8_t((img * 31 + p * 7) % 256); }
int64_t label(int64_t img) { return (img * 3) % 10; }

// Writes prefix-images-idx3-ubyte[.gz] and prefix-labels-idx1-ubyte[.gz] with n images.
void write_idx(const std::string& dir, const std::string& prefix, int64_t n, bool gz) {
  std::string im, lb;
  put_be32(im, 2051);
  put_be32(im, uint32_t(n));
  put_be32(im, 28);
  put_be32(im, 28);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < 784; ++p) im.push_back(char(pixel(i, p)));
  put_be32(lb, 2049);
  put_be32(lb, uint32_t(n));
  for (int64_t i = 0; i < n; ++i) lb.push_back(char(label(i)));
  const std::string ext = gz ? ".gz" : "";
  write_file(dir + "/" + prefix + "-images-idx3-ubyte" + ext, im, gz);
  write_file(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, lb, gz);
}

std::string make_root() {
  static std::string root = [] {
    std::string r = ::testing::TempDir() + "/mnist_idx";
    std::string cmd = "mkdir -p " + r;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    write_idx(r, "train", 10, /*gz=*/false);
    write_idx(r, "t10k", 6, /*gz=*/true);
    return r;
  }();
  return root;
}

TEST(DataPipeline, MnistReadsPlainAndGzipIdx) {
  data::datasets::MNIST train(make_root(), data::datasets::MNIST::Mode::kTrain);
  data::datasets::MNIST test(make_root(), data::datasets::MNIST::Mode::kTest);
  EXPECT_TRUE(train.is_train());
  EXPECT_FALSE(test.is_train());
  ASSERT_EQ(train.size().value(), 10u);
  ASSERT_EQ(test.size().value(), 6u);
  EXPECT_EQ(train.images().shape(), (Shape{10, 1, 28, 28}));
  EXPECT_EQ(test.targets().dtype(), kLong);
  auto e = test.get(4);
  EXPECT_EQ(e.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.target.item<int64_t>(), label(4));
  auto v = e.data.to_vector<float>();
  for (int64_t p : {0, 1, 100, 783}) EXPECT_FLOAT_EQ(v[p], float(pixel(4, p)) / 255.0f);
  // A missing root names both file spellings.
  try {
    data::datasets::MNIST bad("/nonexistent/mnist");
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("train-images-idx3-ubyte.gz"), std::string::npos);
  }
  EXPECT_THROW(train.get(10), Error);
}

TEST(DataPipeline, NormalizeStackSequentialLoader) {
  auto ds = data::datasets::MNIST(make_root())
                .map(data::transforms::Normalize<>(0.5, 0.25))
                .map(data::transforms::Stack<>());
  EXPECT_EQ(ds.size().value(), 10u);
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      std::move(ds), data::DataLoaderOptions().batch_size(4));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> sizes;
    int64_t first = 0;
    for (auto& batch : *loader) {
      const int64_t b = batch.data.size(0);
      sizes.push_back(b);
      EXPECT_EQ(batch.data.shape(), (Shape{b, 1, 28, 28}));
      EXPECT_EQ(batch.target.shape(), (Shape{b}));
      auto x = batch.data.to_vector<float>();
      auto y = batch.target.to_vector<int64_t>();
      for (int64_t i = 0; i < b; ++i) {
        EXPECT_EQ(y[i], label(first + i));
        EXPECT_NEAR(x[i * 784 + 5], (pixel(first + i, 5) / 255.0 - 0.5) / 0.25, 1e-5);
      }
      first += b;
    }
    EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  }
}

// Collects the index order a loader visits (targets of a dataset whose target is the index).
struct IndexDataset : data::datasets::Dataset<IndexDataset> {
  explicit IndexDataset(size_t n, std::atomic<int>* calls = nullptr, int64_t throw_at = -1)
      : n(n), calls(calls), throw_at(throw_at) {}
  data::Example<> get(size_t i) override {
    if (calls) ++*calls;
    if (int64_t(i) == throw_at) throw Error("IndexDataset: bad sample " + std::to_string(i));
    // Lazy ops recorded on a worker thread while the consumer records and syncs its own.
    Tensor x = sloth::full({3}, double(i)) * 2.0 + 1.0;
    return {x, sloth::tensor(std::vector<double>{double(i)}, Shape{}, TensorOptions().dtype(kLong))};
  }
  std::optional<size_t> size() const override { return n; }
  size_t n;
  std::atomic<int>* calls;
  int64_t throw_at;
};

std::vector<int64_t> visit(data::DataLoaderOptions o, bool random, int epochs = 1) {
  std::vector<int64_t> order;
  auto run = [&](auto& loader) {
    for (int e = 0; e < epochs; ++e)
      for (auto& batch : *loader) {
        // The consumer's own step, recorded and synced while workers record the next batches.
        Tensor s = (batch.data - 1.0) / 2.0;
        Tensor step = (s * s).sum();
        sloth::mark_step();
        auto t = batch.target.template to_vector<int64_t>();
        auto v = s.template to_vector<float>();
        double expect = 0;
        for (size_t i = 0; i < t.size(); ++i) {
          EXPECT_FLOAT_EQ(v[i * 3], float(t[i]));
          expect += 3.0 * double(t[i]) * double(t[i]);
        }
        EXPECT_NEAR(step.item(), expect, 1e-3 * (1 + expect));
        order.insert(order.end(), t.begin(), t.end());
      }
  };
  auto ds = IndexDataset(23).map(data::transforms::Stack<>());
  if (random) {
    auto l = data::make_data_loader<data::samplers::RandomSampler>(std::move(ds), o);
    run(l);
  } else {
    auto l = data::make_data_loader<data::samplers::SequentialSampler>(std::move(ds), o);
    run(l);
  }
  return order;
}

TEST(DataPipeline, WorkersGiveTheSameBatchesInOrder) {
  auto seq0 = visit(data::DataLoaderOptions().batch_size(5), false);
  auto seq2 = visit(data::DataLoaderOptions().batch_size(5).workers(2), false);
  std::vector<int64_t> expect(23);
  for (int i = 0; i < 23; ++i) expect[i] = i;
  EXPECT_EQ(seq0, expect);
  EXPECT_EQ(seq2, expect);
  auto r0 = visit(data::DataLoaderOptions().batch_size(4), true, 2);
  auto r3 = visit(data::DataLoaderOptions().batch_size(4).workers(3).max_jobs(5), true, 2);
  EXPECT_EQ(r0, r3);
  ASSERT_EQ(r0.size(), 46u);
  // Each epoch is a permutation, and the two epochs differ.
  std::vector<int64_t> e1(r0.begin(), r0.begin() + 23), e2(r0.begin() + 23, r0.end());
  EXPECT_EQ(std::set<int64_t>(e1.begin(), e1.end()).size(), 23u);
  EXPECT_EQ(std::set<int64_t>(e2.begin(), e2.end()).size(), 23u);
  EXPECT_NE(e1, e2);
  EXPECT_NE(e1, expect);
  // drop_last drops the short last batch.
  auto d = visit(data::DataLoaderOptions().batch_size(5).workers(2).drop_last(true), false);
  EXPECT_EQ(d.size(), 20u);
}

TEST(DataPipeline, WorkersPrefetchABoundedNumberOfBatches) {
  std::atomic<int> calls{0};
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      IndexDataset(40, &calls).map(data::transforms::Stack<>()),
      data::DataLoaderOptions().batch_size(2).workers(2).max_jobs(3));
  auto it = loader->begin();
  EXPECT_EQ((*it).target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  // While the consumer holds batch 0, the workers build the next max_jobs batches and stop.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls.load() < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls.load(), 8);  // batch 0 and the three requested after it, 2 samples each
  ++it;
  EXPECT_EQ((*it).target.to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  // Destroying the loader mid-epoch joins its workers.
  loader.reset();
}

TEST(DataPipeline, WorkerExceptionIsRethrownAtItsBatch) {
  for (size_t workers : {0, 2}) {
    auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
        IndexDataset(12, nullptr, /*throw_at=*/7).map(data::transforms::Stack<>()),
        data::DataLoaderOptions().batch_size(3).workers(workers));
    std::vector<int64_t> seen;
    try {
      for (auto& batch : *loader) {
        auto t = batch.target.to_vector<int64_t>();
        seen.insert(seen.end(), t.begin(), t.end());
      }
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad sample 7"), std::string::npos);
    }
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    // A new epoch starts cleanly after the error.
    int batches = 0;
    try {
      for (auto& batch : *loader) { (void)batch; ++batches; }
    } catch (const Error&) {}
    EXPECT_EQ(batches, 2);
  }
}

TEST(DataPipeline, DistributedSamplerSharesTheEpoch) {
  std::vector<int64_t> all;
  for (int rank = 0; rank < 2; ++rank) {
    auto loader = data::make_data_loader(
        IndexDataset(10).map(data::transforms::Stack<>()),
        data::samplers::DistributedSampler(10, /*num_replicas=*/2, rank),
        data::DataLoaderOptions().batch_size(2).workers(1));
    int64_t n = 0;
    for (auto& batch : *loader) {
      auto t = batch.target.to_vector<int64_t>();
      n += int64_t(t.size());
      all.insert(all.end(), t.begin(), t.end());
    }
    EXPECT_EQ(n, 5);
  }
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 10u);
}

TEST(DataPipeline, LambdaAndPerChannelNormalize) {
  struct Img : data::datasets::Dataset<Img> {
    data::Example<> get(size_t i) override {
      return {sloth::full({2, 1, 2}, double(i + 1)), sloth::zeros({1}, kLong)};
    }
    std::optional<size_t> size() const override { return 2; }
  };
  auto ds = Img()
                .map(data::transforms::Normalize<>({1.0, 2.0}, {0.5, 4.0}))
                .map(data::transforms::TensorLambda<>([](Tensor x) { return x * 10.0; }))
                .map(data::transforms::Stack<>());
  auto b = ds.get_batch({1});
  EXPECT_EQ(b.data.shape(), (Shape{1, 2, 1, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{20, 20, 0, 0}));
  EXPECT_THROW(data::transforms::Normalize<>({1.0, 2.0}, {1.0}), Error);
}

// TORCH_MODULE is SLOTH_MODULE.
struct TinyImpl : nn::Module {
  TinyImpl() { fc = register_module("fc", nn::Linear(2, 1)); }
  Tensor forward(Tensor x) { return fc(x); }
  nn::Linear fc{nullptr};
};
TORCH_MODULE(Tiny);

TEST(DataPipeline, TorchModuleSpelling) {
  Tiny t;
  EXPECT_EQ(t(sloth::ones({3, 2})).shape(), (Shape{3, 1}));
  EXPECT_EQ(t->parameters().size(), 2u);
}

}  // namespace

namespace {
// from_blob memory belongs to the caller: a kernel never writes its result there, even when
// the blob tensor is dropped before the sync (it used to be donated as the output buffer).
TEST(DataPipeline, FromBlobMemoryIsNeverDonated) {
  std::vector<float> buf = {1, 2, 3, 4};
  sloth::Tensor y;
  {
    sloth::Tensor x = sloth::from_blob(buf.data(), {4}, sloth::kFloat);
    y = (x - 1.0) * 3.0;
  }
  sloth::mark_step();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 3, 6, 9}));
  EXPECT_EQ(buf, (std::vector<float>{1, 2, 3, 4}));
}
}  // namespace

namespace {
// LibTorch runs `from_blob(p, ...).clone()` at once: the clone owns its values when the line
// ends, so the memory may be refilled or freed. sloth gives the recorded clone a copy when
// the last tensor over the memory goes (lazy/borrowed_memory.h).
TEST(DataPipeline, FromBlobCloneOwnsItsValuesOnceTheBlobTensorIsGone) {
  std::vector<int64_t> buf = {3, 1, 4};
  sloth::Tensor c = sloth::from_blob(buf.data(), {3}, sloth::kInt64).clone();
  sloth::Tensor y;
  {
    sloth::Tensor x = sloth::from_blob(buf.data(), {3}, sloth::kInt64);
    y = x * 10;
  }
  buf.assign(3, -7);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{30, 10, 40}));
}

// In-place writes to a from_blob tensor reach the caller's memory, as in LibTorch: at the
// next sync, and, for a tensor that goes with a write not yet run (a temporary, the idiom
// that exports a result), when it goes.
TEST(DataPipeline, FromBlobWritesReachTheMemory) {
  std::vector<float> buf = {1, 2, 3, 4};
  sloth::Tensor t = sloth::from_blob(buf.data(), {2, 2}, sloth::kFloat);
  t.add_(1);
  EXPECT_EQ(buf, (std::vector<float>{1, 2, 3, 4}));  // lazy: not yet run
  sloth::mark_step();
  EXPECT_EQ(buf, (std::vector<float>{2, 3, 4, 5}));
  t[1].fill_(9);  // through a view
  EXPECT_FLOAT_EQ(t.sum().item<float>(), 23.0f);
  EXPECT_EQ(buf, (std::vector<float>{2, 3, 9, 9}));
  buf[0] = 7;  // shared both ways while the tensor lives
  EXPECT_FLOAT_EQ(t[0][0].item<float>(), 7.0f);

  std::vector<float> out(3, 0);
  sloth::Tensor r = sloth::tensor({1.0, 2.0, 3.0}) * 2;
  sloth::from_blob(out.data(), {3}, sloth::kFloat).copy_(r);
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6}));

  // A write whose run fails when the tensor goes (an index out of range, found by the
  // kernel) cannot throw from the destructor: it is reported, and the memory is unchanged.
  sloth::Tensor bad = sloth::zeros({3}).index_select(0, sloth::tensor({7.0}).to(sloth::kLong));
  sloth::from_blob(out.data(), {1}, sloth::kFloat).copy_(bad);
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6}));
}
}  // namespace

namespace {
// kUInt8 / kByte image bytes: the custom-dataset example's from_blob. A real uint8 tensor
// sharing the bytes, as in LibTorch: a change to them while the tensor lives is seen; once the
// tensors over them are gone, recorded ops keep the values they had (the example's buffers die
// when its loading function returns, before the step reads them).
TEST(DataPipeline, FromBlobBytes) {
  std::vector<uint8_t> r = {0, 128, 255, 9}, g = {1, 2, 3, 4};
  sloth::Tensor c;
  {
    auto R = sloth::from_blob(r.data(), {2, 2}, sloth::kUInt8);
    auto G = sloth::from_blob(g.data(), {2, 2}, sloth::kByte);
    EXPECT_EQ(R.dtype(), sloth::kUInt8);
    EXPECT_EQ(G.dtype(), sloth::kByte);
    r[3] = 7;  // shared: LibTorch's cat below reads 7
    c = sloth::cat({R, G});
  }
  r.assign(4, 99);  // R and G are gone: the recorded cat keeps its operands' values
  g.assign(4, 99);
  EXPECT_EQ(c.dtype(), sloth::kUInt8);
  EXPECT_EQ(c.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 128, 255, 7, 1, 2, 3, 4}));
  auto t = c.view({2, 2, 2}).to(sloth::kFloat) / 255.0;
  EXPECT_EQ(t.dtype(), sloth::kFloat);
  auto v = t.to_vector<float>();
  EXPECT_FLOAT_EQ(v[1], 128.0f / 255.0f);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
  EXPECT_FLOAT_EQ(v[7], 4.0f / 255.0f);
}
}  // namespace
