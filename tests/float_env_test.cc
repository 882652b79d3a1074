// set_flush_denormal (PyTorch's torch.set_flush_denormal): with the mode on, denormal results
// and operands of sloth's kernels are zero on every thread that runs them (the syncing thread,
// the CPU pool's workers), whichever thread turned it on; off gives IEEE results again.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <thread>
#include <vector>

#include "sloth/sloth.h"

namespace {
using namespace sloth;

class FlushDenormal : public ::testing::Test {
 protected:
  void TearDown() override { set_flush_denormal(false); }
};

// The comparisons are of bits: with the mode on, this thread's own float compares read
// denormals as zero too (DAZ), so `y == 0.0f` would hold for a denormal y.
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }

// 3 * 1e-40f, as IEEE arithmetic gives it (a denormal); called with the mode off.
float ieee_triple(float x) {
  volatile float v = x;
  return v * 3.0f;
}

TEST_F(FlushDenormal, OffKeepsDenormalsOnFlushesThem) {
  const float tiny = 1e-40f;  // below FLT_MIN (1.18e-38): a denormal
  ASSERT_TRUE(set_flush_denormal(false));
  EXPECT_FALSE(flush_denormal());
  const float want = ieee_triple(tiny);
  ASSERT_NE(bits(want), 0u);
  EXPECT_EQ(bits((tensor({tiny}) * 3).item<float>()), bits(want));

  ASSERT_TRUE(set_flush_denormal(true));
  EXPECT_TRUE(flush_denormal());
  EXPECT_EQ(bits((tensor({tiny}) * 3).item<float>()), 0u);
  // float64 denormals too (below 2.2e-308).
  EXPECT_EQ(bits((tensor({1e-310}, TensorOptions().dtype(kFloat64)) * 3).item<double>()), 0u);
  // Normal numbers are untouched.
  EXPECT_EQ(bits((tensor({1e-30f}) * 3).item<float>()), bits(ieee_triple(1e-30f)));

  ASSERT_TRUE(set_flush_denormal(false));
  EXPECT_EQ(bits((tensor({tiny}) * 3).item<float>()), bits(want));
}

TEST_F(FlushDenormal, PoolWorkersFlushToo) {
  // Rows enough that the CPU pool's workers take blocks of the kernel; they start (and run
  // once) with the mode off, so each must pick up the change itself.
  Tensor x = full({1024, 1024}, 1e-40f);
  mark_step();  // x holds denormals (made with the mode on, the fill itself would flush)
  auto count = [&](float v) {
    int64_t c = 0;
    for (float y : (x * 3).to_vector<float>()) c += bits(y) == bits(v);
    return c;
  };
  const float want = ieee_triple(1e-40f);
  ASSERT_EQ(count(want), x.numel());
  ASSERT_TRUE(set_flush_denormal(true));
  EXPECT_EQ(count(0.0f), x.numel());
  ASSERT_TRUE(set_flush_denormal(false));
  EXPECT_EQ(count(want), x.numel());
}

TEST_F(FlushDenormal, SetOnAnotherThreadAppliesToTheSyncingThread) {
  std::thread([] { set_flush_denormal(true); }).join();
  EXPECT_TRUE(flush_denormal());
  EXPECT_EQ(bits((tensor({1e-40f}) * 3).item<float>()), 0u);
  std::thread([] { set_flush_denormal(false); }).join();
  EXPECT_EQ(bits((tensor({1e-40f}) * 3).item<float>()), bits(ieee_triple(1e-40f)));
}

}  // namespace
