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

}  // namespace

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
