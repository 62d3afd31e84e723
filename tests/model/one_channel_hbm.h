// HBM for hand counts in model tests: one channel of 1 byte/ns with no latency, refresh, turnarounds or activate
// limits, so an access of N bytes holds it N ns.
#pragma once

#include "sim/config/experiment.h"

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

}  // namespace podsim::test
