#include "sim/sweep/plot_axis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "sim/config/loader.h"

namespace podsim {
namespace {

enum class Kind { Plain, Time, Bytes, Bandwidth, Frequency, Share };

struct Known {
  const char* label;
  Kind kind;
};

// The default figures of results.db (docs/sweeps.md), and the run's wall time.
const std::map<std::string, Known>& known_figures() {
  static const std::map<std::string, Known> m = {
      {"step_time_s", {"step time", Kind::Time}},
      {"mfu", {"MFU", Kind::Share}},
      {"mxu_busy", {"MXU busy", Kind::Share}},
      {"vpu_busy", {"VPU busy", Kind::Share}},
      {"hbm_busy", {"HBM busy", Kind::Share}},
      {"ici_busy", {"ICI busy", Kind::Share}},
      {"peak_memory_bytes", {"peak memory", Kind::Bytes}},
      {"bubble_fraction", {"pipeline bubble", Kind::Share}},
      {"exposed_comm_fraction", {"exposed communication", Kind::Share}},
      {"chips", {"chips", Kind::Plain}},
      {"tokens_per_s_per_chip", {"tokens/s per chip", Kind::Plain}},
      {"wall_s", {"wall time of the run", Kind::Time}},
  };
  return m;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::optional<Kind> kind_of_quantity(const ParamSpec& s) {
  switch (s.type) {
    case ParamType::Time: return Kind::Time;
    case ParamType::Size: return Kind::Bytes;
    case ParamType::Bandwidth: return Kind::Bandwidth;
    case ParamType::Frequency: return Kind::Frequency;
    default: return std::nullopt;
  }
}

// A parameter's declared unit: in the schema of any registered workload, with every registered strategy (the
// schema's own choices of workload.model and strategy.name list them).
std::optional<Kind> parameter_kind(const std::string& path) {
  const Schema any = experiment_schema("", {});
  if (const ParamSpec* s = any.find(path)) return kind_of_quantity(*s);
  std::vector<std::string> strategies;
  if (const ParamSpec* st = any.find("strategy.name"))
    for (const auto& c : st->choices)
      if (c != "auto") strategies.push_back(c);
  if (const ParamSpec* models = any.find("workload.model"))
    for (const auto& m : models->choices) {
      const Schema schema = experiment_schema(m, strategies);  // alive while its spec is read
      if (const ParamSpec* s = schema.find(path)) return kind_of_quantity(*s);
    }
  return std::nullopt;
}

std::string words(std::string s) {
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// Another figure: its name without the unit suffix, in words, and its kind.
Known figure_kind(const std::string& column, std::string& label) {
  static const std::vector<std::pair<std::string, Kind>> suffixes = {
      {"_s", Kind::Time}, {"_bytes", Kind::Bytes}, {"_Bps", Kind::Bandwidth}, {"_hz", Kind::Frequency},
      {"_Hz", Kind::Frequency}};
  for (const auto& [tail, kind] : suffixes)
    if (ends_with(column, tail) && column.size() > tail.size()) {
      label = words(column.substr(0, column.size() - tail.size()));
      return {nullptr, kind};
    }
  label = words(column);
  for (const char* share : {"fraction", "_busy", "efficiency", "utilization", "mfu"})
    if (column.find(share) != std::string::npos) return {nullptr, Kind::Share};
  return {nullptr, Kind::Plain};
}

struct Unit {
  const char* name;
  double size;  // in the stored unit
};

// The largest unit the biggest value reaches (so 0.0021 s is 2.1 ms), or the smallest.
Unit pick(const std::vector<Unit>& units, const std::vector<double>& values) {
  double big = 0;
  for (double v : values) big = std::max(big, std::abs(v));
  for (const Unit& u : units)
    if (big >= u.size) return u;
  return units.back();
}

}  // namespace

AxisScale axis_scale(const std::string& column, const std::vector<double>& values) {
  std::string label = column;
  Kind kind = Kind::Plain;
  if (auto it = known_figures().find(column); it != known_figures().end()) {
    label = it->second.label;
    kind = it->second.kind;
  } else if (column.find('.') != std::string::npos) {  // a parameter: its key path, as the sweep file names it
    kind = parameter_kind(column).value_or(Kind::Plain);
  } else {
    kind = figure_kind(column, label).kind;
  }
  Unit u{"", 1};
  switch (kind) {
    case Kind::Plain: return {label, 1, label};
    case Kind::Share: return {label + " (%)", 100, label};
    case Kind::Time: u = pick({{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}, values); break;
    case Kind::Bytes: u = pick({{"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024}, {"B", 1}}, values); break;
    case Kind::Bandwidth: u = pick({{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"B/s", 1}}, values); break;
    case Kind::Frequency: u = pick({{"GHz", 1e9}, {"MHz", 1e6}, {"kHz", 1e3}, {"Hz", 1}}, values); break;
  }
  return {label + " (" + u.name + ")", 1 / u.size, label};
}

}  // namespace podsim
