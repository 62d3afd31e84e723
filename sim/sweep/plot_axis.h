// How `podsim sweep plot` labels an axis: a name a person reads and the unit its numbers are drawn in, chosen from
// the column and the size of its values. results.db holds SI units (seconds, bytes, Hz, B/s) and fractions; a plot
// shows milliseconds, MiB, GB/s and percent.
//
//   AxisScale a = axis_scale("step_time_s", {0.0021, 0.0035});   // {"step time (ms)", 1e3}
//   AxisScale m = axis_scale("mfu", {0.41});                      // {"MFU (%)", 100}
//   AxisScale b = axis_scale("workload.bytes", {4194304});        // {"workload.bytes (MiB)", 1 / 2^20}
//
// The kind of a column: the default figures by name; other figures by their suffix (_s: time, _bytes: bytes, _Bps:
// bandwidth, _hz: frequency; fraction, _busy, efficiency, utilization, mfu: a share); a swept parameter by the
// unit it is declared with (base/params/schema.cpp, a workload's or a strategy's params()).
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct AxisScale {
  std::string label;   // "step time (ms)", "MFU (%)", "chips"
  double factor = 1;   // drawn value = stored value x factor
  std::string name;    // the label without its unit: "step time"
};

AxisScale axis_scale(const std::string& column, const std::vector<double>& values);

}  // namespace podsim
