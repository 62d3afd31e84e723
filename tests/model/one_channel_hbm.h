// HBM for hand counts in model tests: one channel of 1 byte/ns with no latency, refresh, turnarounds or activate
// limits, so an access of N bytes holds it N ns; and a bench that runs a test's plan beside it.
#pragma once

#include <functional>
#include <systemc>
#include <utility>

#include "hw/chip/chip_log.h"
#include "hw/chip/hbm.h"
#include "hw/chip/stall.h"
#include "base/params/experiment.h"

namespace podsim::test {

inline HbmConfig one_channel_hbm() {
  HbmConfig c;
  c.bandwidth = 1e9;
  c.channels = 1;
  c.latency = c.rcd = c.cas = 0;
  c.read_to_write = c.write_to_read = 0;
  c.activate_interval = c.faw = c.row_cycle = 1e-12;
  c.refresh_interval = 0;
  return c;
}

// One HBM of one_channel_hbm() on a 1 GHz clock, and `plan` run from a process at time 0 with the bench itself
// (`Self`, the test's own bench, which adds what it needs):
//
//   struct Bench : test::OneChannelBench<Bench> { using OneChannelBench::OneChannelBench; ActionQueue queue; };
//   Bench b("b", [](Bench& b) { ... });
//   sc_core::sc_start();
template <class Self>
struct OneChannelBench : sc_core::sc_module {
  SC_HAS_PROCESS(OneChannelBench);
  StallInjector stalls{0, 0, 1};
  ChipLog log;
  Hbm hbm{"hbm", one_channel_hbm(), 1e-9, stalls, log};
  std::function<void(Self&)> plan;
  OneChannelBench(sc_core::sc_module_name n, std::function<void(Self&)> p) : sc_module(n), plan(std::move(p)) {
    SC_METHOD(go);
  }
  void go() { plan(static_cast<Self&>(*this)); }
};

}  // namespace podsim::test
