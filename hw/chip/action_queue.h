// The simulation's calendar of model actions: every module's future actions in one queue, run by one SystemC
// method that the kernel wakes once per distinct time (a pod's chips run in step: a 1024-chip collective has about
// a thousand actions per time, and a kernel notification per module and action cost more than the models' work).
// At one time, the actions scheduled with schedule() run first, in the order they were scheduled; then arrivals
// (schedule_arrival(): what one chip's action schedules on another, a message reaching the next router) in the
// order of their keys, each followed by what it schedules for that same time (arrivals that links of zero latency
// bring at that time run in a further round, by key again). Chips act on one another only through arrivals, so what
// a chip does at one instant depends only on its own history and its links: a pod reduced to one box of chips and
// the whole pod give the same figures, and runs are deterministic.
//
// Modules hold an ActionQueue, a handle onto the calendar of the simulation running in this process (SystemC runs
// one simulation per process):
//
//   ActionQueue queue;
//   queue.schedule(sim_now() + delay, [this] { ... });
//   queue.schedule_arrival(at, key, [this] { ... });   // scheduled by another chip's action
#pragma once

#include <cstdint>
#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>
#include <systemc>
#include <vector>

#include "hw/chip/sim_time.h"

namespace podsim {

class Calendar {
 public:
  using Action = std::function<void()>;

  // The calendar of the simulation in this process, created (with its SystemC method) on first use, which must
  // be during elaboration.
  static Calendar& get();

  // `hint`: memory the action will read first (its message, its unit), fetched into the cache while the actions
  // before it run. The pod's chips take turns at each instant and each chip's state has gone cold since its last
  // turn, so without the hint every action waits for its own memory in turn.
  void schedule(const sc_core::sc_time& at, Action a, const void* hint = nullptr, const void* hint2 = nullptr) {
    const uint64_t t = std::max(at.value(), sim_now().value());
    bucket(t).now.push_back({std::move(a), hint, hint2});
    // Re-arm only for an earlier time: every notify costs the kernel a heap operation.
    if (!m_armed || t < m_armed_at) arm(t);
  }
  // An action that one module schedules on another (a message reaching the next router): it runs after the
  // actions scheduled with schedule() for the same time, and such actions run in the order of `key` (stable),
  // not in the order they were scheduled. The key names the receiver and the way in, so what a chip sees at one
  // instant does not depend on which of its neighbours the simulation happened to run first: a pod reduced to
  // one box of chips and the whole pod see the same order.
  void schedule_arrival(const sc_core::sc_time& at, uint64_t key, Action a, const void* hint = nullptr,
                        const void* hint2 = nullptr) {
    const uint64_t t = std::max(at.value(), sim_now().value());
    bucket(t).arrivals.push_back({key, {std::move(a), hint, hint2}});
    if (!m_armed || t < m_armed_at) arm(t);
  }

 private:
  Calendar();
  void run_due();
  void arm(uint64_t at);
  struct Entry {
    Action action;
    const void* hint;
    const void* hint2;
  };
  struct Arrival {
    uint64_t key;
    Entry entry;
  };
  struct Bucket {
    std::vector<Entry> now;          // schedule(), in order
    std::vector<Arrival> arrivals;  // schedule_arrival(), with their keys
  };
  // Starts fetching what an action will read: two cache lines from each of its hints (see schedule()).
  static void fetch_ahead(const Entry& e) {
    for (const void* h : {e.hint, e.hint2})
      if (h) {
        __builtin_prefetch(h);
        __builtin_prefetch(static_cast<const char*>(h) + 64);
      }
  }
  // The actions due at time `t` (SystemC time value); created when new.
  Bucket& bucket(uint64_t t) {
    if (t == m_last_time) return m_buckets[m_last_bucket];
    auto [it, fresh] = m_index.try_emplace(t, 0u);
    if (fresh) {
      if (m_free.empty()) {
        it->second = static_cast<uint32_t>(m_buckets.size());
        m_buckets.emplace_back();
      } else {
        it->second = m_free.back();
        m_free.pop_back();
      }
      m_times.push(t);
    }
    m_last_time = t;
    m_last_bucket = it->second;
    return m_buckets[it->second];
  }

  // Many actions fall on one time (the chips of a pod in step, the units of a chip on its clock edges): actions
  // are kept per time, and a heap orders the distinct times.
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<uint64_t>> m_times;
  std::unordered_map<uint64_t, uint32_t> m_index;  // time -> bucket
  std::vector<Bucket> m_buckets;
  std::vector<uint32_t> m_free;  // buckets to reuse (they keep their capacity)
  std::vector<Arrival> m_round;                         // run_due(): the arrivals of one round
  std::vector<std::pair<uint64_t, uint32_t>> m_order;  // and their order, by key
  uint64_t m_last_time = UINT64_MAX;  // the bucket last looked up
  uint32_t m_last_bucket = 0;
  sc_core::sc_event m_event;
  bool m_armed = false;     // a notification is pending
  uint64_t m_armed_at = 0;  // for this time
};

class ActionQueue {
 public:
  using Action = Calendar::Action;
  ActionQueue() : m_cal(Calendar::get()) {}
  void schedule(const sc_core::sc_time& at, Action a, const void* hint = nullptr, const void* hint2 = nullptr) {
    m_cal.schedule(at, std::move(a), hint, hint2);
  }
  void schedule_arrival(const sc_core::sc_time& at, uint64_t key, Action a, const void* hint = nullptr,
                        const void* hint2 = nullptr) {
    m_cal.schedule_arrival(at, key, std::move(a), hint, hint2);
  }

 private:
  Calendar& m_cal;
};

}  // namespace podsim
