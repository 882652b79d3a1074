// The profiler: the Chrome trace file it writes (read back and checked event by event), the
// summary table, SLOTH_PROFILE, and its errors.
#include "sloth/profiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/cpu/thread_pool.h"
#include "sloth/sloth.h"

namespace {

using json = nlohmann::json;
using sloth::Tensor;

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(dir ? dir : "/tmp") / name).string();
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::vector<json> events_of(const json& doc, const std::string& cat) {
  std::vector<json> out;
  for (const json& e : doc.at("traceEvents"))
    if (e.value("cat", "") == cat) out.push_back(e);
  return out;
}

// y = relu(a @ b - 1) summed; a = 2, b = 0.5: every output is 2 * 0.5 * 32 - 1 = 31.
double small_step() {
  Tensor a = sloth::full({64, 32}, 2.0), b = sloth::full({32, 16}, 0.5);
  sloth::sync({a, b});
  Tensor y = sloth::relu(sloth::matmul(a, b) - 1.0);
  return sloth::sum(y).item<double>();
}

TEST(Profiler, TraceFileHoldsPhasesAndKernelsWithTheirCosts) {
  const std::string path = temp_path("profile_basic.json");
  sloth::profiler::start(path);
  EXPECT_TRUE(sloth::profiler::running());
  EXPECT_DOUBLE_EQ(small_step(), 64.0 * 16.0 * 31.0);
  sloth::profiler::stop();
  EXPECT_FALSE(sloth::profiler::running());

  const json doc = read_json(path);
  ASSERT_TRUE(doc.at("traceEvents").is_array());
  // Thread names: the thread that started the session is "main".
  bool main_named = false;
  for (const json& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name") == "main")
      main_named = true;
  EXPECT_TRUE(main_named);

  // Phases: each sync has a trace, a plan and an execute phase, in that order.
  std::vector<json> phases = events_of(doc, "phase");
  int trace = 0, plan = 0, execute = 0;
  double last_plan_end = -1;
  for (const json& e : phases) {
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    const std::string name = e.at("name");
    if (name == "trace") ++trace;
    if (name == "plan") {
      ++plan;
      last_plan_end = e.at("ts").get<double>() + e.at("dur").get<double>();
      EXPECT_NE(e.at("args").at("detail").get<std::string>().find("plan cache"), std::string::npos);
    }
    if (name == "execute") {
      ++execute;
      EXPECT_GE(e.at("ts").get<double>() + 1e-3, last_plan_end);
    }
  }
  EXPECT_EQ(trace, 2);  // sync({a, b}) and item()
  EXPECT_EQ(plan, 2);
  EXPECT_EQ(execute, 2);

  // The GEMM kernel: 2*m*n*k FLOPs, its operands and output in bytes, its shape and dtype.
  std::vector<json> kernels = events_of(doc, "kernel");
  const json* mm = nullptr;
  for (const json& e : kernels)
    if (e.at("name").get<std::string>().find("matmul") != std::string::npos) mm = &e;
  ASSERT_NE(mm, nullptr);
  const json& args = mm->at("args");
  EXPECT_GE(args.at("flops").get<double>(), 2.0 * 64 * 16 * 32);
  EXPECT_LE(args.at("flops").get<double>(), 2.0 * 64 * 16 * 32 + 2 * 64 * 16);  // + a fused epilogue
  EXPECT_EQ(args.at("dtype"), "float32");
  EXPECT_GE(args.at("bytes").get<int64_t>(), (64 * 32 + 32 * 16 + 64 * 16) * 4);
  EXPECT_NE(args.at("shapes").get<std::string>().find("[64, 16]"), std::string::npos);
  EXPECT_GT(args.at("GFLOP/s").get<double>(), 0.0);
  // Every kernel ran inside an execute phase.
  for (const json& k : kernels) {
    const double t0 = k.at("ts"), t1 = t0 + k.at("dur").get<double>();
    bool inside = false;
    for (const json& p : phases)
      if (p.at("name") == "execute" && p.at("ts").get<double>() <= t0 + 1e-3 &&
          t1 <= p.at("ts").get<double>() + p.at("dur").get<double>() + 1e-3)
        inside = true;
    EXPECT_TRUE(inside) << k.dump();
  }
}

TEST(Profiler, WorkersRecordTheirShareOfAKernel) {
  if (sloth::cpu::num_threads() < 2) GTEST_SKIP() << "one CPU thread: no pool workers";
  const std::string path = temp_path("profile_workers.json");
  // On a loaded machine the calling thread can run every chunk before a worker wakes up:
  // a few tries, each on a fresh graph, until a worker took a share.
  json doc;
  std::vector<json> tasks;
  for (int attempt = 0; attempt < 8 && tasks.empty(); ++attempt) {
    sloth::profiler::start(path);
    Tensor x = sloth::full({1 << 22}, 1.0 + attempt);
    const double s = sloth::sum(sloth::exp(x * 0.0)).item<double>();
    sloth::profiler::stop();
    EXPECT_DOUBLE_EQ(s, static_cast<double>(1 << 22));
    doc = read_json(path);
    tasks = events_of(doc, "task");
  }
  ASSERT_FALSE(tasks.empty()) << "no worker ran a share of the kernel in 8 tries";
  int64_t main_tid = -1;
  for (const json& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("args").at("name") == "main") main_tid = e.at("tid");
  for (const json& t : tasks) EXPECT_NE(t.at("tid").get<int64_t>(), main_tid);
}

TEST(Profiler, SummaryListsTheKernelsAndThePeaks) {
  const std::string path = temp_path("profile_summary.json");
  sloth::profiler::start(path);
  small_step();
  const std::string live = sloth::profiler::summary();  // of the running session
  sloth::profiler::stop();
  const std::string s = sloth::profiler::summary();
  for (const std::string& t : {live, s}) {
    EXPECT_NE(t.find("matmul"), std::string::npos) << t;
    EXPECT_NE(t.find("GFLOP/s"), std::string::npos) << t;
    EXPECT_NE(t.find("execute"), std::string::npos) << t;
  }
  const sloth::profiler::Peaks p = sloth::profiler::machine_peaks();
  EXPECT_GT(p.gemm_gflops, 1.0);
  EXPECT_GT(p.triad_gbps, 0.1);
  // At most `top` kernel rows.
  const std::string one = sloth::profiler::summary(1);
  const size_t header = one.find("\nkernel ");
  ASSERT_NE(header, std::string::npos);
  const std::string rows = one.substr(one.find('\n', header + 1) + 1);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 1) << one;
}

TEST(Profiler, BadCallsThrowAndChangeNothing) {
  EXPECT_THROW(
      {
        try {
          sloth::profiler::stop();
        } catch (const sloth::Error& e) {
          EXPECT_NE(std::string(e.what()).find("profiler::start"), std::string::npos);
          throw;
        }
      },
      sloth::Error);
  EXPECT_THROW(sloth::profiler::start("/nonexistent-dir/sub/trace.json"), sloth::Error);
  EXPECT_FALSE(sloth::profiler::running());

  const std::string first = temp_path("profile_first.json"), second = temp_path("profile_second.json");
  std::filesystem::remove(second);
  sloth::profiler::start(first);
  try {
    sloth::profiler::start(second);
    ADD_FAILURE() << "a second start() must throw";
  } catch (const sloth::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(sloth::profiler::running());  // the first session goes on
  EXPECT_FALSE(std::filesystem::exists(second));
  small_step();
  sloth::profiler::stop();
  EXPECT_FALSE(events_of(read_json(first), "kernel").empty());
}

// SLOTH_PROFILE=path: this test runs itself in a child process with the variable set; the
// child's trace is written when it exits.
TEST(Profiler, SlothProfileWritesTheWholeProgramAtExit) {
  if (std::getenv("SLOTH_PROFILER_TEST_CHILD") != nullptr) {
    EXPECT_DOUBLE_EQ(small_step(), 64.0 * 16.0 * 31.0);
    return;
  }
  const std::string path = temp_path("profile_env.json");
  std::filesystem::remove(path);
  const std::string cmd = "SLOTH_PROFILE=" + path + " SLOTH_PROFILER_TEST_CHILD=1 " +
                          std::filesystem::read_symlink("/proc/self/exe").string() +
                          " --gtest_filter=Profiler.SlothProfileWritesTheWholeProgramAtExit"
                          " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ASSERT_TRUE(std::filesystem::exists(path));
  const json doc = read_json(path);
  EXPECT_FALSE(events_of(doc, "kernel").empty());
  EXPECT_FALSE(events_of(doc, "phase").empty());
}

}  // namespace
