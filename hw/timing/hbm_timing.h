// Flow-level model of HBM: channels, each with a queue (its next free time), and the DRAM mechanisms that decide
// how much of the peak bandwidth an access pattern gets. Arithmetic per access, never per request.
//
// An access of `bytes` is cut into row pieces: a stream into whole rows, a strided or gathered access into its runs
// (each run opens ceil(run / row) rows). Pieces interleave across channels row by row, so a stream spreads evenly
// and a small access lands on one channel. A channel spends on its pieces
//     service = (max(data, activates x activate_period) + turnarounds) / (1 - tRFC / tREFI)
//   data            = bursts x burst / bw_channel    (a run shorter than a burst still moves a whole burst)
//   activate_period = max(tRRD, tFAW / 4, tRC / banks)   (the activate rate bounds scattered access)
//   turnarounds     = write bursts x min(1, reads / writes) / write_batch x (read_to_write + write_to_read), for
//                     writes that interleave with reads (an op that loads and stores at once, an optimizer's
//                     read-modify-write). The bus turns around once per batch of the minority direction: when
//                     writes outnumber the reads they interleave with, the controller drains them in longer runs
//                     between two read batches (write queue watermarks), so a write-heavy stream pays the
//                     turnarounds of its reads, not of its writes
//   refresh         : the channel is unavailable tRFC out of every tREFI
// Requests queue per channel in arrival order; an access completes when its last channel finishes, plus the
// latency to first data: the controller/path latency, tCL, and tRCD when its first access opens a row (strided and
// gathered accesses; a stream continues an open row). Concurrent requesters (MXU feeds, VPU, DMA) share the
// channels, so they slow each other down. docs/model.md (HBM) and docs/validation.md give the references.
#pragma once

#include <cstdint>
#include <vector>

#include "base/params/experiment.h"
#include "workloads/op_def.h"

namespace podsim {

struct HbmRequest {
  double bytes = 0;
  HbmPattern pattern = HbmPattern::Stream;
  double run = 0;      // Strided/Gather: bytes per contiguous run (0: one burst)
  bool write = false;
  bool mixed = false;  // reads of the same requester interleave with these writes: writes pay turnarounds
  double reads_per_write = 1;  // mixed writes: read bytes interleaved per written byte (< 1: fewer turnarounds)
};

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
  Access access(double now, const HbmRequest& r);
  // A read: a stream when run <= 0, else strided runs of `run` bytes.
  Access access(double now, double bytes, double run);

  double peak_bandwidth() const { return m_cfg.bandwidth; }
  int64_t channels() const { return m_cfg.channels; }
  // Seconds between activates one channel sustains: max(tRRD, tFAW / 4, tRC / banks).
  double activate_period() const;
  // Service-time stretch of refresh: 1 / (1 - tRFC / tREFI).
  double refresh_stretch() const;

 private:
  // What an access of a given request costs each channel it touches, whatever the queues.
  struct Shape {
    int64_t touched = 0;  // channels
    double service = 0;   // each holds the channel this long
    double to_last = 0;   // from a channel's start to its last byte out
    double busy = 0;      // channel-seconds over the touched channels
    double rcd = 0;       // tRCD for strided and gathered accesses (a stream continues an open row)
  };
  Shape shape(const HbmRequest& r) const;

  // What every access reads, first and together (a pod's chips are visited in turn: their state is cold).
  // Streams take every channel, so the channels are often level: free at one time, m_level. Kept as one value
  // then, and m_free is filled in only when an access touches some channels.
  bool m_uniform = true;
  double m_level = 0;
  int64_t m_rotor = 0;  // the channel the next access starts on
  int64_t m_channels;   // m_cfg.channels
  double m_latency, m_cas;  // m_cfg.latency, m_cfg.cas
  // The shapes of the last few distinct requests (a unit's loads and writes, a collective's reads, writes and
  // reductions alternate), the most recent first tried: the same arithmetic, done once per shape.
  static constexpr int kShapes = 4;
  HbmRequest m_last[kShapes];
  Shape m_last_shape[kShapes];
  int m_shapes = 0;     // entries filled
  int m_next_slot = 0;  // the entry a new shape replaces (round robin)
  int m_hit = 0;        // the entry used last

  HbmConfig m_cfg;
  double m_channel_bw;
  double m_activate_period = 0, m_refresh_stretch = 1;  // activate_period(), refresh_stretch(): fixed per config
  std::vector<double> m_free;  // next free time per channel (stale while m_uniform)
};

}  // namespace podsim
