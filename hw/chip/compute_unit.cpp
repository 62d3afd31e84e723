#include "hw/chip/compute_unit.h"

#include <algorithm>

#include "hw/chip/sim_time.h"

namespace podsim {

ComputeUnit::ComputeUnit(sc_core::sc_module_name name, Kind kind, int core, double clock_period, Hbm& hbm,
                         ChipLog& log, Done on_done, int load_depth)
    : sc_core::sc_module(name),
      m_period(clock_period),
      m_hbm(hbm),
      m_kind(kind),
      m_core(core),
      m_log(log),
      m_on_done(std::move(on_done)),
      m_client(kind == Kind::Mxu ? HbmClient::Mxu : HbmClient::Vpu) {
  m_depth = std::clamp(load_depth, 1, kMaxLoadDepth);
}

void ComputeUnit::submit(UnitJob job) {
  m_queue.push_back(std::move(job));
  if (!m_active && !m_woken) {  // wake once, whatever the number of jobs submitted at this instant
    m_woken = true;
    wake_in(0);
  }
}

namespace {

// Integral shares of `total` over `groups` that add up to it exactly.
int64_t share(int64_t total, int64_t groups, int64_t g) { return (total * (g + 1)) / groups - (total * g) / groups; }

}  // namespace

int64_t ComputeUnit::group_cycles(int g) const {
  // An MXU op with an epilogue: the VPU works on group g - 1's results while the MXU computes group g, so a group
  // takes the longer of the two, and the last group's epilogue runs after the MXU is done. When the results leave
  // through the vector unit that feeds the MXU (vpu_serial), each group's vector work follows its MXU work.
  // Vector work beside the MXU (vpu_beside) overlaps the same way, a group behind.
  int64_t G = m_job.groups;
  int64_t c = share(m_job.cycles, G, g);
  if (m_job.vpu_cycles > 0) {
    if (m_job.vpu_serial) {
      c += share(m_job.vpu_cycles, G, g);
    } else {
      if (g > 0) c = std::max(c, share(m_job.vpu_cycles, G, g - 1));
      if (g == G - 1) c += share(m_job.vpu_cycles, G, g);
    }
  }
  if (m_job.vpu_beside > 0) {
    if (g > 0) c = std::max(c, share(m_job.vpu_beside, G, g - 1));
    if (g == G - 1) c += share(m_job.vpu_beside, G, g);
  }
  return c;
}

HbmRequest ComputeUnit::load_request() const {
  HbmRequest r;
  r.bytes = m_job.read / m_job.groups;
  r.pattern = m_job.read_pattern;
  r.run = m_job.read_run;
  r.mixed = m_job.write > 0;
  return r;
}

void ComputeUnit::issue_loads(int upto) {
  upto = std::min(upto, m_job.groups);
  for (; m_loads < upto; ++m_loads)
    m_load_done[m_loads % (m_depth + 1)] = m_hbm.access(load_request(), m_client, m_job.op);
}

void ComputeUnit::begin_job() {
  if (m_queue[m_next].by_rank) {
    size_t best = m_next;
    for (size_t i = m_next + 1; i < m_queue.size(); ++i)
      if (m_queue[i].rank < m_queue[best].rank) best = i;
    if (best != m_next) std::rotate(m_queue.begin() + static_cast<std::ptrdiff_t>(m_next),
                                    m_queue.begin() + static_cast<std::ptrdiff_t>(best),
                                    m_queue.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  m_job = std::move(m_queue[m_next++]);
  if (m_next == m_queue.size()) {
    m_queue.clear();
    m_next = 0;
  } else if (m_next >= 8 && 2 * m_next >= m_queue.size()) {  // a queue that does not empty: drop the begun jobs
    m_queue.erase(m_queue.begin(), m_queue.begin() + static_cast<std::ptrdiff_t>(m_next));
    m_next = 0;
  }
  m_active = true;
  m_group = 0;
  m_start = now_seconds();
  m_last_write = m_start;
  m_loads = 0;
  if (m_job.overhead > 0) {  // the kernel's issue first: the unit is taken, HBM not yet asked
    m_issued = m_start + m_job.overhead;
    m_state = State::Issue;
    return;
  }
  issue_loads(m_depth);
  m_state = State::WaitLoad;
}

void ComputeUnit::wake_in(double seconds) { wake_at(sim_now() + at_seconds(seconds)); }

void ComputeUnit::wake_at(const sc_core::sc_time& at) {
  // The latest wake wins, as a method's next trigger does: a job submitted while step() runs (a finished job's
  // callback submits the next) is taken by that same step(), and the wake its submit() scheduled is void.
  const uint64_t gen = ++m_wakes;
  m_calendar.schedule(
      at, [this, gen] {
        if (gen == m_wakes) step();
      },
      &m_wakes, m_hbm.hot_state());
}

void ComputeUnit::wait_load(double seconds) {
  // The load of group m_group comes in after `seconds`. For the last group the unit issues nothing when it does (no
  // next load to fetch): it only starts computing. So it wakes at the compute's end instead, which makes the same
  // accesses at the same times with one wake less per job.
  const sc_core::sc_time in = sim_now() + at_seconds(seconds);
  if (m_group + 1 < m_job.groups) {
    wake_at(in);
    return;
  }
  const int64_t c = group_cycles(m_group);
  m_compute_begin = to_seconds(in);
  m_state = State::Computing;
  wake_at(c > 0 ? in + at_seconds(static_cast<double>(c) * m_period) : in);
}

void ComputeUnit::step() {
  m_woken = false;
  for (;;) {
    double now = now_seconds();
    if (!m_active) {
      if (m_next == m_queue.size()) return;  // wait for submit()
      begin_job();
      continue;
    }
    switch (m_state) {
      case State::Issue: {
        if (!reached(m_issued)) {
          wake_in(m_issued - now);
          return;
        }
        m_last_write = now;
        issue_loads(m_depth);
        m_state = State::WaitLoad;
        continue;
      }
      case State::WaitLoad: {
        double ready = m_load_done[m_group % (m_depth + 1)];
        if (!reached(ready)) {
          wait_load(ready - now);
          return;
        }
        // Compute group g; fetch g+1..g+d into the other buffers meanwhile.
        issue_loads(m_group + 1 + m_depth);
        int64_t c = group_cycles(m_group);
        m_compute_begin = now;
        m_state = State::Computing;
        if (c > 0) {
          const sc_core::sc_time end = sim_now() + at_seconds(static_cast<double>(c) * m_period);
          // A group that is not the last, whose next load comes in after its compute: the unit would wake at the
          // compute's end only to write the results (if it has any) and wait again. It posts the write to HBM for
          // that time instead (made there in time order among the other clients' accesses) and wakes when the
          // load is in.
          if (m_group + 1 < m_job.groups) {
            const double next = m_load_done[(m_group + 1) % (m_depth + 1)];
            if (next > to_seconds(end) + kTimeEpsilon) {
              finish_group(to_seconds(end), true);
              ++m_group;
              m_state = State::WaitLoad;
              wait_load(next - now);
              return;
            }
          }
          wake_at(end);
          return;
        }
        continue;
      }
      case State::Computing: {
        finish_group(now, false);
        ++m_group;
        if (m_group < m_job.groups) {
          m_state = State::WaitLoad;
          continue;
        }
        m_state = State::Drain;
        if (!reached(m_last_write)) {
          wake_in(m_last_write - now);
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

void ComputeUnit::finish_group(double now, bool post) {
  const int64_t G = m_job.groups;
  double busy = m_kind == Kind::Mxu ? static_cast<double>(share(m_job.cycles, G, m_group)) * m_period
                                    : now - m_compute_begin;
  (m_kind == Kind::Mxu ? m_log.mxu_busy : m_log.vpu_busy) += busy;
  if (m_log.keep_compute && busy > 0)
    m_log.log_compute({m_compute_begin, m_compute_begin + busy, m_job.op,
                       static_cast<uint8_t>(m_kind == Kind::Mxu ? m_core : 16 + m_core), 0});
  if (m_kind == Kind::Mxu && m_job.vpu_cycles + m_job.vpu_beside > 0) {
    // The vector unit's share (pops, epilogue): ends with the group (after the MXU's, in either mode).
    double v = static_cast<double>(share(m_job.vpu_cycles + m_job.vpu_beside, G, m_group)) * m_period;
    m_log.vpu_busy += v;
    if (m_log.keep_compute) m_log.log_compute({now - v, now, m_job.op, static_cast<uint8_t>(16 + m_core), 0});
  }
  HbmRequest w;
  w.bytes = m_job.write / G;
  w.pattern = m_job.write_pattern;
  w.run = m_job.read_run;
  w.write = true;
  w.mixed = m_job.read > 0;
  w.reads_per_write = m_job.write > 0 ? m_job.read / m_job.write : 1.0;
  if (w.bytes <= 0) return;
  if (post) {
    m_hbm.post(w, now, m_client, m_job.op, &m_last_write);
  } else {
    double wd = m_hbm.access(w, m_client, m_job.op);
    m_last_write = std::max(m_last_write, wd);
  }
}

}  // namespace podsim
