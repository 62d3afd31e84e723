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
inline double now_seconds() { return sc_core::sc_time_stamp().to_seconds(); }
// SystemC time has picosecond resolution: a time within half a picosecond of now has been reached.
constexpr double kTimeEpsilon = 0.5e-12;
inline bool reached(double t) { return t <= now_seconds() + kTimeEpsilon; }
// Rounds a time up to a whole clock period, so units of one chip wake together (shared timestamps are cheaper).
inline double ceil_to_period(double s, double period) {
  return std::ceil(s / period - 1e-6) * period;
}

}  // namespace podsim
