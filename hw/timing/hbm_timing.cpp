#include "hw/timing/hbm_timing.h"

#include <algorithm>
#include <cmath>

namespace podsim {

HbmTiming::HbmTiming(const HbmConfig& cfg)
    : m_cfg(cfg), m_channel_bw(cfg.bandwidth / static_cast<double>(cfg.channels)), m_free(cfg.channels, 0.0) {}

HbmTiming::Access HbmTiming::access(double now, double bytes, double run) {
  Access a;
  a.start = now;
  a.done = now;
  if (bytes <= 0) return a;
  const double row = m_cfg.row, burst = m_cfg.burst;
  const int64_t C = m_cfg.channels;
  // Work per channel: number of runs and their shape.
  double runs, run_bytes;
  if (run <= 0 || run >= bytes) {
    runs = 1;
    run_bytes = bytes;
  } else {
    runs = std::ceil(bytes / run);
    run_bytes = run;
  }
  // A run longer than a row spreads over ceil(run / row) rows on consecutive channels.
  double rows_per_run = std::ceil(run_bytes / row);
  double total_rows = runs * rows_per_run;
  int64_t touched = static_cast<int64_t>(std::min<double>(static_cast<double>(C), total_rows));
  double rows_per_channel = total_rows / static_cast<double>(touched);
  // Bytes moved per row piece: whole bursts (a short run still moves a full burst).
  double piece = run_bytes / rows_per_run;
  double moved_per_piece = std::ceil(piece / burst) * burst;
  double data_time = rows_per_channel * moved_per_piece / m_channel_bw;
  double act_time = rows_per_channel * m_cfg.activate_interval;
  double service = std::max(data_time, act_time);
  // Accesses that touch only some channels start where the previous one ended, so small requests spread out.
  uint64_t first = m_rotor % static_cast<uint64_t>(C);
  m_rotor += static_cast<uint64_t>(touched);
  double finish = now;
  for (int64_t i = 0; i < touched; ++i) {
    double& f = m_free[(first + static_cast<uint64_t>(i)) % static_cast<uint64_t>(C)];
    double begin = std::max(now, f);
    a.queue_wait = std::max(a.queue_wait, begin - now);
    f = begin + service;
    finish = std::max(finish, f);
    a.busy += service;
  }
  a.start = now + a.queue_wait;
  a.done = finish + m_cfg.latency;
  return a;
}

}  // namespace podsim
