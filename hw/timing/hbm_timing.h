// Occupancy model of HBM: channels, each with a queue (its next free time), peak bandwidth and row activations.
//
// An access of `bytes` in contiguous runs of `run` bytes (0 = one long stream) is striped across channels row by
// row (a row is hardware.chip.hbm.row bytes). A channel spends, per run it serves,
//     max(bursts * burst / bw_channel, activations * activate_interval)
// so long sequential streams run near peak (activations hide behind data), while small scattered runs are bound by
// the activation rate and waste the rest of each burst: achieved bandwidth depends on the access pattern. Requests
// queue per channel in arrival order; an access completes when its last channel finishes, plus the latency.
// Concurrent requesters (MXU feeds, VPU, DMA) share the channels, so they slow each other down.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/experiment.h"

namespace podsim {

class HbmTiming {
 public:
  explicit HbmTiming(const HbmConfig& cfg);

  struct Access {
    double start = 0;       // when the first channel started serving it (seconds)
    double done = 0;        // when the last byte is done, latency included
    double busy = 0;        // channel-seconds it occupied, summed over channels
    double queue_wait = 0;  // longest time it waited behind earlier requests in a channel
  };

  // Reserves channel time for an access issued at `now` (seconds).
  Access access(double now, double bytes, double run);

  double peak_bandwidth() const { return m_cfg.bandwidth; }
  int64_t channels() const { return m_cfg.channels; }

 private:
  HbmConfig m_cfg;
  double m_channel_bw;
  std::vector<double> m_free;  // next free time per channel
  uint64_t m_rotor = 0;
};

}  // namespace podsim
