// Checkpoints: safetensors round trip, a file written byte by byte per the format, errors
// that leave the module unchanged, atomic writes, optimizer state and exact resume.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "sloth/sloth.h"

namespace {
using namespace sloth;
namespace fs = std::filesystem;

std::string tmp_dir() {
  const char* d = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(d ? d : "/tmp") + "/ckpt_" + std::to_string(::getpid());
  fs::create_directories(dir);
  return dir;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), bytes.size());
}

std::vector<std::vector<float>> values(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

// The reference layout: u64 header length, JSON header, raw little-endian data.
std::string make_file(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}
template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(Checkpoint, RoundTrip) {
  const std::string path = tmp_dir() + "/mlp.safetensors";
  manual_seed(1);
  nn::MLP a({6, 5, 3});
  nn::save(a, path, {{"epoch", "7"}});
  manual_seed(2);
  nn::MLP b({6, 5, 3});
  ASSERT_NE(values(a), values(b));
  Tensor w_before = b.parameters()[0];
  nn::Metadata meta = nn::load(b, path);
  EXPECT_EQ(values(a), values(b));
  EXPECT_EQ(meta.at("epoch"), "7");
  // The same leaves, still requiring grad.
  EXPECT_EQ(b.parameters()[0].impl().get(), w_before.impl().get());
  EXPECT_TRUE(b.parameters()[0].requires_grad());
  EXPECT_TRUE(b.parameters()[0].is_leaf());
  // No temporary file left behind.
  for (auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Checkpoint, WrittenFileFollowsTheLayout) {
  const std::string path = tmp_dir() + "/lin.safetensors";
  nn::Linear lin(3, 2);
  {
    NoGradGuard g;
    lin->weight.copy_(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
    lin->bias.copy_(tensor({-1, 0.5}));
  }
  nn::save(lin, path);
  std::string bytes = read_all(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 32);
  std::string header = bytes.substr(8, n);
  EXPECT_NE(header.find("\"weight\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[2,3]}"),
            std::string::npos) << header;
  EXPECT_NE(header.find("\"bias\":{\"data_offsets\":[24,32],\"dtype\":\"F32\",\"shape\":[2]}"),
            std::string::npos) << header;
  EXPECT_EQ(bytes.substr(8 + n), raw<float>({1, 2, 3, 4, 5, 6, -1, 0.5}));
}

TEST(Checkpoint, LoadsAFileWrittenByHand) {
  const std::string path = tmp_dir() + "/hand.safetensors";
  // Keys in any order, data in any order, metadata, whitespace: as Python's safetensors allows.
  std::string header =
      "{\"__metadata__\": {\"format\": \"pt\"}, "
      "\"bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
      "\"weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [8, 32]}}";
  write_all(path, make_file(header, raw<float>({0.5f, -0.25f, 1, 2, 3, 4, 5, 6})));
  nn::Linear lin(3, 2);
  nn::Metadata meta = nn::load(lin, path);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(lin->weight.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(lin->bias.to_vector<float>(), (std::vector<float>{0.5f, -0.25f}));
  // Forward uses the loaded values.
  EXPECT_EQ(lin.forward(tensor({1, 1, 1}, {1, 3})).to_vector<float>(),
            (std::vector<float>{6.5f, 14.75f}));
}

TEST(Checkpoint, AllDtypesRoundTrip) {
  const std::string path = tmp_dir() + "/dtypes.safetensors";
  nn::NamedTensors t = {
      {"f64", tensor({1.5, -2.25}, {2}, TensorOptions(kFloat64))},
      {"i64", from_vector<int64_t>({1, -2, 1LL << 40}, {3})},
      {"i32", from_vector<int32_t>({7, -8, 9, 10}, {2, 2})},
      {"b", from_vector<bool>({true, false, true}, {3})},
      {"scalar", tensor(3.5)},
  };
  nn::save_safetensors(t, path, {{"k", "v"}});
  nn::SafetensorsFile f = nn::load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.find("f64")->to_vector<double>(), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(f.find("i64")->to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 1LL << 40}));
  EXPECT_EQ(f.find("i32")->shape(), (Shape{2, 2}));
  EXPECT_EQ(f.find("i32")->to_vector<int32_t>(), (std::vector<int32_t>{7, -8, 9, 10}));
  EXPECT_EQ(f.find("b")->dtype(), kBool);
  EXPECT_EQ(f.find("b")->to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f.find("scalar")->shape(), Shape{});
  EXPECT_EQ(f.find("scalar")->item(), 3.5);
  EXPECT_EQ(f.metadata.at("k"), "v");
}

// Every bad file throws an Error whose message contains `needle`; the module stays unchanged.
void expect_rejected(const std::string& bytes, const std::string& needle) {
  static int counter = 0;
  const std::string path = tmp_dir() + "/bad" + std::to_string(counter++) + ".safetensors";
  write_all(path, bytes);
  manual_seed(5);
  nn::Linear lin(3, 2);
  auto before = values(lin);
  const int64_t version = lin->weight.version();
  try {
    nn::load(lin, path);
    ADD_FAILURE() << "loading did not throw; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_EQ(values(lin), before);
  EXPECT_EQ(lin->weight.version(), version);   // not even written with equal values
}

std::string good_header(const std::string& wdtype = "F32", const std::string& wshape = "[2, 3]",
                        const std::string& wname = "weight") {
  return "{\"" + wname + "\": {\"dtype\": \"" + wdtype + "\", \"shape\": " + wshape +
         ", \"data_offsets\": [0, 24]}, "
         "\"bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]}}";
}
const std::string kData = raw<float>({1, 2, 3, 4, 5, 6, 7, 8});

TEST(Checkpoint, MismatchesAndCorruptFilesThrowAndLeaveModuleUnchanged) {
  // Sanity: the good file loads.
  {
    const std::string path = tmp_dir() + "/good.safetensors";
    write_all(path, make_file(good_header(), kData));
    nn::Linear lin(3, 2);
    nn::load(lin, path);
    EXPECT_EQ(lin->bias.to_vector<float>(), (std::vector<float>{7, 8}));
  }
  // Wrong name: the module's "weight" is missing and "kernel" is unexpected.
  expect_rejected(make_file(good_header("F32", "[2, 3]", "kernel"), kData), "missing tensor 'weight'");
  // Wrong shape (same byte count).
  expect_rejected(make_file(good_header("F32", "[3, 2]"), kData),
                  "tensor 'weight' has shape [3, 2] in the file but the module's parameter has "
                  "shape [2, 3]");
  // Wrong dtype (I32 has the same size as F32).
  expect_rejected(make_file(good_header("I32"), kData),
                  "tensor 'weight' has dtype I32 in the file but the module's parameter has dtype F32");
  // Unknown dtype.
  expect_rejected(make_file(good_header("F16"), kData), "tensor 'weight': unsupported dtype");
  // An extra tensor.
  {
    std::string h = "{\"weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}, "
                    "\"bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]}, "
                    "\"extra\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [32, 36]}}";
    expect_rejected(make_file(h, kData + raw<float>({9})), "unexpected tensor 'extra'");
  }
  // Truncated data.
  expect_rejected(make_file(good_header(), kData).substr(0, 8 + good_header().size() + 20),
                  "tensor 'bias': data_offsets [24,32] reach past the end of the data (20 bytes)");
  // Truncated header / header length beyond the file.
  expect_rejected(make_file(good_header(), kData).substr(0, 40), "header length");
  expect_rejected(std::string("\x05\x00\x00", 3), "truncated");
  // Corrupt JSON.
  {
    std::string h = good_header();
    h[10] = '#';
    expect_rejected(make_file(h, kData), "invalid JSON");
  }
  // Offsets that do not match the shape.
  {
    std::string h = "{\"weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}, "
                    "\"bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]}}";
    expect_rejected(make_file(h, kData), "tensor 'weight': data_offsets [0,20] span 20 bytes");
  }
  // Overlapping tensors.
  {
    std::string h = "{\"weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}, "
                    "\"bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [16, 24]}}";
    expect_rejected(make_file(h, kData), "overlap");
  }
  // A missing file.
  manual_seed(5);
  nn::Linear lin(3, 2);
  EXPECT_THROW(nn::load(lin, tmp_dir() + "/does_not_exist.safetensors"), Error);
}

TEST(Checkpoint, FailedSaveKeepsThePreviousFile) {
  const std::string path = tmp_dir() + "/keep.safetensors";
  nn::Linear lin(3, 2);
  nn::save(lin, path);
  const std::string before = read_all(path);
  // A tensor that cannot be saved: the error comes before the file is touched.
  EXPECT_THROW(nn::save_safetensors({{"a", ones({2})}, {"a", ones({2})}}, path), Error);
  EXPECT_THROW(nn::save_safetensors({{"a", Tensor()}}, path), Error);
  EXPECT_EQ(read_all(path), before);
  // Saving into a missing directory fails cleanly.
  EXPECT_THROW(nn::save(lin, tmp_dir() + "/no/such/dir/x.safetensors"), Error);
}

// ---- optimizer state and resume ----

struct TrainRun {
  nn::MLP model{{5, 8, 3}};
  optim::AdamW opt{model.parameters(), {.lr = 0.02, .weight_decay = 0.1}};
};

Tensor batch_x(int step) {
  std::vector<float> v(16 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * i + step);
  return from_vector<float>(v, {16, 5});
}
Tensor batch_y(int step) {
  std::vector<int64_t> v(16);
  for (int i = 0; i < 16; ++i) v[i] = (i * 7 + step) % 3;
  return from_vector<int64_t>(v, {16});
}

double train_step(TrainRun& r, int step) {
  r.opt.zero_grad();
  Tensor loss = cross_entropy(r.model.forward(batch_x(step)), batch_y(step));
  loss.backward();
  r.opt.step();
  mark_step();
  return loss.item();
}

TEST(Checkpoint, ResumeGivesTheSameNextLoss) {
  const std::string dir = tmp_dir();
  // Uninterrupted: 6 steps.
  manual_seed(11);
  TrainRun a;
  std::vector<double> losses;
  for (int s = 0; s < 6; ++s) {
    losses.push_back(train_step(a, s));
    if (s == 2) {
      nn::save(a.model, dir + "/run.safetensors");
      a.opt.save(dir + "/run.optim.safetensors");
    }
  }
  // Interrupted after 3 steps: a fresh process (other seed) loads and continues.
  manual_seed(99);
  TrainRun b;
  nn::load(b.model, dir + "/run.safetensors");
  b.opt.load(dir + "/run.optim.safetensors");
  EXPECT_EQ(b.opt.step_count(), 3);
  EXPECT_DOUBLE_EQ(b.opt.lr(), 0.02);
  for (int s = 3; s < 6; ++s) EXPECT_NEAR(train_step(b, s), losses[s], 1e-6 * std::abs(losses[s])) << s;
  // And the parameters agree at the end.
  auto va = values(a.model), vb = values(b.model);
  for (size_t i = 0; i < va.size(); ++i)
    for (size_t j = 0; j < va[i].size(); ++j) EXPECT_NEAR(va[i][j], vb[i][j], 1e-6);
}

TEST(Checkpoint, OptimizerStateFileIsValidated) {
  const std::string dir = tmp_dir();
  manual_seed(3);
  TrainRun a;
  train_step(a, 0);
  a.opt.save(dir + "/a.optim");
  nn::SafetensorsFile f = nn::load_safetensors(dir + "/a.optim");
  EXPECT_NE(f.find("0.exp_avg"), nullptr);
  EXPECT_NE(f.find("3.exp_avg_sq"), nullptr);
  EXPECT_EQ(f.find("step")->to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(f.metadata.at("optimizer"), "AdamW");
  // Into an optimizer over differently shaped parameters: an error naming the tensor.
  nn::MLP other({5, 9, 3});
  optim::AdamW opt2(other.parameters());
  try {
    opt2.load(dir + "/a.optim");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'0.exp_avg'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(opt2.step_count(), 0);
  // Into another optimizer kind.
  nn::MLP same({5, 8, 3});
  optim::SGD sgd(same.parameters(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW(sgd.load(dir + "/a.optim"), Error);
}

}  // namespace

// ---- buffers in checkpoints (nn) ----
namespace {
std::shared_ptr<nn::Sequential> bn_net() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4),
                                          std::make_shared<nn::BatchNorm1d>(4),
                                          std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(4, 2));
}
std::vector<std::vector<double>> state_values(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (auto& [n, t] : nn::state_dict(m)) out.push_back(t.to(DType::kFloat64).to_vector<double>());
  return out;
}
}  // namespace

TEST(CheckpointBuffers, RunningStatisticsRoundTripWithPyTorchNames) {
  const std::string path = tmp_dir() + "/bn.safetensors";
  manual_seed(1);
  auto net = bn_net();
  for (int i = 0; i < 2; ++i) net->forward(randn({8, 3}));  // two training steps
  nn::save(*net, path);
  // The file holds PyTorch's state_dict names and order, num_batches_tracked as I64.
  nn::SafetensorsFile f = nn::load_safetensors(path);
  std::vector<std::string> names;
  for (auto& [n, t] : f.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                             "1.running_mean", "1.running_var",
                                             "1.num_batches_tracked", "3.weight", "3.bias"}));
  EXPECT_EQ(f.find("1.num_batches_tracked")->dtype(), DType::kInt64);
  EXPECT_EQ(f.find("1.num_batches_tracked")->item<int64_t>(), 2);

  manual_seed(2);
  auto fresh = bn_net();
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm1dImpl>((*fresh)[1]);
  Tensor& rm_ref = bn->running_mean;
  nn::load(*fresh, path);
  EXPECT_EQ(state_values(*fresh), state_values(*net));
  EXPECT_EQ(&rm_ref, &bn->running_mean) << "buffers keep their slots";
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  net->eval();
  fresh->eval();
  Tensor x = randn({5, 3});
  EXPECT_EQ(net->forward(x).to_vector<float>(), fresh->forward(x).to_vector<float>());
  // Training continues from the loaded count.
  fresh->train();
  fresh->forward(randn({4, 3}));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 3);
}

TEST(CheckpointBuffers, MismatchedBuffersThrowAndLeaveTheModuleUnchanged) {
  const std::string dir = tmp_dir();
  // A checkpoint of parameters only (as written before buffers existed) loads into a module
  // without buffers, and is rejected by one with buffers, naming the missing buffer.
  manual_seed(3);
  nn::MLP mlp({3, 4, 2});
  nn::save(mlp, dir + "/mlp.safetensors");
  nn::MLP mlp2({3, 4, 2});
  nn::load(mlp2, dir + "/mlp.safetensors");
  EXPECT_EQ(values(mlp2), values(mlp));

  nn::Sequential lin_only(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Linear>(4, 4),
                          std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2));
  nn::save(lin_only, dir + "/params_only.safetensors");
  manual_seed(4);
  auto net = bn_net();
  net->forward(randn({6, 3}));
  const auto before = state_values(*net);
  auto expect_rejected_with = [&](const std::string& file, const std::string& needle) {
    try {
      nn::load(*net, file);
      ADD_FAILURE() << "loaded " << file;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(state_values(*net), before);
  };
  // lin_only's "1.weight" is [4, 4] while the BatchNorm's is [4]: the shape is named first.
  expect_rejected_with(dir + "/params_only.safetensors", "tensor '1.weight' has shape [4, 4]");
  {
    nn::NamedTensors t = nn::state_dict(*net);
    t.erase(t.begin() + 4);  // 1.running_mean
    nn::save_safetensors(t, dir + "/no_rm.safetensors");
    expect_rejected_with(dir + "/no_rm.safetensors",
                         "missing tensor '1.running_mean' (the module's buffer of shape [4])");
  }
  {
    nn::NamedTensors t = nn::state_dict(*net);
    t[6].second = zeros({}, TensorOptions(DType::kFloat32));  // num_batches_tracked as F32
    nn::save_safetensors(t, dir + "/nbt_f32.safetensors");
    expect_rejected_with(dir + "/nbt_f32.safetensors",
                         "tensor '1.num_batches_tracked' has dtype F32 in the file but the "
                         "module's buffer has dtype I64");
  }
  {
    nn::NamedTensors t = nn::state_dict(*net);
    t.emplace_back("1.extra_stat", zeros({4}));
    nn::save_safetensors(t, dir + "/extra.safetensors");
    expect_rejected_with(dir + "/extra.safetensors", "unexpected tensor '1.extra_stat'");
  }
}

namespace {

// LibTorch's spellings: torch::save(model, path) / torch::load(model, path) for a holder or a
// shared_ptr, an optimizer, a tensor and a vector of tensors.
TEST(CheckpointLibTorchSpelling, SaveAndLoadModelsOptimizersAndTensors) {
  const std::string dir = tmp_dir();
  manual_seed(4);
  nn::Sequential a(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  nn::Sequential b(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  sloth::save(a, dir + "/model.pt");
  ASSERT_NE(values(*a), values(*b));
  sloth::load(b, dir + "/model.pt");
  EXPECT_EQ(values(*a), values(*b));

  auto shared = std::make_shared<nn::LinearImpl>(2, 2);
  auto other = std::make_shared<nn::LinearImpl>(2, 2);
  sloth::save(shared, dir + "/lin.pt");
  sloth::load(other, dir + "/lin.pt");
  EXPECT_EQ(values(*shared), values(*other));

  optim::SGD opt(a->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  a->forward(ones({1, 3})).sum().backward();
  opt.step();
  sloth::save(opt, dir + "/opt.pt");
  optim::SGD opt2(b->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  sloth::load(opt2, dir + "/opt.pt");

  const Tensor t = tensor({1.5, -2.0, 3.25}, {3}, kFloat64);
  sloth::save(t, dir + "/t.pt");
  Tensor u;
  sloth::load(u, dir + "/t.pt");
  EXPECT_EQ(u.dtype(), kFloat64);
  EXPECT_EQ(u.to_vector<double>(), (std::vector<double>{1.5, -2.0, 3.25}));
  sloth::save(std::vector<Tensor>{t, ones({2, 2})}, dir + "/ts.pt");
  std::vector<Tensor> ts;
  sloth::load(ts, dir + "/ts.pt");
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(ts[0].to_vector<double>(), (std::vector<double>{1.5, -2.0, 3.25}));
  // A model's file is not a tensor file, and two tensors do not load into one.
  Tensor one;
  EXPECT_THROW(sloth::load(one, dir + "/model.pt"), Error);
  EXPECT_THROW(sloth::load(one, dir + "/ts.pt"), Error);
  EXPECT_FALSE(one.defined());
}

}  // namespace
