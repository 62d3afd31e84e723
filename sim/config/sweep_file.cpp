#include "sim/config/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/text.h"
#include "base/params/param_yaml.h"
#include "base/params/yaml_syntax.h"

namespace podsim {
namespace fs = std::filesystem;

const std::vector<SweepFigure>& default_sweep_figures() {
  static const std::vector<SweepFigure> figures = {
      {"step_time_s", "/step_time_s", {}},
      {"mfu", "/mfu", {}},
      {"hfu", "/hfu", {}},
      {"samples_per_s", "/samples_per_s", {}},
      {"tokens_per_s", "/tokens_per_s", {}},
      {"mxu_busy", "/busy_fraction/mxu", {}},
      {"hbm_busy", "/busy_fraction/hbm", {}},
      {"ici_busy", "/busy_fraction/ici", {}},
      {"peak_memory_bytes", "/peak_memory_bytes", {}},
      {"bubble_fraction", "/pipeline/bubble_fraction", {}},
      {"exposed_comm_fraction", "/communication/exposed_fraction", {}},
      {"chips", "/chips", {}},
  };
  return figures;
}

const std::vector<SweepFigure>& serving_sweep_figures() {
  static const std::vector<SweepFigure> figures = {
      {"output_tokens_per_s", "/serving/output_tokens_per_s", {}},
      {"requests_per_s", "/serving/requests_per_s", {}},
      {"ttft_mean_s", "/serving/ttft_s/mean", {}},
      {"ttft_p50_s", "/serving/ttft_s/p50", {}},
      {"ttft_p99_s", "/serving/ttft_s/p99", {}},
      {"tpot_mean_s", "/serving/tpot_s/mean", {}},
      {"tpot_p99_s", "/serving/tpot_s/p99", {}},
      {"itl_p50_s", "/serving/itl_s/p50", {}},
      {"itl_p99_s", "/serving/itl_s/p99", {}},
      {"e2e_mean_s", "/serving/e2e_s/mean", {}},
      {"kv_transfer_mean_s", "/serving/disaggregated/kv_transfer_s/mean", {}},
  };
  return figures;
}

namespace {

const std::vector<std::string> kSections = {"name", "base", "set", "grid", "zip", "runs", "run_name", "figures"};
// results.db columns that are not figures (sim/sweep/results_db.cpp); a figure may not take their names.
const std::vector<std::string> kMetaColumns = {"run_index", "name",  "status",   "exit_code", "signal",    "timed_out",
                                               "wall_s",    "host",  "finished", "error",     "config_sha"};

struct Entry {
  std::string key;
  YAML::Node key_node, value;
};

struct Reader {
  std::string file;
  SweepFile out;
  std::map<std::string, std::pair<SourceLocation, std::string>> owner;  // key path -> where set, by which section

  SourceLocation at(const YAML::Node& n) const { return node_location(file, n); }

  std::vector<Entry> entries(const YAML::Node& node, const std::string& what) {
    std::vector<Entry> v;
    if (!node.IsMap())
      throw Error(Err::NotAMapping, at(node), what + " must be a mapping of keys to values");
    std::map<std::string, int> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      YAML::Node k = it->first;
      if (!k.IsScalar()) throw Error(Err::WrongType, at(k), "keys must be plain words in " + what);
      auto [pos, fresh] = seen.emplace(k.Scalar(), at(k).line);
      if (!fresh)
        throw Error(Err::DuplicateKey, at(k),
                    "duplicated key '" + k.Scalar() + "' in " + what + " (first given at line " +
                        std::to_string(pos->second) + ")");
      v.push_back({k.Scalar(), k, it->second});
    }
    return v;
  }

  static bool valid_path(const std::string& p) {
    if (p.empty() || p.front() == '.' || p.back() == '.' || p.find("..") != std::string::npos) return false;
    return std::all_of(p.begin(), p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    });
  }

  static std::string flow_text(const YAML::Node& n) {
    if (n.IsNull()) return "";
    YAML::Emitter e;
    e.SetMapFormat(YAML::Flow);
    e.SetSeqFormat(YAML::Flow);
    e << n;
    return e.c_str();
  }

  // Appends key = value to `point`, flattening a mapping value into its leaves.
  void flatten(const std::string& path, const YAML::Node& key, const YAML::Node& value, SweepPoint& point) {
    if (!valid_path(path))
      throw Error(Err::WrongType, at(key),
                  "'" + path + "' is not a key path (dotted words, e.g. workload.batch or hardware.pod.dims)");
    if (value.IsMap()) {
      if (value.size() == 0) throw Error(Err::WrongType, at(value), "'" + path + "' is an empty mapping: it sets nothing");
      for (const auto& e : entries(value, "'" + path + "'")) flatten(path + "." + e.key, e.key_node, e.value, point);
      return;
    }
    for (const auto& v : point)
      if (v.path == path)
        throw Error(Err::DuplicateKey, at(key),
                    "'" + path + "' is set twice in one run (first at line " + std::to_string(v.key_where.line) + ")");
    point.push_back({path, flow_text(value), at(key), at(value)});
  }

  // A key path may belong to one section only: a run's value must not depend on which one wins. `points` are
  // one section's (or one axis's) points; each leaf path is claimed once.
  void claim(const std::vector<SweepPoint>& points, const std::string& section) {
    std::map<std::string, SourceLocation> mine;
    for (const auto& p : points)
      for (const auto& v : p) mine.emplace(v.path, v.key_where);
    for (const auto& [path, where] : mine) {
      auto it = owner.find(path);
      if (it != owner.end())
        throw Error(Err::DuplicateKey, where,
                    "'" + path + "' is already set by " + it->second.second + " at line " +
                        std::to_string(it->second.first.line) +
                        "; a key may be set by only one of set, grid, zip and runs, and swept by one axis");
    }
    for (const auto& [path, where] : mine) owner.emplace(path, std::make_pair(where, section));
  }

  // A non-empty list of values for `key` (grid and zip).
  std::vector<YAML::Node> value_list(const Entry& e, const std::string& section) {
    if (!e.value.IsSequence() || e.value.size() == 0)
      throw Error(Err::WrongType, at(e.value.IsNull() ? e.key_node : e.value),
                  section + " values must be a non-empty list, e.g. " + e.key + ": [1, 2, 4] (for a list-valued "
                  "key, a list of lists: [[4, 4], [8, 8]])");
    return std::vector<YAML::Node>(e.value.begin(), e.value.end());
  }

  void grid(const YAML::Node& node) {
    for (const auto& e : entries(node, "grid")) {
      SweepAxis axis{SweepAxis::Kind::Grid, {e.key}, {}, at(e.key_node)};
      for (const auto& v : value_list(e, "grid")) {
        SweepPoint p;
        flatten(e.key, e.key_node, v, p);
        axis.points.push_back(p);
      }
      claim(axis.points, "grid");
      out.axes.push_back(axis);
    }
  }

  void zip_group(const YAML::Node& node) {
    SweepAxis axis{SweepAxis::Kind::Zip, {}, {}, at(node)};
    size_t n = 0;
    std::string first;
    for (const auto& e : entries(node, "zip")) {
      std::vector<YAML::Node> values = value_list(e, "zip");
      if (axis.keys.empty()) {
        n = values.size();
        first = e.key;
        axis.points.resize(n);
      } else if (values.size() != n) {
        throw Error(Err::LengthMismatch, at(e.value),
                    strprintf("zipped lists must have the same length: '%s' has %zu values but '%s' has %zu",
                              e.key.c_str(), values.size(), first.c_str(), n));
      }
      axis.keys.push_back(e.key);
      for (size_t i = 0; i < n; ++i) flatten(e.key, e.key_node, values[i], axis.points[i]);
    }
    if (axis.keys.empty()) throw Error(Err::WrongType, at(node), "a zip group must name at least one key");
    claim(axis.points, "zip");
    out.axes.push_back(axis);
  }

  void runs(const YAML::Node& node) {
    if (!node.IsSequence() || node.size() == 0)
      throw Error(Err::WrongType, at(node), "runs must be a non-empty list of mappings, e.g. runs: [{workload.batch: 8}]");
    SweepAxis axis{SweepAxis::Kind::Runs, {}, {}, at(node)};
    for (const auto& item : node) {
      SweepPoint p;
      if (!item.IsNull())
        for (const auto& e : entries(item, "a runs entry")) flatten(e.key, e.key_node, e.value, p);
      for (const auto& v : p)
        if (std::find(axis.keys.begin(), axis.keys.end(), v.path) == axis.keys.end()) axis.keys.push_back(v.path);
      axis.points.push_back(p);
    }
    claim(axis.points, "runs");
    out.axes.push_back(axis);
  }

  void figures(const YAML::Node& node) {
    for (const auto& e : entries(node, "figures")) {
      bool ok = !e.key.empty() && !std::isdigit(static_cast<unsigned char>(e.key[0])) &&
                std::all_of(e.key.begin(), e.key.end(),
                            [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
      if (!ok || std::find(kMetaColumns.begin(), kMetaColumns.end(), e.key) != kMetaColumns.end())
        throw Error(Err::WrongType, at(e.key_node),
                    "figure column '" + e.key + "' must be a word of letters, digits and '_' and not one of " +
                        join(kMetaColumns, ", "));
      std::string ptr = e.value.IsScalar() ? e.value.Scalar() : "";
      bool valid = !ptr.empty() && ptr.front() == '/';
      for (size_t i = 0; valid && i < ptr.size(); ++i)
        if (ptr[i] == '~') valid = i + 1 < ptr.size() && (ptr[i + 1] == '0' || ptr[i + 1] == '1');
      if (!valid)
        throw Error(Err::WrongType, at(e.value),
                    "figure '" + e.key + "' needs a JSON pointer into summary.json, e.g. /busy_fraction/vpu");
      out.figures.push_back({e.key, ptr, at(e.value)});
    }
  }

  // The inline base as text in which every byte outside the base node is blanked, so positions stay those of
  // the sweep file. Needs a block-style file (the base ends where the next top-level key starts).
  std::string inline_base(const YAML::Node& root, const YAML::Node& base) {
    size_t begin = static_cast<size_t>(base.Mark().pos), end = out.text.size();
    bool after = false;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (after) {
        end = static_cast<size_t>(it->first.Mark().pos);
        break;
      }
      after = it->first.Scalar() == "base";
    }
    if (root.Style() != YAML::EmitterStyle::Block || base.Mark().pos < 0 || end < begin) {
      // A flow-style sweep file: fall back to the base re-emitted (positions then refer to that text).
      YAML::Emitter e;
      e << base;
      return e.c_str();
    }
    std::string t = out.text;
    for (size_t i = 0; i < t.size(); ++i)
      if ((i < begin || i >= end) && t[i] != '\n') t[i] = ' ';
    return t;
  }
};

}  // namespace

SweepFile load_sweep_file(const std::string& path) {
  Reader r;
  r.file = path;
  r.out.path = path;
  SourceLocation fw;
  fw.file = path;
  std::error_code ec;
  std::ifstream in;
  if (fs::is_regular_file(path, ec)) in.open(path);
  if (!in)
    throw Error(Err::FileUnreadable, fw,
                "cannot open sweep file '" + path + "': " + (fs::exists(path, ec) ? "not a readable file" : "no such file"));
  std::stringstream ss;
  ss << in.rdbuf();
  r.out.text = ss.str();
  YAML::Node root;
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(r.out.text);
    if (docs.size() > 1) throw Error(Err::YamlSyntax, r.at(docs[1]), "a sweep file is one YAML document (found '---')");
    if (!docs.empty()) root = docs.front();
  } catch (const YAML::ParserException& e) {
    throw yaml_syntax_error(r.out.text, path, e.mark.line, e.mark.column, e.msg);
  }
  if (!root.IsDefined() || root.IsNull())
    throw Error(Err::MissingKey, fw, "the sweep file is empty; it needs at least base: (an experiment file or mapping)");
  std::string stem = fs::path(path).stem().string();
  r.out.name = stem.empty() ? "sweep" : stem;

  bool have_base = false;
  for (const auto& e : r.entries(root, "the sweep file")) {
    const std::string& k = e.key;
    if (std::find(kSections.begin(), kSections.end(), k) == kSections.end())
      throw Error(Err::UnknownKey, r.at(e.key_node), "unknown sweep key '" + k + "' (" + suggestion(k, kSections) + ")");
    if (k == "name") {
      std::string n = e.value.IsScalar() ? e.value.Scalar() : "";
      bool ok = !n.empty() && n[0] != '.' && std::all_of(n.begin(), n.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
      });
      if (!ok)
        throw Error(Err::WrongType, r.at(e.value),
                    "the sweep name must be a folder name of letters, digits and _ - . + (it names results/<name>)");
      r.out.name = n;
    } else if (k == "base") {
      have_base = true;
      r.out.base_where = r.at(e.value);
      if (e.value.IsScalar()) {
        fs::path p = e.value.Scalar();
        if (p.is_relative()) p = fs::path(path).parent_path() / p;
        r.out.base_path = p.lexically_normal().string();
      } else if (e.value.IsMap()) {
        r.out.base_text = r.inline_base(root, e.value);
      } else {
        throw Error(Err::WrongType, r.at(e.value.IsNull() ? e.key_node : e.value),
                    "base must be an experiment file (a path relative to the sweep file) or an experiment mapping "
                    "(hardware:, workload:, ...)");
      }
    } else if (k == "set") {
      for (const auto& s : r.entries(e.value, "set")) r.flatten(s.key, s.key_node, s.value, r.out.set);
      r.claim({r.out.set}, "set");
    } else if (k == "grid") {
      r.grid(e.value);
    } else if (k == "zip") {
      if (e.value.IsSequence()) {
        for (const auto& g : e.value) r.zip_group(g);
      } else {
        r.zip_group(e.value);
      }
    } else if (k == "runs") {
      r.runs(e.value);
    } else if (k == "run_name") {
      if (!e.value.IsScalar() || e.value.Scalar().empty())
        throw Error(Err::WrongType, r.at(e.value.IsNull() ? e.key_node : e.value),
                    "run_name must be a template such as \"{workload.op}-{hardware.pod.dims}\"");
      r.out.run_name = e.value.Scalar();
      r.out.run_name_where = r.at(e.value);
    } else if (k == "figures") {
      r.figures(e.value);
    }
  }
  if (!have_base)
    throw Error(Err::MissingKey, fw, "missing required key 'base' (an experiment file relative to the sweep file, or an "
                                     "inline experiment mapping)");
  return r.out;
}

}  // namespace podsim
