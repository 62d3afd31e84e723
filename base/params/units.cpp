#include "base/params/units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/text.h"

namespace podsim {
namespace {

struct Unit {
  const char* name;
  double scale;
};

const std::vector<Unit>& table(Quantity kind) {
  static const std::vector<Unit> freq = {{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}, {"THz", 1e12}};
  static const std::vector<Unit> bw = {
      {"B/s", 1},          {"KB/s", 1e3},          {"MB/s", 1e6},          {"GB/s", 1e9},
      {"TB/s", 1e12},      {"KiB/s", 1024.0},      {"MiB/s", 1048576.0},   {"GiB/s", 1073741824.0},
      {"TiB/s", 1099511627776.0},                  {"bit/s", 0.125},       {"kbit/s", 1e3 / 8},
      {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8},    {"Tbit/s", 1e12 / 8},   {"Mbps", 1e6 / 8},
      {"Gbps", 1e9 / 8},   {"Tbps", 1e12 / 8}};
  static const std::vector<Unit> size = {{"B", 1},
                                         {"KB", 1e3},
                                         {"MB", 1e6},
                                         {"GB", 1e9},
                                         {"TB", 1e12},
                                         {"KiB", 1024.0},
                                         {"MiB", 1048576.0},
                                         {"GiB", 1073741824.0},
                                         {"TiB", 1099511627776.0}};
  static const std::vector<Unit> time = {{"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3},
                                         {"s", 1},      {"min", 60},  {"h", 3600}};
  switch (kind) {
    case Quantity::Frequency: return freq;
    case Quantity::Bandwidth: return bw;
    case Quantity::Size: return size;
    case Quantity::Time: return time;
  }
  return time;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

const std::vector<std::string>& units_of(Quantity kind) {
  static std::vector<std::string> lists[4];
  auto& l = lists[static_cast<int>(kind)];
  if (l.empty())
    for (const auto& u : table(kind)) l.push_back(u.name);
  return l;
}

const char* base_unit(Quantity kind) {
  switch (kind) {
    case Quantity::Frequency: return "Hz";
    case Quantity::Bandwidth: return "B/s";
    case Quantity::Size: return "B";
    case Quantity::Time: return "s";
  }
  return "";
}

const char* quantity_name(Quantity kind) {
  switch (kind) {
    case Quantity::Frequency: return "frequency";
    case Quantity::Bandwidth: return "bandwidth";
    case Quantity::Size: return "size";
    case Quantity::Time: return "time";
  }
  return "";
}

QuantityParse parse_quantity(Quantity kind, std::string_view text_in) {
  std::string text = trim(text_in);
  if (text.empty()) return {std::nullopt, "empty value"};
  // Number part: optional sign, digits, dot, exponent. strtod also accepts "nan"/"inf", checked below.
  const char* begin = text.c_str();
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin) return {std::nullopt, "'" + text + "' does not start with a number"};
  std::string unit = trim(std::string_view(end));
  if (!std::isfinite(number)) return {std::nullopt, "'" + text + "' is not a finite number"};
  if (unit.empty() && number == 0) return {0.0, {}};  // zero is zero in every unit
  if (unit.empty())
    return {std::nullopt, "'" + text + "' has no unit; write the " + std::string(quantity_name(kind)) +
                              " with one of: " + join(units_of(kind), ", ")};
  if (unit == "µs") unit = "us";
  for (const auto& u : table(kind)) {
    if (unit == u.name) return {number * u.scale, {}};
  }
  std::string near = nearest(unit, units_of(kind));
  std::string msg = "'" + unit + "' is not a unit of " + quantity_name(kind) + " (in '" + text + "')";
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  msg += " Valid units: " + join(units_of(kind), ", ");
  return {std::nullopt, msg};
}

std::string format_quantity(Quantity kind, double value) {
  // The shortest exact spelling among the kind's units ("16GB" rather than "16000000000B"); bit-based bandwidth
  // units are never chosen.
  std::string best;
  for (const auto& u : table(kind)) {
    std::string name = u.name;
    if (name.find("bit") != std::string::npos || name.find("bps") != std::string::npos) continue;
    double m = value / u.scale;
    if (value != 0 && std::fabs(m) < 1) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.12g", m);
    double back = std::strtod(buf, nullptr) * u.scale;
    if (std::fabs(back - value) > 1e-12 * std::fabs(value)) continue;
    std::string text = std::string(buf) + name;
    if (best.empty() || text.size() <= best.size()) best = text;  // ties: the larger unit, listed later
  }
  if (best.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.12g%s", value, base_unit(kind));
    best = buf;
  }
  return best;
}

}  // namespace podsim
