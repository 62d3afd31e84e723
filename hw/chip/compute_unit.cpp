#include "hw/chip/compute_unit.h"

#include <algorithm>

#include "hw/chip/sim_time.h"

namespace podsim {

ComputeUnit::ComputeUnit(sc_core::sc_module_name name, Kind kind, int core, double clock_period, Hbm& hbm,
                         ChipLog& log, Done on_done)
    : sc_core::sc_module(name),
      m_kind(kind),
      m_core(core),
      m_period(clock_period),
      m_hbm(hbm),
      m_log(log),
      m_on_done(std::move(on_done)),
      m_client(kind == Kind::Mxu ? HbmClient::Mxu : HbmClient::Vpu) {
  SC_METHOD(step);
  sensitive << m_wake;
  dont_initialize();
}

void ComputeUnit::submit(const UnitJob& job) {
  m_queue.push_back(job);
  if (!m_active) m_wake.notify(sc_core::SC_ZERO_TIME);
}

int64_t ComputeUnit::group_cycles(int g) const {
  // Integral shares that add up to the job's cycles exactly.
  int64_t G = m_job.groups;
  return (m_job.cycles * (g + 1)) / G - (m_job.cycles * g) / G;
}

void ComputeUnit::begin_job() {
  m_job = m_queue.front();
  m_queue.pop_front();
  m_active = true;
  m_group = 0;
  m_start = now_seconds();
  m_last_write = m_start;
  double per = m_job.read / m_job.groups;
  m_load_done[0] = m_hbm.access(per, m_job.read_run, m_client, m_job.op, false);
  m_load_done[1] = 0;
  m_state = State::WaitLoad;
}

void ComputeUnit::step() {
  ++g_model_activations;
  for (;;) {
    double now = now_seconds();
    if (!m_active) {
      if (m_queue.empty()) return;  // wait for submit()
      begin_job();
      continue;
    }
    switch (m_state) {
      case State::WaitLoad: {
        double ready = m_load_done[m_group % 2];
        if (!reached(ready)) {
          next_trigger(at_seconds(ready - now));
          return;
        }
        // Compute group g; fetch g+1 into the other buffer meanwhile.
        if (m_group + 1 < m_job.groups)
          m_load_done[(m_group + 1) % 2] =
              m_hbm.access(m_job.read / m_job.groups, m_job.read_run, m_client, m_job.op, false);
        int64_t c = group_cycles(m_group);
        m_compute_begin = now;
        m_state = State::Computing;
        if (c > 0) {
          next_trigger(at_seconds(static_cast<double>(c) * m_period));
          return;
        }
        continue;
      }
      case State::Computing: {
        double busy = now - m_compute_begin;
        (m_kind == Kind::Mxu ? m_log.mxu_busy : m_log.vpu_busy) += busy;
        if (m_log.keep_compute && busy > 0)
          m_log.compute.push_back({m_compute_begin, now, m_job.op,
                                   static_cast<uint8_t>(m_kind == Kind::Mxu ? m_core : 16 + m_core), 0});
        double wd = m_hbm.access(m_job.write / m_job.groups, 0, m_client, m_job.op, true);
        m_last_write = std::max(m_last_write, wd);
        ++m_group;
        if (m_group < m_job.groups) {
          m_state = State::WaitLoad;
          continue;
        }
        m_state = State::Drain;
        if (!reached(m_last_write)) {
          next_trigger(at_seconds(m_last_write - now));
          return;
        }
        continue;
      }
      case State::Drain: {
        m_active = false;
        UnitJob done = std::move(m_job);
        if (done.on_done) done.on_done(m_start, now);
        else m_on_done(done.op, m_start, now, done.cycles);
        continue;  // next job, if any
      }
    }
  }
}

}  // namespace podsim
