#include "base/params/param.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/text.h"
#include "base/params/param_yaml.h"

namespace podsim {

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "whole number";
    case ParamType::Float: return "number";
    case ParamType::Bool: return "boolean";
    case ParamType::String: return "text";
    case ParamType::Choice: return "choice";
    case ParamType::Frequency: return "frequency";
    case ParamType::Bandwidth: return "bandwidth";
    case ParamType::Size: return "size";
    case ParamType::Time: return "time";
    case ParamType::IntList: return "list of whole numbers";
    case ParamType::BoolList: return "list of booleans";
    case ParamType::ChoiceList: return "list of choices";
    case ParamType::TextList: return "list of texts";
  }
  return "?";
}

static ParamSpec make(std::string path, ParamType t, std::string desc) {
  ParamSpec s;
  s.path = std::move(path);
  s.type = t;
  s.description = std::move(desc);
  return s;
}

ParamSpec ParamSpec::integer(std::string p, std::string d) { return make(std::move(p), ParamType::Int, std::move(d)); }
ParamSpec ParamSpec::real(std::string p, std::string d) { return make(std::move(p), ParamType::Float, std::move(d)); }
ParamSpec ParamSpec::boolean(std::string p, std::string d) { return make(std::move(p), ParamType::Bool, std::move(d)); }
ParamSpec ParamSpec::text(std::string p, std::string d) { return make(std::move(p), ParamType::String, std::move(d)); }
ParamSpec ParamSpec::choice(std::string p, std::vector<std::string> c, std::string d) {
  ParamSpec s = make(std::move(p), ParamType::Choice, std::move(d));
  s.choices = std::move(c);
  return s;
}
ParamSpec ParamSpec::quantity(std::string p, Quantity q, std::string d) {
  ParamType t = q == Quantity::Frequency   ? ParamType::Frequency
                : q == Quantity::Bandwidth ? ParamType::Bandwidth
                : q == Quantity::Size      ? ParamType::Size
                                           : ParamType::Time;
  return make(std::move(p), t, std::move(d));
}
ParamSpec ParamSpec::int_list(std::string p, std::string d) { return make(std::move(p), ParamType::IntList, std::move(d)); }
ParamSpec ParamSpec::bool_list(std::string p, std::string d) { return make(std::move(p), ParamType::BoolList, std::move(d)); }
ParamSpec ParamSpec::text_list(std::string p, std::string d) { return make(std::move(p), ParamType::TextList, std::move(d)); }
ParamSpec ParamSpec::choice_list(std::string p, std::vector<std::string> c, std::string d) {
  ParamSpec s = make(std::move(p), ParamType::ChoiceList, std::move(d));
  s.choices = std::move(c);
  return s;
}

bool ParamSpec::is_quantity() const {
  return type == ParamType::Frequency || type == ParamType::Bandwidth || type == ParamType::Size ||
         type == ParamType::Time;
}

Quantity ParamSpec::quantity_kind() const {
  switch (type) {
    case ParamType::Frequency: return Quantity::Frequency;
    case ParamType::Bandwidth: return Quantity::Bandwidth;
    case ParamType::Size: return Quantity::Size;
    default: return Quantity::Time;
  }
}

std::string ParamSpec::leaf() const {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

static std::string bound_text(const ParamSpec& s, double v) {
  if (s.is_quantity()) return format_quantity(s.quantity_kind(), v);
  return strprintf("%.12g", v);
}

std::string ParamSpec::range_text() const {
  bool has_lo = std::isfinite(min), has_hi = std::isfinite(max);
  if (!has_lo && !has_hi) return "";
  if (has_lo && has_hi && !min_exclusive) return "from " + bound_text(*this, min) + " to " + bound_text(*this, max);
  std::string out;
  if (has_lo) out += (min_exclusive ? "> " : ">= ") + bound_text(*this, min);
  if (has_hi) out += std::string(has_lo ? " and " : "") + "<= " + bound_text(*this, max);
  return out;
}

std::string ParamSpec::type_text() const {
  if (type == ParamType::Choice) return "one of: " + join(choices, ", ");
  if (type == ParamType::ChoiceList) return "list, each one of: " + join(choices, ", ");
  if (is_quantity())
    return std::string(param_type_name(type)) + " (" + join(units_of(quantity_kind()), ", ") + ")";
  return param_type_name(type);
}

// ---- parsing ------------------------------------------------------------------------------------------------

static bool looks_not_finite(std::string t) {
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t = t.substr(1);
  if (!t.empty() && t[0] == '.') t = t.substr(1);
  return t == "nan" || t == "inf" || t == "infinity";
}

static std::string show(const std::string& text) { return "'" + text + "'"; }

static void check_range(const ParamSpec& spec, double v, const std::string& text, const SourceLocation& where) {
  bool low = spec.min_exclusive ? !(v > spec.min) : v < spec.min;
  if (low || v > spec.max)
    throw Error(Err::OutOfRange, where,
                spec.path + " = " + text + " is out of range: must be " + spec.range_text(), spec.path);
}

static int64_t parse_int(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  if (looks_not_finite(text))
    throw Error(Err::NotFinite, where, spec.path + " = " + show(text) + " is not a finite number", spec.path);
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  bool digits = i < text.size();
  for (size_t j = i; j < text.size(); ++j) digits = digits && std::isdigit(static_cast<unsigned char>(text[j]));
  if (!digits) {
    char* end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    std::string why = (end && *end == '\0' && !text.empty() && std::isfinite(d)) ? " (a fraction is not allowed)" : "";
    throw Error(Err::WrongType, where,
                spec.path + " expects a whole number, got " + show(text) + why, spec.path);
  }
  errno = 0;
  long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE)
    throw Error(Err::OutOfRange, where, spec.path + " = " + text + " is out of range: must be " +
                                            (spec.range_text().empty() ? "a 64-bit integer" : spec.range_text()),
                spec.path);
  check_range(spec, static_cast<double>(v), text, where);
  return v;
}

static double parse_float(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  if (looks_not_finite(text))
    throw Error(Err::NotFinite, where, spec.path + " = " + show(text) + " is not a finite number", spec.path);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw Error(Err::WrongType, where, spec.path + " expects a number, got " + show(text), spec.path);
  if (!std::isfinite(v))
    throw Error(Err::OutOfRange, where, spec.path + " = " + text + " is out of range", spec.path);
  check_range(spec, v, text, where);
  return v;
}

static bool parse_bool(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw Error(Err::WrongType, where, spec.path + " expects true or false, got " + show(text), spec.path);
}

static std::string parse_choice(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  if (std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end()) return text;
  throw Error(Err::BadChoice, where,
              spec.path + " = " + show(text) + " is not one of the choices; " + suggestion(text, spec.choices),
              spec.path);
}

static double parse_quantity_value(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  if (looks_not_finite(text))
    throw Error(Err::NotFinite, where, spec.path + " = " + show(text) + " is not a finite number", spec.path);
  QuantityParse q = parse_quantity(spec.quantity_kind(), text);
  if (!q.value) {
    Err e = q.problem.find("finite") != std::string::npos ? Err::NotFinite : Err::BadUnit;
    throw Error(e, where, spec.path + ": " + q.problem, spec.path);
  }
  check_range(spec, *q.value, text, where);
  if (spec.type == ParamType::Size && *q.value != std::floor(*q.value))
    throw Error(Err::WrongType, where, spec.path + " = " + text + " is not a whole number of bytes", spec.path);
  return *q.value;
}

static std::string node_kind(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (n.IsNull()) return "nothing (null)";
  return "'" + n.Scalar() + "'";
}

SourceLocation node_location(const std::string& file, const YAML::Node& node) {
  SourceLocation loc;
  loc.file = file;
  auto m = node.Mark();
  if (m.line >= 0) {
    loc.line = m.line + 1;
    loc.column = m.column + 1;
  }
  return loc;
}

static bool is_list_type(ParamType t) {
  return t == ParamType::IntList || t == ParamType::BoolList || t == ParamType::ChoiceList ||
         t == ParamType::TextList;
}

ParamData parse_param_node(const ParamSpec& spec, const YAML::Node& node, const SourceLocation& where) {
  if (is_list_type(spec.type)) {
    if (spec.scalar_as_list && node.IsScalar()) {
      YAML::Node one(YAML::NodeType::Sequence);
      one.push_back(node);
      return parse_param_node(spec, one, where);
    }
    if (!node.IsSequence())
      throw Error(Err::WrongType, where,
                  spec.path + " expects a " + param_type_name(spec.type) + " such as [4, 4], got " + node_kind(node),
                  spec.path);
    if (node.size() < spec.min_len || node.size() > spec.max_len)
      throw Error(Err::OutOfRange, where,
                  spec.path + " has " + std::to_string(node.size()) + " entries; it must have " +
                      (spec.min_len == spec.max_len ? std::to_string(spec.min_len)
                                                    : std::to_string(spec.min_len) + " to " + std::to_string(spec.max_len)),
                  spec.path);
    std::vector<int64_t> ints;
    std::vector<bool> bools;
    std::vector<std::string> strs;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& item = node[i];
      if (!item.IsScalar())
        throw Error(Err::WrongType, where, spec.path + "[" + std::to_string(i) + "] expects a single value, got " +
                                               node_kind(item), spec.path);
      SourceLocation iw = where.file.empty() || where.line == 0 ? where : node_location(where.file, item);
      if (spec.type == ParamType::IntList) ints.push_back(parse_int(spec, item.Scalar(), iw));
      else if (spec.type == ParamType::BoolList) bools.push_back(parse_bool(spec, item.Scalar(), iw));
      else if (spec.type == ParamType::TextList) strs.push_back(item.Scalar());
      else strs.push_back(parse_choice(spec, item.Scalar(), iw));
    }
    if (spec.type == ParamType::IntList) return ints;
    if (spec.type == ParamType::BoolList) return bools;
    return strs;
  }
  if (!node.IsScalar()) {
    if (spec.type == ParamType::String && node.IsNull()) return std::string();
    throw Error(Err::WrongType, where,
                spec.path + " expects a " + param_type_name(spec.type) + ", got " + node_kind(node), spec.path);
  }
  const std::string& text = node.Scalar();
  switch (spec.type) {
    case ParamType::Int: return parse_int(spec, text, where);
    case ParamType::Float: return parse_float(spec, text, where);
    case ParamType::Bool: return parse_bool(spec, text, where);
    case ParamType::String: return text;
    case ParamType::Choice: return parse_choice(spec, text, where);
    default: return parse_quantity_value(spec, text, where);
  }
}

ParamData parse_param_text(const ParamSpec& spec, const std::string& text, const SourceLocation& where) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(Err::WrongType, where, spec.path + ": cannot read value '" + text + "': " + e.msg, spec.path);
  }
  if (!node.IsDefined() || node.IsNull()) {
    if (spec.type == ParamType::String) return std::string();
    if (is_list_type(spec.type) && spec.min_len == 0) node = YAML::Load("[]");
  }
  return parse_param_node(spec, node, where);
}

std::string value_text(const ParamSpec& spec, const ParamData& data) {
  switch (spec.type) {
    case ParamType::Int: return std::to_string(std::get<int64_t>(data));
    case ParamType::Float: {
      // The shortest spelling that reads back to the same double, so config.resolved.yaml reproduces the run.
      double v = std::get<double>(data);
      std::string t;
      for (int digits = 12; digits <= 17; ++digits) {
        t = strprintf("%.*g", digits, v);
        if (std::strtod(t.c_str(), nullptr) == v) break;
      }
      return t;
    }
    case ParamType::Bool: return std::get<bool>(data) ? "true" : "false";
    case ParamType::String: case ParamType::Choice: return std::get<std::string>(data);
    case ParamType::IntList: {
      std::vector<std::string> p;
      for (auto v : std::get<std::vector<int64_t>>(data)) p.push_back(std::to_string(v));
      return "[" + join(p, ", ") + "]";
    }
    case ParamType::BoolList: {
      std::vector<std::string> p;
      for (bool v : std::get<std::vector<bool>>(data)) p.push_back(v ? "true" : "false");
      return "[" + join(p, ", ") + "]";
    }
    case ParamType::ChoiceList: return "[" + join(std::get<std::vector<std::string>>(data), ", ") + "]";
    case ParamType::TextList: {
      // Double-quoted, so brackets, commas and colons inside an entry read back as text.
      std::vector<std::string> p;
      for (const std::string& v : std::get<std::vector<std::string>>(data)) {
        std::string q = "\"";
        for (char c : v) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
        p.push_back(q + "\"");
      }
      return "[" + join(p, ", ") + "]";
    }
    default: return format_quantity(spec.quantity_kind(), std::get<double>(data));
  }
}

// ---- ParamSet ----------------------------------------------------------------------------------------------

void ParamSet::put(ParamValue v) {
  std::string key = v.spec.path;
  m_values[key] = std::move(v);
}

bool ParamSet::has(const std::string& path) const {
  auto it = m_values.find(path);
  return it != m_values.end() && it->second.set;
}

const ParamValue& ParamSet::at(const std::string& path) const {
  auto it = m_values.find(path);
  if (it == m_values.end()) throw Error(Err::Internal, "parameter '" + path + "' read but never declared");
  if (!it->second.set) throw Error(Err::Internal, "optional parameter '" + path + "' read while unset");
  return it->second;
}

int64_t ParamSet::i(const std::string& path) const { return std::get<int64_t>(at(path).data); }
double ParamSet::f(const std::string& path) const {
  const auto& d = at(path).data;
  if (auto* p = std::get_if<int64_t>(&d)) return static_cast<double>(*p);
  return std::get<double>(d);
}
bool ParamSet::b(const std::string& path) const { return std::get<bool>(at(path).data); }
const std::string& ParamSet::s(const std::string& path) const { return std::get<std::string>(at(path).data); }
const std::vector<int64_t>& ParamSet::ints(const std::string& path) const {
  return std::get<std::vector<int64_t>>(at(path).data);
}
const std::vector<bool>& ParamSet::bools(const std::string& path) const {
  return std::get<std::vector<bool>>(at(path).data);
}
const std::vector<std::string>& ParamSet::strings(const std::string& path) const {
  return std::get<std::vector<std::string>>(at(path).data);
}

}  // namespace podsim
