#include "sim/config/loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "base/text.h"
#include "sim/config/faults.h"
#include "sim/config/model_params.h"
#include "base/params/param_reader.h"
#include "base/params/yaml_syntax.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"


namespace podsim {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxChips = 262144;
const std::vector<std::string> kSections = {"hardware", "workload", "strategy", "mesh", "run", "search"};

struct Override {
  std::string path;
  std::string value;
  SourceLocation where;
};

std::vector<Override> parse_overrides(const std::vector<std::string>& raw) {
  std::vector<Override> out;
  for (const auto& r : raw) {
    SourceLocation where;
    where.origin = "--set " + r;
    auto eq = r.find('=');
    std::string path = eq == std::string::npos ? r : r.substr(0, eq);
    bool ok = eq != std::string::npos && !path.empty() && path.front() != '.' && path.back() != '.' &&
              path.find("..") == std::string::npos;
    for (char c : path) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
    if (!ok)
      throw Error(Err::BadOverride, where,
                  "cannot read override '" + r + "': expected path=value with a dotted key path, e.g. "
                  "--set hardware.pod.dims=[4,4]");
    out.push_back({path, r.substr(eq + 1), where});
  }
  return out;
}

YAML::Node load_yaml_text(const std::string& text, const std::string& label);

YAML::Node load_yaml_file(const std::string& path, const std::string& what) {
  std::error_code rec;
  // Regular files and pipes (`podsim run <(...)`); a device such as /dev/zero named as a preset or experiment would
  // never end, and a folder is no file.
  const fs::file_type type = fs::status(path, rec).type();
  const bool regular = type == fs::file_type::regular || type == fs::file_type::fifo;
  std::ifstream in;
  if (regular) in.open(path);
  if (!regular || !in) {
    SourceLocation w;
    w.file = path;
    std::error_code ec;  // the throwing fs::exists fails on names the OS rejects (too long, ...)
    throw Error(Err::FileUnreadable, w, "cannot open " + what + " '" + path + "': " +
                                            (fs::exists(path, ec) ? "permission denied or not a file" : "no such file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return load_yaml_text(ss.str(), path);
}

// One YAML document; a second one (after '---') is an error rather than silently ignored.
YAML::Node load_yaml_text(const std::string& text, const std::string& label) {
  SourceLocation w;
  w.file = label;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw yaml_syntax_error(text, label, e.mark.line, e.mark.column, e.msg);
  }
  if (docs.size() > 1) {
    const YAML::Mark m = docs[1].Mark();
    if (!m.is_null()) {
      w.line = m.line + 1;
      w.column = m.column + 1;
    }
    throw Error(Err::YamlSyntax, w,
                strprintf("the file holds %zu YAML documents (separated by '---'); an experiment is one document",
                          docs.size()));
  }
  return docs.empty() ? YAML::Node() : docs.front();
}

std::optional<YAML::Node> child(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  return std::nullopt;
}


std::string file_stem(const std::string& path) {
  std::string stem = fs::path(path).stem().string();
  return stem.empty() ? "experiment" : stem;
}

// Checks that only make sense across parameters.
void validate_hardware(Experiment& e, ParamReader& L) {
  ParamSet& p = L.values;
  int64_t ndim = p.i("hardware.ici.dimensions");
  const ParamValue& dims_v = p.at("hardware.pod.dims");
  std::vector<int64_t> dims = p.ints("hardware.pod.dims");
  if (dims.empty()) dims.assign(ndim, 1);
  if (static_cast<int64_t>(dims.size()) != ndim)
    throw Error(Err::PodShape, dims_v.where,
                "hardware.pod.dims has " + std::to_string(dims.size()) + " entries but the " +
                    p.s("hardware.preset") + " torus has " + std::to_string(ndim) + " dimensions; give " +
                    std::to_string(ndim) + " sizes, e.g. " + (ndim == 2 ? "[4, 4]" : "[4, 4, 4]"),
                "hardware.pod.dims");
  double chips = 1;
  for (auto d : dims) chips *= static_cast<double>(d);
  if (chips > kMaxChips)
    throw Error(Err::PodTooLarge, dims_v.where,
                strprintf("hardware.pod.dims describes %.0f chips; podsim simulates at most %lld", chips,
                          static_cast<long long>(kMaxChips)),
                "hardware.pod.dims");
  // About 64 KiB per chip of model state, plus links; refuse what this machine cannot hold.
  double need = chips * 64.0 * 1024;
  double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > 0.8 * have)
    throw Error(Err::PodTooLarge, dims_v.where,
                "a pod of " + strprintf("%.0f", chips) + " chips needs about " + format_bytes(need) +
                    " of memory to simulate; this machine has " + format_bytes(have),
                "hardware.pod.dims");
  std::vector<bool> wrap = p.bools("hardware.pod.wrap");
  const ParamValue& wrap_v = p.at("hardware.pod.wrap");
  if (wrap.empty()) wrap.assign(dims.size(), true);
  if (wrap.size() != dims.size())
    throw Error(Err::LengthMismatch, wrap_v.where,
                "hardware.pod.wrap has " + std::to_string(wrap.size()) + " entries but hardware.pod.dims has " +
                    std::to_string(dims.size()),
                "hardware.pod.wrap");
  // Record the resolved lists so config.resolved.yaml shows them.
  ParamValue dv = dims_v;
  dv.data = dims;
  p.put(dv);
  ParamValue wv = wrap_v;
  wv.data = wrap;
  p.put(wv);
  e.hardware.pod.dims = dims;
  e.hardware.pod.wrap = wrap;
}

void build_typed(Experiment& e, const ParamSet& p) {
  HardwareConfig& h = e.hardware;
  h.preset = p.s("hardware.preset");
  h.description = p.s("hardware.description");
  ChipConfig& c = h.chip;
  c.clock = p.f("hardware.chip.clock");
  c.tensorcores = p.i("hardware.chip.tensorcores");
  c.mxu.count = p.i("hardware.chip.mxu.count");
  c.mxu.rows = p.i("hardware.chip.mxu.rows");
  c.mxu.cols = p.i("hardware.chip.mxu.cols");
  c.mxu.weight_double_buffer = p.b("hardware.chip.mxu.weight_double_buffer");
  c.vpu.lanes = p.i("hardware.chip.vpu.lanes");
  c.vpu.sublanes = p.i("hardware.chip.vpu.sublanes");
  c.vpu.alus = p.i("hardware.chip.vpu.alus");
  c.vpu.transcendental_cost = p.f("hardware.chip.vpu.transcendental_cost");
  c.vpu.divide_cost = p.f("hardware.chip.vpu.divide_cost");
  c.vpu.reduce_cost = p.f("hardware.chip.vpu.reduce_cost");
  c.hbm.capacity = p.f("hardware.chip.hbm.capacity");
  c.hbm.bandwidth = p.f("hardware.chip.hbm.bandwidth");
  c.hbm.channels = p.i("hardware.chip.hbm.channels");
  c.hbm.latency = p.f("hardware.chip.hbm.latency");
  c.hbm.burst = p.f("hardware.chip.hbm.burst");
  c.hbm.row = p.f("hardware.chip.hbm.row");
  c.hbm.activate_interval = p.f("hardware.chip.hbm.activate_interval");
  c.vmem = p.f("hardware.chip.vmem.capacity");
  c.cmem = p.f("hardware.chip.cmem.capacity");
  h.ici.dimensions = p.i("hardware.ici.dimensions");
  h.ici.link_bandwidth = p.f("hardware.ici.link_bandwidth");
  h.ici.hop_latency = p.f("hardware.ici.hop_latency");
  h.ici.chunk = p.f("hardware.ici.chunk");

  RunConfig& r = e.run;
  r.name = p.has("run.name") ? p.s("run.name") : "";
  r.numeric = p.b("run.numeric");
  r.seed = static_cast<uint64_t>(p.i("run.seed"));
  r.allow_oom = p.b("run.allow_oom");
  r.max_wall = p.f("run.max_wall");
  r.trace.format = p.s("run.trace.format");
  r.trace.compress = p.b("run.trace.compress");
  r.trace.detail = p.s("run.trace.detail");
  r.trace.chips = p.ints("run.trace.chips");
  r.trace.from = p.f("run.trace.from");
  r.trace.to = p.has("run.trace.to") ? p.f("run.trace.to") : -1;
  r.trace.max_chips = p.i("run.trace.max_chips");
  r.trace.warn_events = p.i("run.trace.warn_events");
  r.combine_threshold = p.f("run.combine_threshold");
  r.stall.probability = p.f("run.stall.probability");
  r.stall.max = p.f("run.stall.max");
  h.faults = read_faults(p, h.pod, r.seed);
}

SourceLocation file_location(const std::string& file) {
  SourceLocation w;
  w.file = file;
  return w;
}

// Reads the experiment's parameters into L (preset, file, overrides), collecting errors in L. Stops early (by
// throwing) only at an error after which nothing further can be read, such as an unreadable preset.
void read_parameters(ParamReader& L, const YAML::Node& root, const std::string& file,
                     const std::vector<Override>& overrides, std::string& model,
                     std::vector<std::string>& strategy_names, std::string& preset) {
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    throw Error(Err::NotAMapping, node_location(file, root),
                std::string("the experiment file must be a mapping of keys to values, not ") +
                    (root.IsSequence() ? "a list" : "'" + root.Scalar() + "'"));
  if (root.IsNull() || !root.IsDefined())
    throw Error(Err::MissingKey, file_location(file),
                "the experiment is empty; it needs at least hardware.preset and workload.model", "");

  // Top-level sections.
  std::map<std::string, YAML::Node> section;
  std::map<std::string, SourceLocation> section_at;
  for (const ParamReader::Entry& en : L.entries(root, file, "")) {
    if (std::find(kSections.begin(), kSections.end(), en.key) == kSections.end()) {
      if (!nearest(en.key, kSections).empty()) L.suggested.insert(nearest(en.key, kSections));
      L.fail(Error(Err::UnknownKey, en.where, "unknown section '" + en.key + "' (" + suggestion(en.key, kSections) + ")",
                   en.key));
      continue;
    }
    section_at[en.key] = en.where;
    if (!en.value.IsMap() && !en.value.IsNull()) {
      L.fail(Error(Err::NotAMapping, node_location(file, en.value),
                   "'" + en.key + "' must be a mapping of keys to values, not " +
                       (en.value.IsSequence() ? std::string("a list") : "'" + en.value.Scalar() + "'"),
                   en.key));
      continue;
    }
    section[en.key] = en.value;
  }
  auto section_where = [&](const std::string& sec) {
    auto it = section_at.find(sec);
    return it == section_at.end() ? file_location(file) : it->second;
  };

  // The selectors decide which parameters exist, so read them first (an override wins). Each is "ok" when given
  // and valid; a failed one is reported once and its section is then read leniently.
  auto selector = [&](const std::string& sec, const std::string& key, std::string& out, SourceLocation& where) {
    std::string path = sec + "." + key;
    for (const auto& o : overrides)
      if (o.path == path) {
        out = o.value;
        where = o.where;
        return true;
      }
    auto sit = section.find(sec);
    if (sit == section.end()) return false;
    auto found = child(sit->second, key);
    if (!found) return false;
    const YAML::Node& n = *found;
    where = node_location(file, n);
    if (!n.IsScalar()) {
      L.fail(Error(Err::WrongType, where, path + " expects a name, got " + (n.IsMap() ? "a mapping" : "a list"), path));
      out.clear();
      return true;
    }
    out = n.Scalar();
    return true;
  };
  std::vector<Error> missing_selectors;
  SourceLocation model_w, strategy_w, preset_w, model_preset_w;
  // workload.preset: a model preset (configs/workloads/NAME.yaml) sets workload.model and the model's shape; the
  // file's keys and overrides then override it.
  std::string model_preset, model_preset_file;
  YAML::Node model_preset_node;
  const bool model_preset_named = selector("workload", "preset", model_preset, model_preset_w);
  bool model_preset_ok = model_preset_named && !model_preset.empty();
  if (model_preset_ok) {
    model_preset_file = find_model_preset(model_preset);
    if (model_preset_file.empty()) {
      std::vector<std::string> names;
      for (const auto& pi : list_model_presets()) names.push_back(pi.name);
      const std::string near = nearest(model_preset, names);
      L.fail(Error(Err::UnknownWorkload, model_preset_w,
                   "unknown model preset '" + model_preset + "' (" +
                       (near.empty() ? std::string() : "did you mean '" + near + "'? ") + "valid: " +
                       join(names, ", ") + "; `podsim list workloads` describes them)",
                   "workload.preset"));
      model_preset_ok = false;
    } else {
      YAML::Node preset_root = load_yaml_file(model_preset_file, "model preset");
      if (auto w = child(preset_root, "workload")) model_preset_node = *w;
      if (!model_preset_node.IsMap())
        throw Error(Err::NotAMapping, file_location(model_preset_file),
                    "a model preset file needs a 'workload' mapping of the values it sets");
      if (auto named = child(model_preset_node, "preset"))
        L.fail(Error(Err::UnknownKey, node_location(model_preset_file, *named),
                     "a model preset cannot name another preset ('preset' key)", "workload.preset"));
    }
  }
  bool model_ok = selector("workload", "model", model, model_w);
  if (model_ok && model_preset_ok)
    if (auto m = child(model_preset_node, "model"); m && m->IsScalar() && m->Scalar() != model) {
      L.fail(Error(Err::BadChoice, model_w,
                   "workload.model = " + model + ", but model preset '" + model_preset + "' is a " + m->Scalar() +
                       " model; leave workload.model out (the preset sets it) or the preset",
                   "workload.model"));
      model_preset_ok = false;
    }
  if (!model_ok && model_preset_ok)
    if (auto m = child(model_preset_node, "model"); m && m->IsScalar()) {
      model = m->Scalar();
      model_w = node_location(model_preset_file, *m);
      model_ok = true;
    }
  if (!model_ok && model_preset_named) {
    // The preset was reported (or names no model: then the file must).
    if (model_preset_ok)
      L.fail(Error(Err::MissingKey, file_location(model_preset_file),
                   "model preset '" + model_preset + "' sets no workload.model (add 'model: transformer' to it)",
                   "workload.model"));
  } else if (!model_ok) {
    missing_selectors.emplace_back(Err::MissingKey, section_where("workload"),
                                   "missing required key 'workload.model' (" +
                                       ParamSpec::choice("workload.model", WorkloadRegistry::instance().names(), "")
                                           .type_text() +
                                       ")",
                                   "workload.model");
  } else if (!model.empty() && !WorkloadRegistry::instance().find(model)) {
    L.fail(Error(Err::UnknownWorkload, model_w,
                 "unknown workload model '" + model + "' (" +
                     suggestion(model, WorkloadRegistry::instance().names()) + ")",
                 "workload.model"));
    model_ok = false;
  }
  model_ok = model_ok && !model.empty();
  bool preset_ok = selector("hardware", "preset", preset, preset_w);
  if (!preset_ok)
    missing_selectors.emplace_back(Err::MissingKey, section_where("hardware"),
                                   "missing required key 'hardware.preset' (one of the presets in `podsim list "
                                   "hardware`, or a preset file)",
                                   "hardware.preset");
  preset_ok = preset_ok && !preset.empty();
  std::string preset_file = preset_ok ? find_preset(preset) : "";
  if (preset_ok && preset_file.empty()) {
    std::vector<std::string> names;
    for (const auto& pi : list_presets()) names.push_back(pi.name);
    L.fail(Error(Err::UnknownPreset, preset_w,
                 "unknown hardware preset '" + preset + "' (" + suggestion(preset, names) + ")", "hardware.preset"));
    preset_ok = false;
  }
  // strategy.name: one name, or a list of strategies composed in one experiment (each owning its mesh axes).
  bool strategy_ok = true;
  strategy_names = {"auto"};
  {
    std::optional<YAML::Node> node;
    for (const auto& o : overrides)
      if (o.path == "strategy.name") {
        strategy_w = o.where;
        try {
          node = YAML::Load(o.value);
        } catch (const YAML::Exception& ex) {
          L.fail(Error(Err::WrongType, o.where, "strategy.name: cannot read '" + o.value + "': " + ex.msg,
                       "strategy.name"));
          strategy_ok = false;
        }
      }
    if (!node && strategy_ok && section.count("strategy"))
      if (auto found = child(section["strategy"], "name")) {
        node = *found;
        strategy_w = node_location(file, *node);
      }
    if (node) {
      strategy_names.clear();
      if (node->IsScalar()) {
        strategy_names.push_back(node->Scalar());
      } else if (node->IsSequence() && node->size() > 0) {
        for (size_t i = 0; i < node->size() && strategy_ok; ++i) {
          if (!(*node)[i].IsScalar()) {
            L.fail(Error(Err::WrongType, strategy_w, "strategy.name lists strategy names, e.g. [data_parallel, spmd]",
                         "strategy.name"));
            strategy_ok = false;
          } else {
            strategy_names.push_back((*node)[i].Scalar());
          }
        }
      } else {
        L.fail(Error(Err::WrongType, strategy_w,
                     "strategy.name expects a strategy name or a list of them, e.g. data_parallel or "
                     "[data_parallel, spmd]",
                     "strategy.name"));
        strategy_ok = false;
      }
    }
  }
  std::vector<std::string> strategies = StrategyRegistry::instance().names();
  strategies.insert(strategies.begin(), "auto");
  for (const std::string& strategy : strategy_names) {
    if (!strategy_ok) break;
    std::string problem;
    if (std::find(strategies.begin(), strategies.end(), strategy) == strategies.end())
      problem = "unknown strategy '" + strategy + "' (" + suggestion(strategy, strategies) + ")";
    else if ((strategy == "auto" || strategy == "single_device" || strategy == "replicate") &&
             strategy_names.size() > 1)
      problem = "strategy '" + strategy + "' places the whole step by itself and cannot be composed with others; "
                "compose sharding strategies such as [data_parallel, spmd]";
    else if (std::count(strategy_names.begin(), strategy_names.end(), strategy) > 1)
      problem = "strategy '" + strategy + "' is listed twice";
    if (!problem.empty()) {
      L.fail(Error(Err::UnknownStrategy, strategy_w, problem, "strategy.name"));
      strategy_ok = false;
    }
  }

  L.schema = experiment_schema(model_ok ? model : "", strategy_ok ? strategy_names : std::vector<std::string>{"auto"});
  // Selectors that failed were reported once; their values are not read again.
  std::set<std::string> skip;
  if (!model_ok) skip.insert("workload.model");
  if (!preset_ok) skip.insert("hardware.preset");
  if (!strategy_ok) skip.insert("strategy.name");
  if (!model_ok)
    for (const auto* entry : WorkloadRegistry::instance().entries())
      for (const ParamSpec& spec : entry->make()->params()) L.lenient["workload"].insert(spec.path);
  if (!strategy_ok || !model_ok)
    for (const auto* entry : StrategyRegistry::instance().entries())
      for (const ParamSpec& spec : entry->make()->params()) L.lenient["strategy"].insert(spec.path);

  // Defaults.
  for (const auto& spec : L.schema.specs()) {
    if (!spec.default_text) continue;
    SourceLocation dw;
    dw.origin = "default";
    if (spec.default_text->empty()) {
      L.values.put({spec, std::string(), dw, false});
      continue;
    }
    L.values.put({spec, parse_param_text(spec, *spec.default_text, dw), dw, true});
  }

  // Preset.
  if (preset_ok) {
    YAML::Node preset_root = load_yaml_file(preset_file, "hardware preset");
    if (auto named = child(preset_root, "preset"))
      L.fail(Error(Err::UnknownKey, node_location(preset_file, *named),
                   "a preset file cannot name another preset ('preset' key)", "hardware.preset"));
    L.walk(preset_root, "hardware", preset_file, skip);
  }

  // The model preset's values, then the experiment file, then overrides.
  if (model_preset_ok) {
    std::set<std::string> preset_skip = skip;
    preset_skip.insert("workload.preset");
    L.walk(model_preset_node, "workload", model_preset_file, preset_skip);
  }
  for (const auto& sec : kSections) {
    if (!section.count(sec)) continue;
    L.group_where[sec] = section_where(sec);
    L.walk(section[sec], sec, file, skip);
  }
  for (const auto& o : overrides) {
    if (skip.count(o.path)) continue;
    const ParamSpec* spec = L.schema.find(o.path);
    if (!spec) {
      auto group = L.lenient.find(o.path.substr(0, o.path.find('.')));
      if (group != L.lenient.end() && group->second.count(o.path)) continue;
      // Suggest among the keys of the same group (a typo is in the last part); when the group itself is unknown,
      // among every path.
      const size_t dot = o.path.rfind('.');
      const std::string prefix = dot == std::string::npos ? "" : o.path.substr(0, dot);
      const std::vector<std::string> siblings = L.schema.children(prefix);
      std::string hint;
      if (!prefix.empty() && !siblings.empty()) {
        std::string near = nearest(o.path.substr(dot + 1), siblings);
        hint = near.empty() ? "valid keys in '" + prefix + "': " + join(siblings, ", ")
                            : "did you mean '" + prefix + "." + near + "'?";
      } else {
        std::string near = nearest(o.path, L.schema.paths());
        hint = near.empty() ? "no key is close; `podsim list params` lists them" : "did you mean '" + near + "'?";
      }
      L.fail(Error(Err::UnknownKey, o.where, "unknown key '" + o.path + "' (" + hint + ")", o.path));
      continue;
    }
    L.given.insert(o.path);
    try {
      L.values.put({*spec, parse_param_text(*spec, o.value, o.where), o.where, true});
    } catch (const Error& e) {
      L.fail(e);
    }
  }
  // The preset as resolved (the file may name it by path).
  if (preset_ok) {
    ParamValue pv = L.values.at("hardware.preset");
    pv.data = preset;
    L.values.put(pv);
  }

  // Required parameters: not those a misspelled key already points at, nor those of a section whose selector
  // failed (they depend on it).
  for (Error& e : missing_selectors)
    if (!L.suggested.count(e.key_path())) L.fail(std::move(e));
  for (const auto& spec : L.schema.specs()) {
    if (!spec.required() || L.given.count(spec.path) || L.values.values().count(spec.path) ||
        L.suggested.count(spec.path))
      continue;
    if (skip.count(spec.path)) continue;
    if ((!preset_ok && spec.path.rfind("hardware.", 0) == 0) || (!model_ok && spec.path.rfind("workload.", 0) == 0))
      continue;
    std::string group = spec.path.substr(0, spec.path.rfind('.'));
    SourceLocation w = file_location(file);
    for (std::string g = group; !g.empty(); g = g.substr(0, g.rfind('.') == std::string::npos ? 0 : g.rfind('.'))) {
      if (L.group_where.count(g)) {
        w = L.group_where[g];
        break;
      }
      if (g.find('.') == std::string::npos) break;
    }
    L.fail(Error(Err::MissingKey, w,
                 "missing required key '" + spec.path + "' (" + spec.type_text() +
                     (spec.range_text().empty() ? "" : ", " + spec.range_text()) + ": " + spec.description + ")",
                 spec.path));
  }
}

// workload.bn_group (replicas per batch-norm group) as the workload's bn_batch (examples per group), now that the
// data axis is known. Returns whether it set bn_batch.
bool resolve_bn_group(Experiment& e, const Mesh& mesh) {
  const auto& values = e.params.values();
  const auto it = values.find("workload.bn_group");
  if (it == values.end() || !it->second.set || e.params.i("workload.bn_group") == 0) return false;
  const int64_t group = e.params.i("workload.bn_group"), data = mesh.axis_size("data");
  const SourceLocation& where = it->second.where;
  if (e.params.where("workload.bn_batch").origin != "default")
    throw Error(Err::StrategyMismatch, where,
                "workload.bn_group and workload.bn_batch both size the batch-norm groups (replicas, examples); "
                "set one of them",
                "workload.bn_group");
  if (mesh.axis_index("data") < 0)
    throw Error(Err::StrategyMismatch, where,
                "workload.bn_group counts data-parallel replicas, but the mesh has no `data` axis (axes: " +
                    join(mesh.names(), ", ") + "); use workload.bn_batch (examples per group) instead",
                "workload.bn_group");
  if (data % group != 0)
    throw Error(Err::NotDivisible, where,
                "workload.bn_group = " + std::to_string(group) + " replicas does not divide the data axis of " +
                    std::to_string(data) + "; choose a divisor of " + std::to_string(data),
                "workload.bn_group");
  const int64_t batch = e.params.i("workload.batch");
  if (batch % data != 0) return false;  // the strategy's own error names the batch
  ParamValue v = e.params.at("workload.bn_batch");
  v.data = group * (batch / data);
  v.where = where;
  e.params.put(v);
  return true;
}

Experiment load(const YAML::Node& file_root, const std::string& file, const std::string& stem, const LoadOptions& opts) {
  ParamReader L;
  std::vector<Override> overrides = parse_overrides(opts.overrides);
  YAML::Node root = file_root;
  if (opts.single_device) {
    root = YAML::Clone(file_root);
    if (root.IsMap()) {
      root.remove("mesh");
      root.remove("strategy");
      root["strategy"]["name"] = "single_device";
    }
    overrides.erase(std::remove_if(overrides.begin(), overrides.end(),
                                   [](const Override& o) {
                                     return o.path.rfind("strategy.", 0) == 0 || o.path.rfind("mesh.", 0) == 0;
                                   }),
                    overrides.end());
  }
  std::string model, preset;
  std::vector<std::string> strategy_names;
  try {
    read_parameters(L, root, file, overrides, model, strategy_names, preset);
  } catch (const Error& e) {
    L.fail(e);  // what could not be read further, reported after what was found before it
  }
  L.throw_if_failed();

  std::unique_ptr<IWorkload> workload = WorkloadRegistry::instance().make(model);
  std::vector<std::string> resolved_strategies = strategy_names;
  if (resolved_strategies.front() == "auto") resolved_strategies = {workload->default_strategy()};
  std::vector<std::unique_ptr<IStrategy>> strats;
  for (const std::string& s : resolved_strategies) {
    strats.push_back(StrategyRegistry::instance().make(s));
    if (!strats.back()) throw Error(Err::Internal, "workload '" + model + "' names unknown default strategy " + s);
  }

  Experiment e;
  e.source_file = file;
  e.workload = model;
  e.strategies = resolved_strategies;
  e.strategy = join(resolved_strategies, "+");
  validate_hardware(e, L);
  if (!L.values.has("run.name")) {
    SourceLocation dw;
    dw.origin = "default";
    L.values.put({*L.schema.find("run.name"), stem, dw, true});
  }
  build_typed(e, L.values);
  e.params = L.values;
  read_model_params(e);
  e.specs = L.schema.specs();
  workload->validate(e.params);
  for (const auto& st : strats) st->validate(e.params);
  if (resolve_bn_group(e, plan_mesh(e))) workload->validate(e.params);
  return e;
}

}  // namespace

Schema experiment_schema(const std::string& workload, const std::vector<std::string>& strategy) {
  Schema s;
  s.add_all(hardware_param_specs());
  std::vector<std::string> models = WorkloadRegistry::instance().names();
  s.add(ParamSpec::text("workload.preset",
                        "Model preset: a name from `podsim list workloads` (configs/workloads/NAME.yaml) or a path to "
                        "a preset file. It sets workload.model and the model's shape; sibling keys override its "
                        "values.")
            .optional());
  s.add(ParamSpec::choice("workload.model", models, "The workload family; `podsim list workloads` describes each."));
  std::unique_ptr<IWorkload> w = WorkloadRegistry::instance().make(workload);
  std::vector<std::string> resolved = strategy;
  if (w) {
    s.add_all(w->params());
    if (!resolved.empty() && resolved.front() == "auto") resolved = {w->default_strategy()};
  }
  std::vector<std::string> strategies = StrategyRegistry::instance().names();
  strategies.insert(strategies.begin(), "auto");
  s.add(ParamSpec::choice_list("strategy.name", strategies,
                               "How the step is placed on the pod: one strategy, or a list composed in one experiment "
                               "(each owning its mesh axes); auto picks the workload's default.")
            .one_or_more()
            .length(1, 8)
            .def("auto"));
  // Parameters of composed strategies may be shared (declared identically by several); the first declaration wins.
  for (const std::string& name : resolved)
    if (auto st = StrategyRegistry::instance().make(name))
      for (auto& spec : st->params())
        if (!s.find(spec.path)) s.add(spec);
  s.add_all(mesh_param_specs());
  s.add_all(run_param_specs());
  s.add_all(search_param_specs());
  return s;
}

Experiment load_experiment(const std::string& path, const LoadOptions& opts) {
  YAML::Node root = load_yaml_file(path, "experiment file");
  return load(root, path, file_stem(path), opts);
}

double model_preset_parameter_count(const std::string& name) {
  const Experiment e = load_experiment_text(
      "hardware: {preset: tpu-v4, pod: {dims: [1, 1, 1]}}\nworkload: {preset: \"" + name + "\", batch: 1}\n",
      "preset " + name);
  const ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  double n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += static_cast<double>(t.elements());
  return n;
}

Experiment load_experiment_text(const std::string& yaml, const std::string& label, const LoadOptions& opts) {
  return load(load_yaml_text(yaml, label), label, file_stem(label), opts);
}

}  // namespace podsim
