// HBM flow model, each mechanism against a hand count: streams, the activate rate (tFAW, tRC/banks), bursts,
// refresh, read/write turnaround, latency to first data (tCL, tRCD), channel interleaving and queueing.
//
// The configuration is one HBM2 stack as the DRAM simulators' presets have it: 8 channels of 32 GB/s (2 ns per
// 64 B burst), 1 KiB rows, tFAW 30 ns, tRC 47 ns with 16 banks, tCL = tRCD = 14 ns, turnarounds 13 + 13 ns every 8
// writes, tREFI 3.9 us, tRFC 350 ns, and a 4 ns controller latency.
#include <gtest/gtest.h>

#include "hw/timing/hbm_timing.h"

using namespace podsim;

namespace {

constexpr double kNs = 1e-9;
constexpr double kMiB = 1 << 20;
constexpr double kStretch = 3900.0 / (3900.0 - 350.0);  // refresh: 350 ns lost of every 3.9 us

HbmConfig stack() {
  HbmConfig c;
  c.capacity = 8.0 * (1ull << 30);
  c.bandwidth = 256e9;
  c.channels = 8;
  c.latency = 4 * kNs;
  c.burst = 64;
  c.row = 1024;
  c.activate_interval = 5 * kNs;
  c.faw = 30 * kNs;
  c.banks = 16;
  c.row_cycle = 47 * kNs;
  c.rcd = 14 * kNs;
  c.cas = 14 * kNs;
  c.read_to_write = 13 * kNs;
  c.write_to_read = 13 * kNs;
  c.write_batch = 8;
  c.refresh_interval = 3900 * kNs;
  c.refresh_time = 350 * kNs;
  return c;
}

HbmRequest req(double bytes, HbmPattern p, double run = 0, bool write = false, bool mixed = false) {
  HbmRequest r;
  r.bytes = bytes;
  r.pattern = p;
  r.run = run;
  r.write = write;
  r.mixed = mixed;
  return r;
}

}  // namespace

TEST(HbmTimingTest, StreamIsDataBoundAndLosesOnlyRefresh) {
  HbmTiming h(stack());
  // 64 MiB over 8 channels: 8 MiB each, 8192 rows of 16 bursts of 2 ns; an activate per row (7.5 ns) hides.
  auto a = h.access(0, req(64 * kMiB, HbmPattern::Stream));
  double service = 8192 * 16 * 2 * kNs * kStretch;
  EXPECT_NEAR(a.done, service + 4 * kNs + 14 * kNs, 1e-12);  // a stream continues an open row: no tRCD
  EXPECT_NEAR(a.busy, 8 * service, 1e-12);
  EXPECT_NEAR(64 * kMiB / service / 256e9, 0.9103, 0.0001);  // 91 %: DRAMsim3 92 %, Ramulator 87 %
}

TEST(HbmTimingTest, RandomRequestsAreBoundByTheFourActivateWindow) {
  HbmTiming h(stack());
  // 1 Mi requests of 64 B, 131072 per channel, one activate each: tFAW / 4 = 7.5 ns apart (> tRRD 5 ns,
  // > tRC / banks = 2.9 ns). The last request's data follows its activate by one burst.
  auto a = h.access(0, req(64 * kMiB, HbmPattern::Gather, 64));
  double last = ((131072 - 1) * 7.5 * kNs + 2 * kNs) * kStretch;
  EXPECT_NEAR(a.done, last + 4 * kNs + 14 * kNs + 14 * kNs, 1e-12);  // a gather opens rows: tRCD
  EXPECT_NEAR(a.busy, 8 * 131072 * 7.5 * kNs * kStretch, 1e-12);
  double bw = 64 * kMiB / (131072 * 7.5 * kNs * kStretch);
  EXPECT_NEAR(bw / 256e9, 2.0 / 7.5 / kStretch, 1e-9);  // 24.3 %: DRAMsim3 24 %, Ramulator 28 %
}

TEST(HbmTimingTest, FewBanksBoundRandomAccessByTheRowCycle) {
  HbmConfig c = stack();
  c.banks = 2;  // tRC / banks = 23.5 ns now outlasts tFAW / 4
  HbmTiming h(c);
  auto a = h.access(0, req(8 * 64, HbmPattern::Gather, 64));  // 8 requests: one per channel
  EXPECT_NEAR(a.busy, 8 * 23.5 * kNs * kStretch, 1e-12);
}

TEST(HbmTimingTest, ShortRunsStillMoveWholeBursts) {
  HbmTiming h(stack());
  // 8 B runs: one 64 B burst and one activate each, so the activate rate still decides; same time as 64 B runs.
  auto small = h.access(0, req(8.0 * 8 * 1000, HbmPattern::Gather, 8));
  HbmTiming h2(stack());
  auto full = h2.access(0, req(64.0 * 8 * 1000, HbmPattern::Gather, 64));
  EXPECT_NEAR(small.busy, full.busy, 1e-15);
  // Runs of 2 KiB: two rows each, 16 bursts of data per row outlast the activate: data-bound like a stream.
  HbmTiming h3(stack());
  auto runs = h3.access(0, req(2048.0 * 64, HbmPattern::Strided, 2048));
  EXPECT_NEAR(runs.busy, 8 * 16 * 32 * kNs * kStretch, 1e-12);  // 128 rows, 16 per channel, 32 ns each
}

TEST(HbmTimingTest, RefreshCostsItsShareOfTime) {
  HbmConfig c = stack();
  c.refresh_interval = 0;  // no refresh
  HbmTiming without(c), with(stack());
  auto a = without.access(0, req(8 * kMiB, HbmPattern::Stream));
  auto b = with.access(0, req(8 * kMiB, HbmPattern::Stream));
  EXPECT_NEAR(a.busy, 8 * 1024 * 32 * kNs, 1e-12);
  EXPECT_NEAR(b.busy / a.busy, 3900.0 / 3550.0, 1e-12);
}

TEST(HbmTimingTest, WritesInterleavedWithReadsPayTurnarounds) {
  // Copy: 1 KiB read + 1 KiB written per row pair; the writes pay (13 + 13) ns per 8 bursts.
  HbmTiming h(stack());
  auto r = h.access(0, req(8 * kMiB, HbmPattern::Stream, 0, false, true));
  auto w = h.access(0, req(8 * kMiB, HbmPattern::Stream, 0, true, true));
  double per_row_read = 32 * kNs, per_row_write = 32 * kNs + 16.0 / 8 * 26 * kNs;
  EXPECT_NEAR(r.busy, 8192 * per_row_read * kStretch, 1e-12);
  EXPECT_NEAR(w.busy, 8192 * per_row_write * kStretch, 1e-12);
  double eff = 2 * 1024 / ((per_row_read + per_row_write) * kStretch) / 32e9;
  EXPECT_NEAR(eff, 0.5022, 0.0001);  // 50 %: DRAMsim3 65 %, Ramulator 41 %
  // Writes alone (no reads to turn around from) stream like reads.
  HbmTiming h2(stack());
  auto alone = h2.access(0, req(8 * kMiB, HbmPattern::Stream, 0, true, false));
  EXPECT_NEAR(alone.busy, r.busy, 1e-12);
  // An optimizer's read-modify-write turns the bus around without being told.
  HbmTiming h3(stack());
  auto rmw = h3.access(0, req(8 * kMiB, HbmPattern::ReadModifyWrite, 0, true, false));
  EXPECT_NEAR(rmw.busy, w.busy, 1e-12);
}

TEST(HbmTimingTest, IdleLatencyOfOneRequest) {
  // Row hit: 4 ns controller + tCL 14 ns + one 2 ns burst (stretched by refresh) = 20.2 ns (DRAM simulators: ~20).
  HbmTiming h(stack());
  auto hit = h.access(1e-6, req(64, HbmPattern::Stream));
  EXPECT_NEAR(hit.done - 1e-6, 4 * kNs + 14 * kNs + 2 * kNs * kStretch, 1e-12);
  // Row miss: + tRCD 14 ns = 34.2 ns (DRAM simulators: ~39).
  auto miss = h.access(2e-6, req(64, HbmPattern::Gather, 64));
  EXPECT_NEAR(miss.done - 2e-6, 4 * kNs + 28 * kNs + 2 * kNs * kStretch, 1e-12);
}

TEST(HbmTimingTest, ConcurrentRequestersQueue) {
  HbmConfig c = stack();
  c.latency = 0;
  c.cas = 0;
  HbmTiming h(c);
  double bytes = 8 * kMiB;
  auto a = h.access(0, req(bytes, HbmPattern::Stream));
  auto b = h.access(0, req(bytes, HbmPattern::Stream));  // same instant: waits behind the first in every channel
  EXPECT_NEAR(b.done, 2 * a.done, 1e-12);
  EXPECT_NEAR(b.queue_wait, a.done, 1e-12);
  auto later = h.access(b.done + 1e-6, req(bytes, HbmPattern::Stream));  // after the queues drained: no wait
  EXPECT_EQ(later.queue_wait, 0);
}

TEST(HbmTimingTest, SmallRequestsInterleaveOverChannels) {
  HbmTiming h(stack());
  // 8 one-row requests at the same time land on the 8 different channels, so none waits; a ninth waits.
  double worst = 0;
  for (int i = 0; i < 8; ++i) worst = std::max(worst, h.access(0, req(1024, HbmPattern::Stream)).queue_wait);
  EXPECT_EQ(worst, 0);
  EXPECT_NEAR(h.access(0, req(1024, HbmPattern::Stream)).queue_wait, 32 * kNs * kStretch, 1e-12);
}

TEST(HbmTimingTest, LegacyRunArgumentMeansStridedReads) {
  HbmTiming a(stack()), b(stack());
  EXPECT_DOUBLE_EQ(a.access(0, 64 * 1000, 64).busy, b.access(0, req(64 * 1000, HbmPattern::Strided, 64)).busy);
}

TEST(HbmTimingTest, WriteHeavyStreamsTurnAroundPerReadBatch) {
  // Four bytes written per byte read (attention scores: a [512, 64] operand pair in, a [512, 512] score block out):
  // the bus turns around once per batch of the minority direction, so the writes pay a quarter of the copy's
  // turnarounds: 16 bursts per row, 16 / 8 batches, x 1/4, each (13 + 13) ns.
  HbmTiming h(stack());
  HbmRequest w = req(8 * kMiB, HbmPattern::Stream, 0, true, true);
  w.reads_per_write = 0.25;
  auto a = h.access(0, w);
  double per_row = 32 * kNs + 16.0 / 8 * 0.25 * 26 * kNs;
  EXPECT_NEAR(a.busy, 8192 * per_row * kStretch, 1e-12);
  // More reads than writes: every write batch still pays one turnaround pair (the copy's count).
  HbmTiming h2(stack());
  w.reads_per_write = 3;
  auto b = h2.access(0, w);
  EXPECT_NEAR(b.busy, 8192 * (32 * kNs + 16.0 / 8 * 26 * kNs) * kStretch, 1e-12);
}

TEST(HbmTimingTest, StreamsAfterASmallRequestWaitForItsChannel) {
  // Streams take every channel and keep them level; a one-row request then holds one channel longer, and the next
  // stream's last channel starts only when that one is free. Once every channel is idle again, a stream waits
  // for none.
  HbmConfig c = stack();
  c.latency = 0;
  c.cas = 0;
  HbmTiming h(c);
  const double row = 32 * kNs * kStretch;  // one 1 KiB row: 16 bursts of 2 ns
  auto a = h.access(0, req(8 * 1024, HbmPattern::Stream));  // one row on each of the 8 channels
  EXPECT_NEAR(a.done, row, 1e-15);
  auto small = h.access(0, req(1024, HbmPattern::Stream));  // one row on one channel, behind the stream's
  EXPECT_NEAR(small.queue_wait, row, 1e-15);
  EXPECT_NEAR(small.done, 2 * row, 1e-15);
  auto b = h.access(0, req(8 * 1024, HbmPattern::Stream));  // waits 2 rows on that channel, 1 on the others
  EXPECT_NEAR(b.queue_wait, 2 * row, 1e-15);
  EXPECT_NEAR(b.done, 3 * row, 1e-15);
  auto c2 = h.access(0, req(8 * 1024, HbmPattern::Stream));  // the channels are uneven still: 3 rows then 1
  EXPECT_NEAR(c2.done, 4 * row, 1e-15);
  auto idle = h.access(1e-6, req(8 * 1024, HbmPattern::Stream));  // all idle by 1 us: level again, no wait
  EXPECT_EQ(idle.queue_wait, 0);
  EXPECT_NEAR(idle.done, 1e-6 + row, 1e-15);
  auto next = h.access(1e-6, req(8 * 1024, HbmPattern::Stream));  // right behind it on every channel
  EXPECT_NEAR(next.queue_wait, row, 1e-15);
  EXPECT_NEAR(next.done, 1e-6 + 2 * row, 1e-15);
}
