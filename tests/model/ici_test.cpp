// ICI links and routing as SystemC models: zero-load latency, the shorter way round, cut-through over hops,
// serialisation of transfers that share a link, each against its exact hand count. A small testbench of routers
// and links, without chips.
#include <gtest/gtest.h>

#include <memory>
#include <systemc>
#include <vector>

#include "hw/chip/sim_time.h"
#include "hw/ici/router.h"

using namespace podsim;

namespace {

constexpr double kBw = 100e9;     // bytes/s per link direction
constexpr double kLat = 1e-6;     // per hop

struct Net {
  Torus torus;
  MessagePool pool;
  std::vector<ChipLog> logs;
  std::vector<std::unique_ptr<StallInjector>> stalls;
  std::vector<std::unique_ptr<IciRouter>> routers;
  std::vector<IciLink> links;
  std::vector<std::pair<int64_t, double>> arrivals;  // (chip, time the tail arrived)

  Net(std::vector<int64_t> dims, std::vector<bool> wrap) : torus(dims, wrap) {
    const int64_t n = torus.chips();
    logs.resize(n);
    for (int64_t c = 0; c < n; ++c) {
      logs[c].link_bytes.assign(torus.directions(), 0);
      logs[c].link_busy.assign(torus.directions(), 0);
      stalls.push_back(std::make_unique<StallInjector>(0, 0, 1));
      routers.push_back(std::make_unique<IciRouter>(("r" + std::to_string(c)).c_str(), c, torus, pool, logs[c],
                                                    *stalls.back(), [this, c](Message&& m) {
                                                      arrivals.push_back({c, now_seconds()});
                                                      (void)m;
                                                    }));
    }
    links.reserve(n * torus.directions());
    for (int64_t c = 0; c < n; ++c)
      for (int d = 0; d < torus.directions(); ++d) {
        int64_t to = torus.neighbor(c, d);
        if (to < 0) continue;
        links.push_back({c, to, d, kBw, kLat, 0, routers[to].get()});
        routers[c]->connect(d, &links.back());
      }
  }
};

// Injects messages at time 0 from a process.
struct Injector : sc_core::sc_module {
  SC_HAS_PROCESS(Injector);
  Net& net;
  std::vector<Message> msgs;
  Injector(sc_core::sc_module_name n, Net& net, std::vector<Message> m) : sc_module(n), net(net), msgs(std::move(m)) {
    SC_METHOD(go);
  }
  void go() {
    for (auto& m : msgs) net.routers[m.src]->inject(Message(m));
  }
};

Message msg(int64_t src, int64_t dst, double bytes) {
  Message m;
  m.src = src;
  m.dst = dst;
  m.bytes = bytes;
  return m;
}

}  // namespace

TEST(IciTest, ZeroLoadLatencyIsHopsTimesLatencyPlusSerialisation) {
  Net net({8, 8}, {true, true});
  double bytes = 1 << 20;
  int64_t dst = net.torus.chip({3, 2});  // 3 + 2 hops
  Injector inj("inj", net, {msg(0, dst, bytes)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 1u);
  EXPECT_EQ(net.torus.hops(0, dst), 5);
  EXPECT_NEAR(net.arrivals[0].second, 5 * kLat + bytes / kBw, 1e-12);
}

TEST(IciTest, SmallMessageStillPaysPerHopLatency) {
  Net net({16, 1}, {true, true});
  Injector inj("inj", net, {msg(0, 6, 64)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 1u);
  EXPECT_NEAR(net.arrivals[0].second, 6 * kLat + 64 / kBw, 1e-12);
}

TEST(IciTest, WrapAroundTakesTheShorterWay) {
  Net net({8, 1}, {true, true});
  Injector inj("inj", net, {msg(1, 7, 1000)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 1u);
  EXPECT_NEAR(net.arrivals[0].second, 2 * kLat + 1000 / kBw, 1e-12);  // 1 -> 0 -> 7, not 6 hops forward
  EXPECT_GT(net.logs[1].link_bytes[Torus::direction(0, false)], 0);
  EXPECT_EQ(net.logs[1].link_bytes[Torus::direction(0, true)], 0);
}

TEST(IciTest, OpenMeshHasNoWrapLink) {
  Net net({8, 1}, {false, true});
  Injector inj("inj", net, {msg(1, 7, 1000)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 1u);
  EXPECT_NEAR(net.arrivals[0].second, 6 * kLat + 1000 / kBw, 1e-12);
}

TEST(IciTest, TwoTransfersThroughOneLinkTakeTwiceAsLong) {
  double bytes = 64 << 20;
  Net net({4, 1}, {true, true});
  // Both 0 -> 1: they share the +x link of chip 0.
  Injector inj("inj", net, {msg(0, 1, bytes), msg(0, 1, bytes)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 2u);
  // Serialisation: the second starts on the link when the first has left it.
  const double ser = bytes / kBw;
  EXPECT_NEAR(std::min(net.arrivals[0].second, net.arrivals[1].second), ser + kLat, 1e-12);
  EXPECT_NEAR(std::max(net.arrivals[0].second, net.arrivals[1].second), 2 * ser + kLat, 1e-12);
}

TEST(IciTest, TransfersOnDifferentLinksDoNotInterfere) {
  double bytes = 64 << 20;
  Net net({4, 1}, {true, true});
  Injector inj("inj", net, {msg(0, 1, bytes), msg(0, 3, bytes)});  // +x and -x links
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 2u);
  for (auto& a : net.arrivals) EXPECT_NEAR(a.second, kLat + bytes / kBw, 1e-12);
}

TEST(IciTest, SharedMiddleLinkSerialisesMultiHopTraffic) {
  double bytes = 16 << 20;
  Net net({8, 1}, {false, true});
  // 0 -> 3 and 1 -> 3 both cross 1 -> 2 -> 3.
  Injector inj("inj", net, {msg(0, 3, bytes), msg(1, 3, bytes)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 2u);
  // Hand count (ser = bytes / bandwidth, L = hop latency): 1 -> 3 starts on link 1->2 at once and arrives after
  // 2 hops, at ser + 2L. 0 -> 3 reaches chip 1 at L, waits for link 1->2 until ser, leaves it at 2 ser and follows
  // cut-through: it arrives at 2 ser + 2L. The shared links carry both, back to back.
  const double ser = bytes / kBw;
  EXPECT_NEAR(std::min(net.arrivals[0].second, net.arrivals[1].second), ser + 2 * kLat, 1e-12);
  EXPECT_NEAR(std::max(net.arrivals[0].second, net.arrivals[1].second), 2 * ser + 2 * kLat, 1e-12);
  EXPECT_NEAR(net.logs[1].link_bytes[Torus::direction(0, true)], 2 * bytes, 1);
  EXPECT_NEAR(net.logs[1].link_busy[Torus::direction(0, true)], 2 * ser, 1e-12);
}

// hardware.faults: the +x link of chip 1 is down. A message 1 -> 2 goes the other way round the ring of 8 (7 hops:
// 1 -> 0 -> 7 -> ... -> 2, the detour's direction kept although half-way the shorter way turns to +x), then on in
// dimension order (y). Hand count: 7 + 1 hops of latency, one serialisation (cut-through); nothing crosses the down
// link.
TEST(IciTest, DownLinkDetoursTheOtherWayRoundTheRing) {
  Net net({8, 2}, {true, true});
  const int plus_x = Torus::direction(0, true), minus_x = Torus::direction(0, false);
  for (IciLink& l : net.links)
    if (l.from == 1 && l.dir == plus_x) l.down = true;
  const int64_t dst = net.torus.chip({2, 1});
  Injector inj("inj", net, {msg(1, dst, 4096)});
  sc_core::sc_start();
  ASSERT_EQ(net.arrivals.size(), 1u);
  EXPECT_EQ(net.arrivals[0].first, dst);
  EXPECT_NEAR(net.arrivals[0].second, 8 * kLat + 4096 / kBw, 1e-12);
  EXPECT_EQ(net.logs[1].link_bytes[plus_x], 0);
  for (int64_t c : {1, 0, 7, 6, 5, 4, 3}) EXPECT_EQ(net.logs[c].link_bytes[minus_x], 4096) << c;
  EXPECT_EQ(net.logs[2].link_bytes[Torus::direction(1, true)] + net.logs[2].link_bytes[Torus::direction(1, false)],
            4096);
}
