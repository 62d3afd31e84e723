// HBM occupancy model: achieved bandwidth by access pattern, queueing between requesters, latency.
#include <gtest/gtest.h>

#include "hw/timing/hbm_timing.h"

using namespace podsim;

namespace {

HbmConfig v3_hbm() {
  HbmConfig c;
  c.capacity = 32.0 * (1ull << 30);
  c.bandwidth = 900e9;
  c.channels = 32;
  c.latency = 500e-9;
  c.burst = 64;
  c.row = 1024;
  c.activate_interval = 5e-9;
  return c;
}

// Achieved bandwidth of `total` bytes in runs of `run` bytes, issued as one request, latency excluded.
double achieved(double total, double run) {
  HbmConfig c = v3_hbm();
  c.latency = 0;
  HbmTiming h(c);
  auto a = h.access(0, total, run);
  return total / a.done;
}

}  // namespace

TEST(HbmTimingTest, SequentialStreamRunsAtPeak) {
  double bw = achieved(64.0 * (1 << 20), 0);
  EXPECT_NEAR(bw, 900e9, 0.01 * 900e9);
}

TEST(HbmTimingTest, RandomSmallAccessesFarBelowPeak) {
  double seq = achieved(64.0 * (1 << 20), 0);
  double rnd64 = achieved(64.0 * (1 << 20), 64);
  double rnd8 = achieved(64.0 * (1 << 20), 8);
  // 64 B runs are activation-bound: 64 B per 5 ns per channel = 12.8 GB/s x 32 = 410 GB/s.
  EXPECT_NEAR(rnd64, 32 * 64 / 5e-9, 1e9);
  EXPECT_LT(rnd64, 0.5 * seq);
  // 8 B runs also waste most of each 64 B burst.
  EXPECT_NEAR(rnd8, 32 * 8 / 5e-9, 1e9);
  EXPECT_LT(rnd8, 0.1 * seq);
}

TEST(HbmTimingTest, RunsOfAFewRowsAreNearPeak) {
  EXPECT_GT(achieved(64.0 * (1 << 20), 8192), 0.95 * 900e9);
}

TEST(HbmTimingTest, LatencyAddsToCompletion) {
  HbmTiming h(v3_hbm());
  auto a = h.access(1e-6, 64, 0);
  // One row activation (5 ns) outlasts one 64 B burst (2.3 ns at 28 GB/s per channel).
  EXPECT_NEAR(a.done - 1e-6, 500e-9 + 5e-9, 1e-12);
}

TEST(HbmTimingTest, ConcurrentRequestersQueue) {
  HbmConfig c = v3_hbm();
  c.latency = 0;
  HbmTiming h(c);
  double bytes = 32.0 * (1 << 20);
  auto a = h.access(0, bytes, 0);
  auto b = h.access(0, bytes, 0);  // same instant: waits behind the first in every channel
  EXPECT_NEAR(b.done, 2 * a.done, 1e-12);
  EXPECT_NEAR(b.queue_wait, a.done, 1e-12);
  auto later = h.access(b.done + 1e-6, bytes, 0);  // after the queues drained: no wait
  EXPECT_EQ(later.queue_wait, 0);
}

TEST(HbmTimingTest, SmallRequestsSpreadOverChannels) {
  HbmConfig c = v3_hbm();
  c.latency = 0;
  HbmTiming h(c);
  // 32 one-row requests at the same time land on different channels, so none waits.
  double worst = 0;
  for (int i = 0; i < 32; ++i) worst = std::max(worst, h.access(0, 1024, 0).queue_wait);
  EXPECT_EQ(worst, 0);
}
