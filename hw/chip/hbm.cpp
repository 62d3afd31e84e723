#include "hw/chip/hbm.h"

#include <algorithm>
#include <cstddef>

#include "hw/chip/sim_time.h"

namespace podsim {

Hbm::Hbm(sc_core::sc_module_name name, const HbmConfig& cfg, double clock_period, StallInjector& stalls, ChipLog& log)
    : sc_core::sc_module(name), m_timing(cfg), m_period(clock_period), m_stalls(stalls), m_log(log) {}

double Hbm::access(double bytes, double run, HbmClient who, int32_t op, bool write) {
  HbmRequest r;
  r.bytes = bytes;
  r.pattern = run > 0 ? HbmPattern::Strided : HbmPattern::Stream;
  r.run = run;
  r.write = write;
  return access(r, who, op);
}

double Hbm::access(const HbmRequest& r, HbmClient who, int32_t op) {
  const double now = now_seconds();
  if (!m_posted.empty()) flush(now);
  return make(now, r, who, op);
}

void Hbm::post(const HbmRequest& r, double at, HbmClient who, int32_t op, double* done_max) {
  Posted p{at, m_posts++, r, who, op, done_max};
  auto it = std::upper_bound(m_posted.begin(), m_posted.end(), p, [](const Posted& a, const Posted& b) {
    return a.at != b.at ? a.at < b.at : a.seq < b.seq;
  });
  m_posted.insert(it, p);
}

void Hbm::flush(double now) {
  size_t n = 0;
  for (; n < m_posted.size() && m_posted[n].at <= now + kTimeEpsilon; ++n) {
    const Posted& p = m_posted[n];
    const double done = make(p.at, p.r, p.who, p.op);
    if (p.done_max && done > *p.done_max) *p.done_max = done;
  }
  m_posted.erase(m_posted.begin(), m_posted.begin() + static_cast<std::ptrdiff_t>(n));
}

double Hbm::make(double now, const HbmRequest& r, HbmClient who, int32_t op) {
  const double bytes = r.bytes;
  const bool write = r.write;
  if (bytes <= 0) return now;
  HbmTiming::Access a = m_timing.access(now, r);
  double done = a.done + m_stalls.draw();
  done = ceil_to_period(done, m_period);
  m_log.hbm_busy += a.busy;
  (write ? m_log.hbm_write : m_log.hbm_read) += bytes;
  if (a.queue_wait > m_log.hbm_queue_wait_max) m_log.hbm_queue_wait_max = a.queue_wait;
  if (m_log.keep_compute) m_log.log_hbm({a.start, done, op, static_cast<uint8_t>(who), bytes});
  return done;
}

}  // namespace podsim
