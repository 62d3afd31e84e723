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

inline sc_core::sc_time at_seconds(double s) { return sc_core::sc_time(s, sc_core::SC_SEC); }
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
inline double now_seconds() { return to_seconds(sc_core::sc_time_stamp()); }
// SystemC time has picosecond resolution: a time within half a picosecond of now has been reached.
constexpr double kTimeEpsilon = 0.5e-12;
inline bool reached(double t) { return t <= now_seconds() + kTimeEpsilon; }
// Rounds a time up to a whole clock period, so units of one chip wake together (shared timestamps are cheaper).
inline double ceil_to_period(double s, double period) {
  return std::ceil(s / period - 1e-6) * period;
}

}  // namespace podsim
