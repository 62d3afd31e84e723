// Conversions between seconds (double, what the timing models compute) and SystemC time (ps resolution).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <systemc>

namespace podsim {

// Process activations of the models (actions run, unit steps), for events-per-second figures.
inline uint64_t g_model_activations = 0;

// How far the simulation has got, for the progress line another thread draws (sim/engine/run_progress.h): the
// simulated time reached and the activations so far, published by the action queues with relaxed stores (a plain
// move each). Nothing in the models reads them.
inline std::atomic<double> g_progress_seconds{0};
inline std::atomic<uint64_t> g_progress_activations{0};

// The kernel's current time, without sc_time_stamp()'s call into the library: it returns a reference to the time
// of the process's one simulation context, which lives as long as the process.
inline const sc_core::sc_time& sim_now() {
  static const sc_core::sc_time& now = sc_core::sc_time_stamp();
  return now;
}
// sc_time(s, SC_SEC) without its call into the library: with the 1 ps resolution, the library rounds s x 1e12 to
// the nearest count as sc_time::operator*= (inline) does, so one picosecond times s x 1e12 gives the same time.
// Checked once on probes against the library; any other resolution takes the library's constructor.
inline sc_core::sc_time at_seconds(double s) {
  static const sc_core::sc_time one = sc_core::sc_time::from_value(1);
  static const bool picoseconds = [] {
    for (double p : {1e-12, 0.5e-12, 1.5e-12, 2.5e-12, 3.7e-9, 1.2345678901234e-3, 0.1, 7.77e-6, 123.456})
      if (sc_core::sc_time(p, sc_core::SC_SEC) != one * (p * 1e12)) return false;
    return true;
  }();
  return picoseconds ? one * (s * 1e12) : sc_core::sc_time(s, sc_core::SC_SEC);
}
// sc_time::to_seconds() without its call into the library, which the models make several times per event: SystemC
// converts a time as count x resolution (in fs) x 1e-15, and with the 1 ps resolution podsim keeps (the
// default) the same product in the same order gives the same double. Checked once on a probe against the
// library; any other resolution takes to_seconds().
inline double to_seconds(const sc_core::sc_time& t) {
  static const bool picoseconds = [] {
    const sc_core::sc_time probe = sc_core::sc_time::from_value(0x123456789abcdefull);
    return probe.to_seconds() == static_cast<double>(probe.value()) * 1000.0 * 1e-15;
  }();
  return picoseconds ? static_cast<double>(t.value()) * 1000.0 * 1e-15 : t.to_seconds();
}
inline double now_seconds() { return to_seconds(sim_now()); }
// SystemC time has picosecond resolution: a time within half a picosecond of now has been reached.
constexpr double kTimeEpsilon = 0.5e-12;
inline bool reached(double t) { return t <= now_seconds() + kTimeEpsilon; }
// Rounds a time up to a whole clock period, so units of one chip wake together (shared timestamps are cheaper).
inline double ceil_to_period(double s, double period) {
  return std::ceil(s / period - 1e-6) * period;
}

}  // namespace podsim
