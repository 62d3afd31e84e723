// resolved_yaml (declared in sim/config/loader.h): the fully resolved experiment written back as YAML that loads to
// the same experiment, each value commented with where it came from.
#include <sstream>
#include <string>
#include <vector>

#include "base/text.h"
#include "sim/config/loader.h"
#include "base/params/param.h"
#include "base/params/units.h"

namespace podsim {

// A quantity spelled so that it reads back to exactly `v`. format_quantity (for people) rounds to 12 digits, so a
// capacity of 1234567890123B was written as "1177375.68867MiB": another value, and not a whole number of bytes, so
// the resolved file did not load (found by tools/fuzz). Use its spelling when exact, else the shortest exact one.
static std::string exact_quantity(Quantity kind, double v) {
  auto exact = [&](const std::string& t) {
    QuantityParse q = parse_quantity(kind, t);
    return q.value && *q.value == v;
  };
  std::string best = format_quantity(kind, v);
  if (exact(best)) return best;
  best = strprintf("%.17g%s", v, base_unit(kind));  // always exact
  for (const auto& unit : units_of(kind)) {
    QuantityParse scale = parse_quantity(kind, "1" + unit);
    for (int digits = 12; digits <= 17 && scale.value; ++digits) {
      std::string t = strprintf("%.*g", digits, v / *scale.value) + unit;
      if (t.size() < best.size() && exact(t)) best = t;
    }
  }
  return best;
}

static std::string yaml_scalar(const ParamSpec& spec, const ParamValue& v) {
  if (spec.is_quantity()) return exact_quantity(spec.quantity_kind(), std::get<double>(v.data));
  std::string t = value_text(spec, v.data);
  if (spec.type == ParamType::String) {
    // Double-quoted, with control characters escaped: a raw line break inside quotes folds into a space when the
    // file is read back (found by tools/fuzz with a multi-line hardware.description).
    std::string q = "\"";
    for (char c : t) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) q += strprintf("\\x%02x", static_cast<unsigned char>(c));
      else q += c;
    }
    return q + "\"";
  }
  return t;
}

std::string resolved_yaml(const Experiment& e, bool with_origins) {
  std::ostringstream out;
  out << "# Resolved experiment: every parameter with its value";
  if (with_origins) out << " and where it came from";
  out << ".\n# podsim run accepts this file as it is.\n";
  std::vector<std::string> open;  // current nesting of groups
  for (const auto& spec : e.specs) {
    auto it = e.params.values().find(spec.path);
    if (it == e.params.values().end() || !it->second.set) continue;
    if (spec.path.rfind("search.", 0) == 0) continue;  // what podsim search explores, not part of a run
    std::vector<std::string> parts;
    std::stringstream ss(spec.path);
    for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << std::string(2 * i, ' ') << parts[i] << ":\n";
      open.push_back(parts[i]);
    }
    std::string value = yaml_scalar(spec, it->second);
    std::string comment = with_origins ? it->second.where.str() : "";
    // strategy.name: auto is written as the strategy it chose, so the file says what ran; its origin keeps auto.
    // (Without origins the file is then a fixed point: it loads back to itself.)
    if (spec.path == "strategy.name" && value == "[auto]" && !e.strategies.empty()) {
      value = bracketed(e.strategies);
      if (with_origins)
        comment += std::string(comment.empty() ? "" : ": ") + "chosen by auto (the workload's default strategy)";
    }
    std::string line = std::string(2 * (parts.size() - 1), ' ') + parts.back() + ": " + value;
    if (!comment.empty()) {
      if (line.size() < 60) line += std::string(60 - line.size(), ' ');
      line += "  # " + comment;
    }
    out << line << "\n";
  }
  // serving.prefill: the prefill layout's strategy and mesh sections, as its own resolved experiment has them.
  if (!e.prefill_phase.empty()) {
    if (open.empty() || open.front() != "serving") out << "serving:\n";
    out << "  prefill:\n";
    std::stringstream in(e.prefill_phase);
    bool keep = false;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      if (line[0] != ' ') keep = line.rfind("strategy:", 0) == 0 || line.rfind("mesh:", 0) == 0;
      if (keep) out << "    " << line << "\n";
    }
  }
  return out.str();
}

}  // namespace podsim
