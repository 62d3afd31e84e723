#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "hw/chip/action_queue.h"

#include <algorithm>
#include <utility>

namespace podsim {

Calendar& Calendar::get() {
  static Calendar* calendar = new Calendar();  // lives as long as the simulation; never destroyed
  return *calendar;
}

Calendar::Calendar() {
  sc_core::sc_spawn_options opts;
  opts.spawn_method();
  opts.set_sensitivity(&m_event);
  opts.dont_initialize();
  sc_core::sc_spawn([this] { run_due(); }, "podsim_calendar", &opts);
}

void Calendar::arm(uint64_t at) {
  const uint64_t now = sim_now().value();
  m_event.notify(at > now ? sc_core::sc_time::from_value(at - now) : sc_core::SC_ZERO_TIME);
  m_armed = true;
  m_armed_at = at > now ? at : now;
}

void Calendar::run_due() {
  const sc_core::sc_time now = sim_now();
  const uint64_t t = now.value();
  // While the due actions run, what they schedule for now runs in this loop: no notification for it.
  m_armed = true;
  m_armed_at = t;
  while (!m_times.empty() && m_times.top() <= t) {
    const uint64_t at = m_times.top();
    const uint32_t b = m_index.at(at);
    // Actions may schedule more at this time (appended here) and create buckets: index afresh each time.
    size_t i = 0;
    constexpr size_t kAhead = 2;  // actions whose memory is fetched while one runs
    auto run_now = [&] {
      for (; i < m_buckets[b].now.size(); ++i) {
        std::vector<Entry>& now = m_buckets[b].now;
        if (i + kAhead < now.size()) fetch_ahead(now[i + kAhead]);
        Action a = std::move(now[i].action);
        ++g_model_activations;
        a();
      }
    };
    run_now();
    // Then the arrivals, by key; each followed by what it schedules for now. Links of zero latency bring more
    // arrivals at this time: they run in a round of their own, after those already here.
    while (!m_buckets[b].arrivals.empty()) {
      std::vector<Arrival>& arrivals = m_round;  // swapped, so both keep their capacity
      arrivals.swap(m_buckets[b].arrivals);
      // By key, in arrival order on a tie: (key, index) pairs sort fast, the actions stay where they are.
      m_order.clear();
      for (size_t k = 0; k < arrivals.size(); ++k) m_order.emplace_back(arrivals[k].key, static_cast<uint32_t>(k));
      if (!std::is_sorted(m_order.begin(), m_order.end())) std::sort(m_order.begin(), m_order.end());
      for (size_t n = 0; n < m_order.size(); ++n) {
        if (n + kAhead < m_order.size()) fetch_ahead(arrivals[m_order[n + kAhead].second].entry);
        Action a = std::move(arrivals[m_order[n].second].entry.action);
        ++g_model_activations;
        a();
        run_now();
      }
      arrivals.clear();
    }
    m_times.pop();
    m_index.erase(at);
    m_buckets[b].now.clear();
    m_free.push_back(b);
    if (m_last_time == at) m_last_time = UINT64_MAX;
  }
  g_progress_seconds.store(to_seconds(now), std::memory_order_relaxed);
  g_progress_activations.store(g_model_activations, std::memory_order_relaxed);
  m_armed = false;
  if (!m_times.empty()) arm(m_times.top());
}

}  // namespace podsim
