// The models' calendar (hw/chip/action_queue.h): actions at one time run in the order they were scheduled, after
// any earlier time; arrivals run after the plain actions of their time, in the order of their keys whatever the
// order they were scheduled in, each followed by what it schedules for that same time.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <systemc>
#include <vector>

#include "hw/chip/action_queue.h"
#include "hw/chip/sim_time.h"

using namespace podsim;

namespace {

// Schedules `plan` from a process at time 0, records what runs and when.
struct Bench : sc_core::sc_module {
  SC_HAS_PROCESS(Bench);
  ActionQueue queue;
  std::vector<std::string> log;
  std::function<void(Bench&)> plan;
  Bench(sc_core::sc_module_name n, std::function<void(Bench&)> p) : sc_module(n), plan(std::move(p)) { SC_METHOD(go); }
  void go() { plan(*this); }
  ActionQueue::Action note(const std::string& what) {
    return [this, what] { log.push_back(what + "@" + std::to_string(static_cast<int>(now_seconds() * 1e9 + 0.5))); };
  }
};

sc_core::sc_time ns(double t) { return sc_core::sc_time(t, sc_core::SC_NS); }

}  // namespace

TEST(CalendarTest, ActionsRunByTimeThenInTheOrderScheduled) {
  Bench b("b", [](Bench& b) {
    b.queue.schedule(ns(5), b.note("c"));
    b.queue.schedule(ns(2), b.note("a"));
    b.queue.schedule(ns(5), [&b] {
      b.log.push_back("d@5");
      b.queue.schedule(sc_core::sc_time_stamp(), b.note("f"));  // scheduled for now: after what is already due
    });
    b.queue.schedule(ns(5), b.note("e"));
    b.queue.schedule(ns(2), b.note("b"));
  });
  sc_core::sc_start();
  EXPECT_EQ(b.log, (std::vector<std::string>{"a@2", "b@2", "c@5", "d@5", "e@5", "f@5"}));
}

TEST(CalendarTest, ArrivalsRunAfterTheInstantsActionsInKeyOrder) {
  Bench b("b", [](Bench& b) {
    b.queue.schedule_arrival(ns(3), 7, b.note("arrival7"));
    b.queue.schedule_arrival(ns(3), 2, [&b] {
      b.log.push_back("arrival2@3");
      b.queue.schedule(sc_core::sc_time_stamp(), b.note("after2"));  // runs before the next arrival
    });
    b.queue.schedule_arrival(ns(3), 7, b.note("arrival7b"));  // same key: in the order scheduled
    b.queue.schedule(ns(3), b.note("local"));                 // scheduled last, runs first
    b.queue.schedule_arrival(ns(1), 9, b.note("early"));
  });
  sc_core::sc_start();
  EXPECT_EQ(b.log, (std::vector<std::string>{"early@1", "local@3", "arrival2@3", "after2@3", "arrival7@3",
                                             "arrival7b@3"}));
}

// Links of zero latency: an arrival that schedules another arrival for the same time. The new one runs in a round of
// its own, after the arrivals already due (and what they schedule), in key order among its round.
TEST(CalendarTest, ArrivalsOfZeroLatencyRunInALaterRound) {
  Bench b("b", [](Bench& b) {
    b.queue.schedule_arrival(ns(4), 5, [&b] {
      b.log.push_back("first5@4");
      b.queue.schedule_arrival(sc_core::sc_time_stamp(), 1, b.note("forwarded1"));
    });
    b.queue.schedule_arrival(ns(4), 8, b.note("first8"));
  });
  sc_core::sc_start();
  EXPECT_EQ(b.log, (std::vector<std::string>{"first5@4", "first8@4", "forwarded1@4"}));
}

// Hints (memory an action reads first, fetched while earlier actions run) change nothing but speed: the same order
// with them, whatever they point to, memory that is not the program's or nothing at all.
TEST(CalendarTest, HintsLeaveTheOrderAlone) {
  static int data[64];
  Bench b("b", [](Bench& b) {
    // Memory that is not the program's: an address in the first page, which is never mapped.
    const void* gone = reinterpret_cast<const void*>(std::uintptr_t{64});
    for (int i = 0; i < 6; ++i)
      b.queue.schedule(ns(2), b.note("a" + std::to_string(i)), i % 2 ? &data[i] : gone, i % 3 ? nullptr : &data[0]);
    b.queue.schedule_arrival(ns(2), 4, b.note("arrival4"), &data[1], gone);
    b.queue.schedule_arrival(ns(2), 3, b.note("arrival3"), nullptr, &data[2]);
  });
  sc_core::sc_start();
  EXPECT_EQ(b.log, (std::vector<std::string>{"a0@2", "a1@2", "a2@2", "a3@2", "a4@2", "a5@2", "arrival3@2",
                                             "arrival4@2"}));
}
