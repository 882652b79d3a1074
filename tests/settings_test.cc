// core/settings.h: every SLOTH_* variable is parsed in one place, with one default.
#include "core/settings.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace sloth {
namespace {

// First test of the binary: settings() reads the environment at its first call.
TEST(Settings, ReadsTheEnvironmentOnce) {
  ::setenv("SLOTH_FUSION", "0", 1);
  ::setenv("SLOTH_TILE", "1000", 1);  // not a power of two: the default stays
  ::setenv("SLOTH_JIT", "sync", 1);
  ::setenv("SLOTH_JIT_ISA", "avx2", 1);
  ::setenv("SLOTH_EW_ISA", "avx512", 1);
  ::setenv("SLOTH_NUM_THREADS", "3", 1);
  ::setenv("SLOTH_LOG", "plans,jit", 1);
  ::setenv("SLOTH_DIST_TIMEOUT", "2.5", 1);
  ::setenv("SLOTH_DIST_CHECK", "1", 1);
  ::setenv("SLOTH_DIST_MPI", "0", 1);
  const Settings& s = settings();
  EXPECT_EQ(s.dist_timeout_s, 2.5);
  EXPECT_TRUE(s.dist_check);
  EXPECT_FALSE(s.dist_mpi);
  EXPECT_FALSE(s.fusion);
  EXPECT_TRUE(s.row_groups);
  EXPECT_EQ(s.tile, 512);
  EXPECT_EQ(s.jit, Settings::Jit::kSync);
  EXPECT_EQ(s.jit_isa, Isa::kAvx2);
  EXPECT_EQ(s.ew_isa, Isa::kAvx512);
  EXPECT_EQ(s.num_threads, 3);
  EXPECT_TRUE(s.log_on("plans"));
  EXPECT_TRUE(s.log_on("jit"));
  EXPECT_FALSE(s.log_on("fusion"));
  ::setenv("SLOTH_FUSION", "1", 1);
  EXPECT_FALSE(settings().fusion);  // read once: later changes to the environment are not seen
}

TEST(Settings, Defaults) {
  const Settings s;
  EXPECT_TRUE(s.fusion);
  EXPECT_EQ(s.jit, Settings::Jit::kOn);
  EXPECT_EQ(s.jit_isa, Isa::kAvx512);
  EXPECT_EQ(s.ew_isa, Isa::kAvx2);
  EXPECT_FALSE(s.log_on("plans"));
  EXPECT_EQ(s.dist_timeout_s, 300);  // 5 minutes per collective
  EXPECT_FALSE(s.dist_check);
  EXPECT_FALSE(s.dist_mpi);
}

TEST(Settings, LogAllTurnsOnEveryTopic) {
  Settings s;
  s.log = "all";
  EXPECT_TRUE(s.log_on("fusion"));
  EXPECT_TRUE(s.log_on("jit"));
}

TEST(Settings, TestsCanOverride) {
  settings_for_test().fusion = true;
  EXPECT_TRUE(settings().fusion);
}

}  // namespace
}  // namespace sloth
