#include "sim/sweep/run_name.h"

#include <algorithm>

#include "base/text.h"

namespace podsim {
namespace {

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+' || c == '=';
}

// A parameter's value as a name part: "64MiB", "tpu-v4", "4x4".
std::string value_part(const ParamValue& v) {
  std::string t = value_text(v.spec, v.data);
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') {
    std::string inner = t.substr(1, t.size() - 2), out;
    for (char c : inner) {
      if (c == ',') out += 'x';
      else if (c != ' ') out += c;
    }
    return out;
  }
  return t;
}

std::vector<std::string> param_paths(const Experiment& e) {
  std::vector<std::string> p;
  for (const auto& [path, v] : e.params.values())
    if (v.set) p.push_back(path);
  return p;
}

}  // namespace

std::string render_run_name(const RunNameContext& c) {
  auto fail = [&](const std::string& msg) { throw Error(Err::SweepTemplate, c.where, c.run_label + ": " + msg); };
  std::string raw;
  if (c.tmpl.empty()) {
    std::vector<std::string> parts;
    for (const auto& path : c.swept_paths)
      if (c.exp.params.has(path)) parts.push_back(value_part(c.exp.params.at(path)));  // not serving.prefill.*
    raw = parts.empty() ? c.sweep : join(parts, "-");
  } else {
    for (size_t i = 0; i < c.tmpl.size(); ++i) {
      char ch = c.tmpl[i];
      if (ch == '}') fail("run_name '" + c.tmpl + "' has a '}' without its '{'");
      if (ch != '{') {
        raw += ch;
        continue;
      }
      size_t close = c.tmpl.find('}', i);
      if (close == std::string::npos) fail("run_name '" + c.tmpl + "' has a '{' without its '}'");
      std::string key = c.tmpl.substr(i + 1, close - i - 1);
      i = close;
      const size_t cond = key.find(":+");
      if (cond != std::string::npos) {
        // {key.path:+TEXT}: TEXT when the run sets the parameter to true (or to another value than false, 0 or
        // nothing), else nothing, also when the run has no such parameter (a strategy option in a sweep over
        // strategies).
        const std::string path = key.substr(0, cond), text = key.substr(cond + 2);
        if (path.empty()) fail("run_name placeholder '{" + key + "}' names no parameter before ':+'");
        if (c.exp.params.has(path)) {
          const std::string v = value_part(c.exp.params.at(path));
          if (v != "false" && v != "0" && !v.empty()) raw += text;
        }
        continue;
      }
      if (key == "index") {
        std::string width = std::to_string(c.total > 0 ? c.total - 1 : 0);
        std::string n = std::to_string(c.index);
        raw += std::string(width.size() > n.size() ? width.size() - n.size() : 0, '0') + n;
      } else if (key == "sweep") {
        raw += c.sweep;
      } else if (c.exp.params.has(key)) {
        raw += value_part(c.exp.params.at(key));
      } else {
        std::vector<std::string> names = param_paths(c.exp);
        names.push_back("index");
        names.push_back("sweep");
        std::string near = nearest(key, names);
        fail("run_name placeholder '{" + key + "}' names no parameter of this run" +
             (near.empty() ? " (use {key.path} of a parameter, {index} or {sweep})" : " (did you mean '{" + near + "}'?)"));
      }
    }
  }
  std::string name;
  for (char ch : raw) name += name_char(ch) ? ch : '_';
  if (name.empty() || name.front() == '.')
    fail("run_name '" + c.tmpl + "' gives the name '" + name + "', which cannot name a folder");
  if (name.size() > 200) fail("run_name gives a name of " + std::to_string(name.size()) + " characters; keep it under 200");
  return name;
}

}  // namespace podsim
