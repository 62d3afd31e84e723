// A module's calendar of future actions with a single sc_event armed for the earliest one (SystemC keeps only
// the earliest pending notification). Actions due at the same time run in the order they were scheduled, so runs
// are deterministic. The owning module's SC_METHOD calls run_due() when the event fires:
//
//   SC_METHOD(on_wake); sensitive << m_queue.event(); dont_initialize();
//   void on_wake() { m_queue.run_due(); }
//   m_queue.schedule(sc_core::sc_time_stamp() + delay, [this] { ... });
#pragma once

#include <functional>
#include <queue>
#include <systemc>
#include <vector>

#include "hw/chip/sim_time.h"

namespace podsim {

class ActionQueue {
 public:
  using Action = std::function<void()>;

  void schedule(const sc_core::sc_time& at, Action a) {
    m_heap.push(Entry{at, m_seq++, std::move(a)});
    // Re-arm only for an earlier time: every notify costs the kernel a heap operation.
    if (!m_armed || at < m_armed_at) arm(at);
  }

  sc_core::sc_event& event() { return m_event; }
  bool empty() const { return m_heap.empty(); }
  size_t size() const { return m_heap.size(); }

  void run_due() {
    m_armed = false;
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    while (!m_heap.empty() && m_heap.top().at <= now) {
      Action a = std::move(const_cast<Entry&>(m_heap.top()).action);
      m_heap.pop();
      ++g_model_activations;
      a();
    }
    g_progress_seconds.store(to_seconds(now), std::memory_order_relaxed);
    g_progress_activations.store(g_model_activations, std::memory_order_relaxed);
    if (!m_heap.empty() && (!m_armed || m_heap.top().at < m_armed_at)) arm(m_heap.top().at);
  }

 private:
  void arm(const sc_core::sc_time& at) {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    m_event.notify(at > now ? at - now : sc_core::SC_ZERO_TIME);
    m_armed = true;
    m_armed_at = at > now ? at : now;
  }

  struct Entry {
    sc_core::sc_time at;
    uint64_t seq;
    Action action;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> m_heap;
  sc_core::sc_event m_event;
  uint64_t m_seq = 0;
  bool m_armed = false;            // a notification is pending
  sc_core::sc_time m_armed_at;     // for this time
};

}  // namespace podsim
