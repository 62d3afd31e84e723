#include "hw/timing/hbm_timing.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace podsim {

HbmTiming::HbmTiming(const HbmConfig& cfg)
    : m_channels(cfg.channels),
      m_latency(cfg.latency),
      m_cas(cfg.cas),
      m_cfg(cfg),
      m_channel_bw(cfg.bandwidth / static_cast<double>(cfg.channels)),
      m_free(cfg.channels, 0.0) {
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

HbmTiming::Shape HbmTiming::shape(const HbmRequest& r) const {
  Shape sh;
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
  sh.touched = static_cast<int64_t>(std::min<double>(static_cast<double>(C), pieces));
  const double per_channel = pieces / static_cast<double>(sh.touched);
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
  sh.service = hold * stretch;
  sh.to_last = last_data * stretch;
  for (int64_t i = 0; i < sh.touched; ++i) sh.busy += sh.service;  // summed channel by channel
  sh.rcd = streams ? 0.0 : m_cfg.rcd;
  return sh;
}

HbmTiming::Access HbmTiming::access(double now, const HbmRequest& r) {
  Access a;
  a.start = now;
  a.done = now;
  if (r.bytes <= 0) return a;
  // Accesses repeat their shape (a unit's groups, a collective's chunks): the arithmetic is kept for the last one.
  auto same = [&r](const HbmRequest& o) {
    return r.bytes == o.bytes && r.pattern == o.pattern && r.run == o.run && r.write == o.write &&
           r.mixed == o.mixed && r.reads_per_write == o.reads_per_write;
  };
  if (!(m_hit < m_shapes && same(m_last[m_hit]))) {
    int found = -1;
    for (int i = 0; i < m_shapes && found < 0; ++i)
      if (same(m_last[i])) found = i;
    if (found < 0) {
      found = m_next_slot;
      m_next_slot = (m_next_slot + 1) % kShapes;
      m_shapes = std::max(m_shapes, found + 1);
      m_last[found] = r;
      m_last_shape[found] = shape(r);
    }
    m_hit = found;
  }
  const Shape& sh = m_last_shape[m_hit];
  const int64_t C = m_channels;
  // Accesses that touch only some channels start where the previous one ended, so small requests spread out.
  // Each channel starts the access when it is free (not before now); the access's wait is the longest and its
  // data is out when the last channel to start has served its pieces.
  const int64_t ch = m_rotor;  // kept below C: (ch + touched) mod C without a division
  m_rotor += sh.touched;
  if (m_rotor >= C) m_rotor -= C;
  double latest = now;
  const double service = sh.service;
  if (m_uniform && sh.touched == C) {
    // Every channel is free at the same time and the access takes them all: they stay level (the loop below,
    // channel by channel, gives the same values).
    const double begin = m_level > now ? m_level : now;
    latest = begin;
    m_level = begin + service;
  } else {
    double* f = m_free.data();
    if (m_uniform) std::fill(m_free.begin(), m_free.end(), m_level);
    double lowest = std::numeric_limits<double>::infinity();
    auto serve = [&](int64_t from, int64_t to) {
      for (int64_t i = from; i < to; ++i) {
        const double begin = f[i] > now ? f[i] : now;
        latest = begin > latest ? begin : latest;
        lowest = begin < lowest ? begin : lowest;
        f[i] = begin + service;
      }
    };
    const int64_t first = std::min(sh.touched, C - ch);
    serve(ch, ch + first);
    serve(0, sh.touched - first);
    // An access over every channel that started them all at once leaves them level again.
    m_uniform = sh.touched == C && lowest == latest;
    if (m_uniform) m_level = latest + service;
  }
  a.queue_wait = latest - now;
  a.busy = sh.busy;
  a.start = now + a.queue_wait;
  a.done = latest + sh.to_last + m_latency + m_cas + sh.rcd;
  return a;
}

}  // namespace podsim
