// Parameters are declared once: path, type, unit, default, range and description. The declaration drives YAML
// parsing and validation (sim/config/loader), `podsim list params` and docs/config.md.
//
//   ParamSpec::quantity("hardware.chip.clock", Quantity::Frequency, "Core clock").range(1e6, 1e11);
//   ParamSpec::integer("hardware.chip.mxu.rows", "Rows of each systolic array").range(1, 4096).def("128");
//
// Values are parsed into a ParamSet: typed values keyed by path, each remembering where it came from.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/error.h"
#include "base/params/units.h"

namespace podsim {

enum class ParamType { Int, Float, Bool, String, Choice, Frequency, Bandwidth, Size, Time, IntList, BoolList, ChoiceList, TextList };

const char* param_type_name(ParamType t);  // "whole number", "frequency", ...

struct ParamSpec {
  std::string path;
  ParamType type = ParamType::String;
  std::string description;
  std::optional<std::string> default_text;  // YAML text; nullopt = required; "" = optional (may stay unset)
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  std::vector<std::string> choices;  // Choice / ChoiceList
  bool scalar_as_list = false;       // lists: a single value stands for a one-entry list
  size_t min_len = 0, max_len = 64;  // lists

  static ParamSpec integer(std::string path, std::string desc);
  static ParamSpec real(std::string path, std::string desc);
  static ParamSpec boolean(std::string path, std::string desc);
  static ParamSpec text(std::string path, std::string desc);
  static ParamSpec choice(std::string path, std::vector<std::string> choices, std::string desc);
  static ParamSpec quantity(std::string path, Quantity q, std::string desc);
  static ParamSpec int_list(std::string path, std::string desc);
  static ParamSpec bool_list(std::string path, std::string desc);
  static ParamSpec choice_list(std::string path, std::vector<std::string> choices, std::string desc);
  static ParamSpec text_list(std::string path, std::string desc);

  ParamSpec& def(std::string yaml_text) { default_text = std::move(yaml_text); return *this; }
  ParamSpec& optional() { default_text = std::string(); return *this; }
  ParamSpec& range(double lo, double hi) { min = lo; max = hi; return *this; }
  ParamSpec& positive(double hi = std::numeric_limits<double>::infinity()) {
    min = 0; min_exclusive = true; max = hi; return *this;
  }
  ParamSpec& length(size_t lo, size_t hi) { min_len = lo; max_len = hi; return *this; }
  ParamSpec& one_or_more() { scalar_as_list = true; return *this; }

  bool required() const { return !default_text.has_value(); }
  bool is_quantity() const;
  Quantity quantity_kind() const;
  std::string range_text() const;  // "> 0 and <= 10GHz", "1 to 4096", "" when unbounded
  std::string type_text() const;   // "frequency (Hz, kHz, MHz, GHz)", "one of: a, b"
  // The part of the path after the last '.'.
  std::string leaf() const;
};

using ParamData = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<bool>,
                               std::vector<std::string>>;

struct ParamValue {
  ParamSpec spec;
  ParamData data;
  SourceLocation where;
  bool set = true;  // false for an optional parameter left unset
};

// Canonical YAML text of a value ("940MHz", "[4, 4]", "true").
std::string value_text(const ParamSpec& spec, const ParamData& data);

// Parses YAML-scalar text (or a flow list such as "[4, 4]") against a spec; throws Error at `where`.
ParamData parse_param_text(const ParamSpec& spec, const std::string& text, const SourceLocation& where);

class ParamSet {
 public:
  void put(ParamValue v);
  bool has(const std::string& path) const;  // declared and set
  const ParamValue& at(const std::string& path) const;  // throws Internal when undeclared

  int64_t i(const std::string& path) const;
  double f(const std::string& path) const;  // Float and every quantity (base units); Int is widened
  bool b(const std::string& path) const;
  const std::string& s(const std::string& path) const;
  const std::vector<int64_t>& ints(const std::string& path) const;
  const std::vector<bool>& bools(const std::string& path) const;
  const std::vector<std::string>& strings(const std::string& path) const;
  const SourceLocation& where(const std::string& path) const { return at(path).where; }

  const std::map<std::string, ParamValue>& values() const { return m_values; }

 private:
  std::map<std::string, ParamValue> m_values;
};

}  // namespace podsim
