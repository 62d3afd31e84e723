// Posted HBM accesses (hw/chip/hbm.h): a unit that will write at a later time without waking for it posts the
// write; HBM makes it at its time, in time order with every other client's access, each against a hand count on
// one channel of 1 byte/ns with no latency, refresh or turnarounds (a 1024 B access holds it 1024 ns).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <systemc>

#include "hw/chip/action_queue.h"
#include "hw/chip/hbm.h"
#include "hw/chip/sim_time.h"
#include "tests/model/one_channel_hbm.h"

using namespace podsim;

namespace {

constexpr double kNs = 1e-9;

// The one-channel HBM, with reads and posted writes at given times.
struct Bench : test::OneChannelBench<Bench> {
  using OneChannelBench::OneChannelBench;
  ActionQueue queue;
  std::map<std::string, double> done;  // completion of each access, in ns
  // A read of `bytes` at `at` ns by the DMA engines.
  void read_at(const std::string& name, double at, double bytes) {
    queue.schedule(sc_core::sc_time(at, sc_core::SC_NS), [this, name, bytes] {
      done[name] = hbm.access(bytes, 0, HbmClient::Dma, -1, false) / kNs;
    });
  }
  void post_write(double at, double bytes, double* done_max) {
    HbmRequest w;
    w.bytes = bytes;
    w.write = true;
    hbm.post(w, at * kNs, HbmClient::Vpu, 0, done_max);
  }
};

}  // namespace

TEST(HbmPostTest, PostedWriteTakesItsPlaceInTimeOrder) {
  double write_done = 0;
  Bench b("b", [&](Bench& b) {
    b.post_write(100, 1024, &write_done);  // posted at 0 for 100 ns
    b.read_at("early", 50, 1024);          // before the write's time: served first, [50, 1074)
    b.read_at("late", 2000, 1024);         // after it: behind the write, which ran [1074, 2098)
  });
  sc_core::sc_start();
  EXPECT_NEAR(b.done["early"], 1074, 1e-6);  // 1024 ns later (applied at once, the write would make it 2148)
  EXPECT_NEAR(write_done * 1e9, 2098, 1e-6);
  EXPECT_NEAR(b.done["late"], 2000 + 1024 + 98, 1e-6);  // waits until 2098, then 1024 ns
  EXPECT_DOUBLE_EQ(b.log.hbm_write, 1024);
  EXPECT_DOUBLE_EQ(b.log.hbm_read, 2048);
}

TEST(HbmPostTest, PostedWriteGoesBeforeAnAccessOfTheSameTime) {
  double write_done = 0;
  Bench b("b", [&](Bench& b) {
    b.post_write(300, 512, &write_done);
    b.read_at("same", 300, 1024);  // at the write's own time: after it, [812, 1836)
  });
  sc_core::sc_start();
  EXPECT_NEAR(write_done * 1e9, 812, 1e-6);
  EXPECT_NEAR(b.done["same"], 1836, 1e-6);
}
