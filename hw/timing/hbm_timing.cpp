#include "hw/timing/hbm_timing.h"

#include <algorithm>
#include <cmath>

namespace podsim {

HbmTiming::HbmTiming(const HbmConfig& cfg)
    : m_cfg(cfg), m_channel_bw(cfg.bandwidth / static_cast<double>(cfg.channels)), m_free(cfg.channels, 0.0) {
  m_activate_period = activate_period();
  m_refresh_stretch = refresh_stretch();
}

double HbmTiming::activate_period() const {
  return std::max({m_cfg.activate_interval, m_cfg.faw / 4.0,
                   m_cfg.row_cycle / static_cast<double>(std::max<int64_t>(1, m_cfg.banks))});
}

double HbmTiming::refresh_stretch() const {
  if (m_cfg.refresh_interval <= 0) return 1.0;
  double lost = std::min(0.9, m_cfg.refresh_time / m_cfg.refresh_interval);
  return 1.0 / (1.0 - lost);
}

HbmTiming::Access HbmTiming::access(double now, double bytes, double run) {
  HbmRequest r;
  r.bytes = bytes;
  r.pattern = run > 0 ? HbmPattern::Strided : HbmPattern::Stream;
  r.run = run;
  return access(now, r);
}

HbmTiming::Access HbmTiming::access(double now, const HbmRequest& r) {
  Access a;
  a.start = now;
  a.done = now;
  if (r.bytes <= 0) return a;
  const double row = m_cfg.row, burst = m_cfg.burst;
  const int64_t C = m_cfg.channels;
  const bool streams = r.pattern == HbmPattern::Stream || r.pattern == HbmPattern::ReadModifyWrite;
  // Row pieces: a stream is cut into whole rows; runs each open the rows they touch.
  double pieces, piece_bytes;
  if (streams || r.run >= r.bytes) {
    pieces = std::ceil(r.bytes / row);
    piece_bytes = r.bytes / pieces;
  } else {
    double run = r.run > 0 ? r.run : burst;
    double runs = std::ceil(r.bytes / run);
    double rows_per_run = std::ceil(run / row);
    pieces = runs * rows_per_run;
    piece_bytes = run / rows_per_run;
  }
  const int64_t touched = static_cast<int64_t>(std::min<double>(static_cast<double>(C), pieces));
  const double per_channel = pieces / static_cast<double>(touched);
  const double piece_data = std::ceil(piece_bytes / burst - 1e-9) * burst / m_channel_bw;
  const double period = m_activate_period;
  // The channel is held until it may activate again; the last piece's data is out one activate period earlier.
  double hold = std::max(per_channel * piece_data, per_channel * period);
  double last_data = std::max(per_channel * piece_data, (per_channel - 1) * period + piece_data);
  const bool mixed = r.mixed || r.pattern == HbmPattern::ReadModifyWrite;
  if (r.write && mixed && m_cfg.write_batch > 0) {
    // One turnaround pair per batch of the minority direction (write bursts, or fewer reads between them).
    const double minority = std::clamp(r.reads_per_write, 0.0, 1.0);
    double turn = per_channel * piece_data * m_channel_bw / burst * minority /
                  static_cast<double>(m_cfg.write_batch) * (m_cfg.read_to_write + m_cfg.write_to_read);
    hold += turn;
    last_data += turn;
  }
  const double stretch = m_refresh_stretch;
  const double service = hold * stretch;
  const double to_last = last_data * stretch;
  // Accesses that touch only some channels start where the previous one ended, so small requests spread out.
  int64_t ch = static_cast<int64_t>(m_rotor % static_cast<uint64_t>(C));
  m_rotor += static_cast<uint64_t>(touched);
  double finish = now;
  for (int64_t i = 0; i < touched; ++i, ch = ch + 1 == C ? 0 : ch + 1) {
    double& f = m_free[static_cast<size_t>(ch)];
    double begin = std::max(now, f);
    a.queue_wait = std::max(a.queue_wait, begin - now);
    f = begin + service;
    finish = std::max(finish, begin + to_last);
    a.busy += service;
  }
  a.start = now + a.queue_wait;
  a.done = finish + m_cfg.latency + m_cfg.cas + (streams ? 0.0 : m_cfg.rcd);
  return a;
}

}  // namespace podsim
