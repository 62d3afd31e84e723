// A compute unit's wakes (hw/chip/compute_unit.h) and the time conversions the models make at each of them
// (hw/chip/sim_time.h), against hand counts on one HBM channel of 1 byte/ns with no latency, refresh or turnarounds
// (a 1024 B load holds it 1024 ns) and a 1 GHz clock.
#include <gtest/gtest.h>

#include <random>
#include <systemc>

#include "hw/chip/action_queue.h"
#include "hw/chip/compute_unit.h"
#include "hw/chip/hbm.h"
#include "hw/chip/sim_time.h"
#include "tests/model/one_channel_hbm.h"

using namespace podsim;

namespace {

constexpr double kNs = 1e-9;

// One VPU on the one-channel HBM, recording when its job ends.
struct Bench : test::OneChannelBench<Bench> {
  using OneChannelBench::OneChannelBench;
  double end = -1;
  ComputeUnit vpu{"vpu", ComputeUnit::Kind::Vpu, 0, 1 * kNs, hbm, log,
                  [this](int32_t, double, double e, int64_t) { end = e; }};
};

// One VPU of load depth `depth` on the one-channel HBM with 2000 ns of latency per access (the channel is held
// 1 ns per byte; the latency follows the data and does not hold it).
struct LatencyBench : sc_core::sc_module {
  SC_HAS_PROCESS(LatencyBench);
  static HbmConfig slow_hbm() {
    HbmConfig c = test::one_channel_hbm();
    c.latency = 2000 * kNs;
    return c;
  }
  StallInjector stalls{0, 0, 1};
  ChipLog log;
  Hbm hbm{"hbm", slow_hbm(), 1e-9, stalls, log};
  double end = -1;
  ComputeUnit vpu;
  LatencyBench(sc_core::sc_module_name n, int depth)
      : sc_module(n), vpu("vpu", ComputeUnit::Kind::Vpu, 0, 1 * kNs, hbm, log,
                          [this](int32_t, double, double e, int64_t) { end = e; }, depth) {
    SC_METHOD(go);
  }
  void go() {
    UnitJob job;
    job.op = 0;
    job.cycles = 40;
    job.groups = 4;
    job.read = 4096;
    vpu.submit(job);
  }
};

// hardware.chip.load_depth: 4 groups of 1024 B loads (1024 ns on the channel, in 1024 + 2000 ns) and 10 cycles of
// adds each (LatencyBench). Without the depth every group would wait for a load issued when the one before was in.
double load_bound_end(int depth) {
  LatencyBench b("b", depth);
  sc_core::sc_start();
  EXPECT_DOUBLE_EQ(b.log.hbm_read, 4096);
  EXPECT_NEAR(b.log.vpu_busy / kNs, 40, 1e-6);
  return b.end / kNs;
}

}  // namespace

TEST(ComputeUnitTest, LoadDepthOnePaysTheLatencyOncePerGroup) {
  // One load in flight, issued when the one before is in: each group waits 1024 + 2000 = 3024 ns, so the last
  // group's adds begin at 4 x 3024 = 12096 and end at 12106.
  EXPECT_NEAR(load_bound_end(1), 12106, 1e-6);
}

TEST(ComputeUnitTest, LoadDepthTwoOverlapsTwoLoadsLatencies) {
  // Loads 0 and 1 at 0 (channel 0-1024 and 1024-2048: in at 3024 and 4048); load 2 when load 0 is in (channel
  // 3024-4048, in at 6048), load 3 when load 1 is (4048-5072, in at 7072); the last adds end at 7082.
  EXPECT_NEAR(load_bound_end(2), 7082, 1e-6);
}

TEST(ComputeUnitTest, LoadDepthFourIssuesEveryLoadAtOnce) {
  // All four loads at 0, back to back on the channel: the last is in at 4096 + 2000 = 6096, the job ends at 6106
  // (the latency paid once).
  EXPECT_NEAR(load_bound_end(4), 6106, 1e-6);
}

TEST(ComputeUnitTest, MemoryBoundJobWakesForEachLoadItIssuesAndAtItsEnd) {
  // 4 groups of 1024 B loads and 10 cycles of adds each: the loads run back to back (group g + 1's is issued when
  // group g's is in, at 1024 (g + 1) ns), each group's adds take 10 ns of the next load's 1024, and the last
  // group's adds end the job at 4096 + 10 ns. The unit wakes when its job is submitted, when loads 0, 1 and 2 are
  // in (to issue the next), and at the end: 5 wakes. When the last load is in it has nothing to issue, so it does
  // not wake for it.
  uint64_t wakes = 0;
  Bench b("b", [&](Bench& b) {
    UnitJob job;
    job.op = 0;
    job.cycles = 40;
    job.groups = 4;
    job.read = 4096;
    wakes = g_model_activations;
    b.vpu.submit(job);
  });
  sc_core::sc_start();
  wakes = g_model_activations - wakes;
  EXPECT_NEAR(b.end / kNs, 4106, 1e-6);
  EXPECT_EQ(wakes, 5u);
  EXPECT_DOUBLE_EQ(b.log.hbm_read, 4096);
  EXPECT_NEAR(b.log.vpu_busy / kNs, 40, 1e-6);
}

TEST(SimTimeTest, SecondsConvertAsTheLibraryDoes) {
  // at_seconds() and sim_now() avoid calls into the SystemC library; they must give its values exactly, rounding
  // included, or a model's times would move.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mantissa(1.0, 10.0);
  std::uniform_int_distribution<int> exponent(-13, 1);
  for (int i = 0; i < 200000; ++i) {
    const double s = mantissa(rng) * std::pow(10.0, exponent(rng));
    ASSERT_EQ(at_seconds(s).value(), sc_core::sc_time(s, sc_core::SC_SEC).value()) << s;
  }
  for (double half : {0.5e-12, 1.5e-12, 2.5e-12, 1e-6 + 0.5e-12, 3.0000000000005e-3})
    EXPECT_EQ(at_seconds(half).value(), sc_core::sc_time(half, sc_core::SC_SEC).value()) << half;
  EXPECT_EQ(at_seconds(0).value(), 0u);
  std::vector<uint64_t> seen;
  Bench b("b", [&](Bench& b) {
    ActionQueue q;
    for (double t : {3.0, 1.5, 1000.25})
      q.schedule(at_seconds(t * kNs), [&seen] {
        EXPECT_EQ(sim_now(), sc_core::sc_time_stamp());
        seen.push_back(sim_now().value());
      });
  });
  sc_core::sc_start();
  EXPECT_EQ(seen, (std::vector<uint64_t>{1500, 3000, 1000250}));
}
