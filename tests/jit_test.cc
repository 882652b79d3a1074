// Run-time compiled fused kernels (backends/cpu/jit.h): every op form the code generator
// prints, every dtype, broadcast/strided/converted operands, scalars, fused reductions and
// in-place donation, each compared bit for bit with the tile interpreter running the same
// cached plan, plus the compiler driver (disk cache, errors).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/jit.h"
#include "core/settings.h"
#include "gtest/gtest.h"
#include "sloth/dispatch.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

namespace jit = cpu::jit;

// The cache goes to this test's private directory (set before the first use reads it).
const std::string kCacheDir = [] {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d = std::string(t ? t : "/tmp") + "/jit_cache";
  settings_for_test().jit_dir = d;
  return d;
}();

Tensor data(Shape shape, double lo = -2, double hi = 2) {
  Tensor t = rand(shape) * (hi - lo) + lo;
  sync({t});
  return t;
}

// Every output's elements as double (exact for all dtypes used), in order.
std::vector<std::vector<double>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ts) v.push_back(t.to(kFloat64).to_vector<double>());
  return v;
}

// Builds the program twice over the same inputs: interpreted, then compiled (same cached
// plan, so the same tile program), and checks the compiled code ran and agreed bit for bit.
void expect_same(const std::function<std::vector<Tensor>()>& build) {
  jit::set_mode(jit::Mode::kOff);
  std::vector<Tensor> a = build();
  sync(a);
  auto want = values(a);
  jit::set_mode(jit::Mode::kSync);
  const int64_t runs0 = jit::stats().compiled_runs;
  std::vector<Tensor> b = build();
  sync(b);
  auto got = values(b);
  jit::set_mode(jit::Mode::kOff);
  EXPECT_GT(jit::stats().compiled_runs, runs0) << "no compiled kernel ran";
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].size(), got[o].size());
    for (size_t i = 0; i < want[o].size(); ++i) {
      // Bitwise, NaN included.
      if (std::memcmp(&want[o][i], &got[o][i], sizeof(double)) != 0) {
        ADD_FAILURE() << "output " << o << " element " << i << ": interpreter " << want[o][i]
                      << ", compiled " << got[o][i];
        return;
      }
    }
  }
}

// Every unary op of the table (but Cast, which the integer and cast tests cover), on values
// of both signs and on positive values (inside the domain of log, sqrt, ...).
TEST(Jit, EveryUnaryOpFloat32) {
  Tensor x = data({3000}, -6, 6);
  Tensor p = data({3000}, 0.1, 3);
  expect_same([&] {
    std::vector<Tensor> out;
    for (int i = 0; i < kNumOps; ++i) {
      const OpId op = static_cast<OpId>(i);
      if (op_info(op).category != OpCategory::Unary || op == OpId::kCast) continue;
      out.push_back(call_op(op, {x}));
      out.push_back(call_op(op, {p}));
    }
    Tensor s = out[1].to(kFloat32);
    for (size_t i = 3; i < out.size(); i += 2) s = s + out[i];  // one fused kernel, many stores
    out.push_back(s);
    return out;
  });
}

TEST(Jit, BinaryComparisonAndTernaryOpsFloat64) {
  Tensor a = data({41, 77}).to(kFloat64), b = data({41, 77}).to(kFloat64);
  sync({a, b});
  expect_same([&] {
    Tensor m = a > b;
    return std::vector<Tensor>{a + b,          a - b,           a * b,  a / b,
                               pow(abs(a) + 0.5, b), maximum(a, b), minimum(a, b),
                               where(m, a, b), clamp(a, -0.5, 0.75), (a == a).to(kFloat64),
                               (a != b).to(kInt64), a <= b, a >= b, a < b,
                               logical_and(m, a < 0.3), logical_or(m, logical_not(a < 0.3))};
  });
}

TEST(Jit, IntegerDtypesAndCasts) {
  Tensor i = randint(-50, 50, {999}, kInt64);
  Tensor j = randint(1, 9, {999}, kInt32);
  Tensor f = data({999});
  sync({i, j, f});
  expect_same([&] {
    return std::vector<Tensor>{i + j,       i * j,   i - j,        i / j,   pow(j, j.to(kInt32)),
                               maximum(i, j), abs(i), -j,          sign(i), i > j,
                               f + j,        (f * 10).to(kInt32) * j, logical_or(j.to(kBool), i > 0)};
  });
}

// Integer overflow wraps (two's complement), as in PyTorch: int32 2^30 * 4 == 0,
// INT32_MAX + 1 == INT32_MIN, -INT32_MIN == INT32_MIN, int64 3 ** 40 == -6289078614652622815.
TEST(Jit, IntegerOverflowWrapsAsPyTorch) {
  Tensor a = tensor({1073741824.0, 2147483647.0, -2147483648.0}, {3}, kInt32);
  Tensor b = tensor({3.0, 3.0}, {2}, kInt64), e = tensor({40.0, 39.0}, {2}, kInt64);
  sync({a, b, e});
  auto run = [&] {
    return std::vector<Tensor>{a * tensor(4.0, kInt32), a + tensor(1.0, kInt32), -a, pow(b, e)};
  };
  expect_same(run);
  jit::set_mode(jit::Mode::kOff);
  std::vector<Tensor> r = run();
  EXPECT_EQ(r[0].to_vector<int32_t>(), (std::vector<int32_t>{0, -4, 0}));
  EXPECT_EQ(r[1].to_vector<int32_t>(), (std::vector<int32_t>{1073741825, INT32_MIN, -2147483647}));
  EXPECT_EQ(r[2].to_vector<int32_t>(), (std::vector<int32_t>{-1073741824, -2147483647, INT32_MIN}));
  EXPECT_EQ(r[3].to_vector<int64_t>(), (std::vector<int64_t>{-6289078614652622815LL, 4052555153018976267LL}));
}

TEST(Jit, BroadcastStridedAndScalarOperands) {
  Tensor a = data({64, 48}), row = data({48}), col = data({64, 1}), w = data({48, 64});
  expect_same([&] {
    Tensor y = relu(a * row + col) * w.t() - a / 2.0;  // w.t(): strided in place
    return std::vector<Tensor>{y, exp(y * 0.25) - 1.0, 3.0 - y};
  });
}

// Operands repeating along the loop (a bias broadcast over rows) whose period divides the
// tile: the compiled loop loads them once per chunk when the chunk starts at a multiple of
// the period. Rows of 16..256 over many tiles with a partial last one, a 3-D loop (coalesced
// to rows), and loops split over threads at chunk starts on and off a row boundary; rows of
// 48 (not a divisor of the tile) keep the per-tile load.
TEST(Jit, RowBroadcastOperandsLoadedOncePerChunk) {
  for (int64_t cols : {16, 48, 64, 256}) {
    Tensor a = data({37, cols}), bias = data({cols}), c = data({37, 1});
    expect_same([&] {
      Tensor y = relu(a + bias) * bias - c;
      return std::vector<Tensor>{y, y * bias + 1.0};
    });
    // And against the float64 reference, element by element.
    jit::set_mode(jit::Mode::kSync);
    Tensor y = relu(a + bias) * bias - c;
    sync({y});
    jit::set_mode(jit::Mode::kOff);
    const auto va = a.to_vector<float>(), vb = bias.to_vector<float>(), vc = c.to_vector<float>();
    const auto vy = y.to_vector<float>();
    for (int64_t i = 0; i < 37 * cols; ++i) {
      const double want = std::max<double>(double(va[i]) + vb[i % cols], 0.0) * vb[i % cols] - vc[i / cols];
      ASSERT_NEAR(vy[i], want, 1e-5) << cols << " columns, element " << i;
    }
  }
  Tensor x3 = data({5, 7, 32}), b3 = data({32});
  expect_same([&] { return std::vector<Tensor>{x3 * b3 + b3}; });
  for (int64_t rows : {300, 257}) {  // >= 32K elements: split over the pool
    Tensor big = data({rows, 128}), bb = data({128});
    expect_same([&] { return std::vector<Tensor>{big * bb - bb / 3.0}; });
  }
}

// ---- replay: one-element operands ----
// A 0-dim float64 tensor (an optimizer's learning rate) broadcast over a float32 loop of many
// tiles, and a [1, 1] one: the compiled loop reads them from a register filled once per chunk.
TEST(Jit, OneElementOperandsOverManyTiles) {
  Tensor p = data({96, 80}), g = data({96, 80}), lr = tensor(0.125, kFloat64), s = data({1, 1});
  sync({lr});
  expect_same([&] {
    Tensor q = p - g * lr;
    return std::vector<Tensor>{q, q * s + lr};
  });
}

TEST(Jit, FusedReductionPrologue) {
  Tensor x = data({128, 300});
  expect_same([&] {
    Tensor m = amax(x, {1}, true);
    Tensor e = exp(x - m);
    return std::vector<Tensor>{sum(e, {1}), sum(x * x), amin(x + 1.0, {1}), prod(x * 0.01 + 1.0, {1})};
  });
}

TEST(Jit, LargeRunsSplitOverThreadsAndStream) {
  // Over the parallel threshold and the streaming-store size: chunks on both threads.
  Tensor a = data({1 << 22}), b = data({1 << 22}), c = data({1 << 22});
  expect_same([&] {
    Tensor y = a;
    for (int k = 0; k < 16; ++k) y = k % 3 == 0 ? y + b : k % 3 == 1 ? y * c : y * 0.5;
    return std::vector<Tensor>{y};
  });
}

TEST(Jit, InPlaceUpdateRunsCompiled) {
  // w.sub_(lr * g) under no_grad (a donated buffer: the update is written over w), compiled.
  Tensor w = data({5000}), g = data({5000});
  std::vector<float> w0 = w.to_vector<float>(), g0 = g.to_vector<float>();
  jit::set_mode(jit::Mode::kSync);
  const int64_t runs0 = jit::stats().compiled_runs;
  {
    NoGradGuard ng;
    w.sub_(g * 0.1);
    sync({w});
  }
  jit::set_mode(jit::Mode::kOff);
  EXPECT_GT(jit::stats().compiled_runs, runs0);
  std::vector<float> w1 = w.to_vector<float>();
  for (size_t i = 0; i < w0.size(); ++i) {
    volatile float step = g0[i] * static_cast<float>(0.1);  // rounded, as sloth rounds it
    ASSERT_EQ(w1[i], w0[i] - step) << i;
  }
}

// A plan run again with the same layouts runs frozen (backends/cpu/frozen_run.h), and a
// compiled program there is called directly (compiled_call.h): operands read in place in one
// call; a 0-dim tensor broadcast over the loop (a learning rate held as data) and a bias
// repeating along rows filled once, then tile by tile. 41 x 64 elements: five whole tiles of
// 512 and a partial one. Bit for bit the interpreter's values, frozen or not.
TEST(Jit, FrozenRunsCallCompiledLoopsDirectly) {
  Tensor w = data({41, 64}), g = data({41, 64}), bias = data({64}), lr = data({}, 0.01, 0.1);
  auto step = [&] {
    std::vector<Tensor> out = {w - lr * g, relu(g + bias) * 0.5, w * g + 1.25};
    sync(out);
    return values(out);
  };
  jit::set_mode(jit::Mode::kOff);
  const auto want = step();
  jit::set_mode(jit::Mode::kSync);
  const jit::Stats s0 = jit::stats();
  const int64_t frozen0 = metrics().frozen_runs;
  std::vector<std::vector<std::vector<double>>> got;
  for (int i = 0; i < 4; ++i) got.push_back(step());
  jit::set_mode(jit::Mode::kOff);
  EXPECT_GE(metrics().frozen_runs - frozen0, 2);
  // The last two runs are frozen: each calls its compiled loops directly.
  EXPECT_GE(jit::stats().direct_calls - s0.direct_calls, 2);
  auto expect_bitwise = [](const auto& got, const auto& want) {
    for (const auto& run : got) {
      ASSERT_EQ(run.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        ASSERT_EQ(run[o].size(), want[o].size());
        for (size_t i = 0; i < want[o].size(); ++i)
          ASSERT_EQ(std::memcmp(&run[o][i], &want[o][i], sizeof(double)), 0)
              << "output " << o << " element " << i << ": " << run[o][i] << " vs " << want[o][i];
      }
    }
  };
  expect_bitwise(got, want);
  // A new learning rate (written in place, as a schedule under sloth::jit does): the direct
  // call loads the broadcast element again rather than reusing the last run's fill.
  lr.fill_(0.0625);
  sync({lr});
  const auto want2 = step();
  ASSERT_NE(want2[0], want[0]);
  jit::set_mode(jit::Mode::kSync);
  const int64_t direct1 = jit::stats().direct_calls;
  got.clear();
  for (int i = 0; i < 3; ++i) got.push_back(step());
  jit::set_mode(jit::Mode::kOff);
  EXPECT_GE(jit::stats().direct_calls - direct1, 2);
  expect_bitwise(got, want2);
}

TEST(Jit, SpecialValuesMatch) {
  std::vector<double> v = {0.0, -0.0, 1e-45, -1e-45, 1e38, -1e38, INFINITY, -INFINITY, NAN,
                           88.7, 88.8, 89, -103, -104, -105, 0.5, -0.5, 1.5, 2.5};
  Tensor x = tensor(v);
  sync({x});
  expect_same([&] {
    return std::vector<Tensor>{exp(x), relu(x), sign(x), round(x), sigmoid(x), tanh(x),
                               maximum(x, x * 0.5), clamp(x, -1, 1), x / 0.0};
  });
}

TEST(Jit, CompilerDriverCachesOnDisk) {
  const std::string src = "extern \"C\" int sloth_jit_test_answer() { return 42; }\n";
  const jit::Stats s0 = jit::stats();
  absl::StatusOr<void*> f = jit::load(src, "sloth_jit_test_answer");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(reinterpret_cast<int (*)()>(*f)(), 42);
  const jit::Stats s1 = jit::stats();
  EXPECT_EQ(s1.compiled + s1.disk_hits, s0.compiled + s0.disk_hits + 1);
  // The object and its source sit in the cache directory; loading again compiles nothing.
  int so_files = 0;
  std::string ls = kCacheDir;
  for (const char* ext : {".so", ".cc"}) {
    std::string cmd = "ls " + ls + "/*" + ext + " > /dev/null 2>&1";
    so_files += std::system(cmd.c_str()) == 0;
  }
  EXPECT_EQ(so_files, 2);
  absl::StatusOr<void*> again = jit::load(src, "sloth_jit_test_answer");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *f);
  EXPECT_EQ(jit::stats().compiled, s1.compiled);
}

TEST(Jit, CompileErrorsAreReportedNotFatal) {
  const int64_t failed0 = jit::stats().failed;
  absl::StatusOr<void*> f = jit::load("this is not C++;\n", "nothing");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(f.status().message()).find("failed"), std::string::npos) << f.status();
  EXPECT_NE(std::string(f.status().message()).find("error"), std::string::npos) << f.status();
  EXPECT_EQ(jit::stats().failed, failed0 + 1);
  absl::StatusOr<void*> g = jit::load("extern \"C\" void present() {}\n", "absent");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("absent"), std::string::npos);
}

TEST(Jit, HotKernelsCompileInTheBackground) {
  // Default mode: a kernel is compiled after it ran twice with enough work, without blocking
  // the run that asked; the next runs use the compiled code.
  Tensor a = data({1 << 18}), b = data({1 << 18});
  jit::set_mode(jit::Mode::kOn);
  const int64_t runs0 = jit::stats().compiled_runs;
  auto step = [&] {
    Tensor y = (a * b + 1.5) * a - b / 3.0;
    sync({y});
    return y;
  };
  Tensor y1 = step();
  Tensor y2 = step();  // asks for the compile
  jit::wait_idle();
  Tensor y3 = step();
  jit::set_mode(jit::Mode::kOff);
  EXPECT_GT(jit::stats().compiled_runs, runs0);
  EXPECT_EQ(y1.to_vector<float>(), y3.to_vector<float>());
}

}  // namespace
}  // namespace sloth

namespace sloth {
namespace {

// amax/amin's vector paths (minmax.h): standalone reductions and fused prologues, float and
// double, NaN in the vector body and in the scalar tail, infinities, against a scalar loop.
TEST(CpuMinMax, VectorPathsMatchScalarLoopAndPropagateNaN) {
  for (DType dt : {kFloat32, kFloat64}) {
    const int64_t rows = 6, cols = 300;  // 300 = 9 full 32-float blocks + a tail
    std::vector<double> v(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) v[i] = std::sin(0.37 * i) * 10;
    v[1 * cols + 257] = NAN;                   // vector body
    v[2 * cols + 299] = NAN;                   // tail
    v[3 * cols + 5] = INFINITY;
    for (int64_t j = 0; j < cols; ++j) v[4 * cols + j] = -INFINITY;
    v[5 * cols + 17] = -0.0;
    Tensor x = tensor(v, {rows, cols}, dt);
    std::vector<double> mx = amax(x, {1}).to(kFloat64).to_vector<double>();
    std::vector<double> mn = amin(x, {1}).to(kFloat64).to_vector<double>();
    std::vector<double> fused = amax(x * 2.0, {1}).to(kFloat64).to_vector<double>();
    for (int64_t r = 0; r < rows; ++r) {
      double a = -INFINITY, b = INFINITY;
      bool nan = false;
      for (int64_t j = 0; j < cols; ++j) {
        double e = v[r * cols + j];
        if (dt == kFloat32) e = static_cast<float>(e);
        nan = nan || std::isnan(e);
        a = std::max(a, e), b = std::min(b, e);
      }
      if (nan) {
        EXPECT_TRUE(std::isnan(mx[r])) << r;
        EXPECT_TRUE(std::isnan(mn[r])) << r;
        EXPECT_TRUE(std::isnan(fused[r])) << r;
      } else {
        EXPECT_EQ(mx[r], a) << r;
        EXPECT_EQ(mn[r], b) << r;
        EXPECT_EQ(fused[r], 2 * a) << r;
      }
    }
    EXPECT_TRUE(std::isnan(amax(x).item()));
    EXPECT_EQ(amax(x.narrow(0, 3, 3)).item(), INFINITY);
    EXPECT_EQ(amin(x.narrow(0, 3, 3)).item(), -INFINITY);
  }
}

}  // namespace
}  // namespace sloth
