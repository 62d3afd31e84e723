// Every parameter of an experiment (loader_impl.h), in layers, lowest first: defaults, the hardware preset, the model
// preset, the experiment file, --set overrides; then the required ones that none of them gave.
#include <set>

#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/config/loader_impl.h"
#include "strategies/i_strategy.h"
#include "workloads/i_workload.h"

namespace podsim::loader_detail {

void read_parameters(ParamReader& L, const YAML::Node& root, const std::string& file,
                     const std::vector<Override>& overrides, std::string& model,
                     std::vector<std::string>& strategy_names, std::string& preset) {
  const Sections sections = read_sections(L, root, file);
  Selection sel = read_selectors(L, sections, overrides);
  model = sel.model;
  strategy_names = sel.strategy_names;
  preset = sel.preset;

  L.schema = experiment_schema(sel.model_ok ? sel.model : "",
                               sel.strategy_ok ? sel.strategy_names : std::vector<std::string>{"auto"});
  // A serving run chooses every iteration's batch itself (sim/serving/): the models' workload.batch is not asked for.
  bool serving = sections.node.count("serving") > 0;
  for (const auto& o : overrides) serving = serving || o.path.rfind("serving.", 0) == 0;
  if (serving) L.schema.set_default("workload.batch", "1");
  // Selectors that failed were reported once; their values are not read again.
  std::set<std::string> skip;
  if (!sel.model_ok) skip.insert("workload.model");
  if (!sel.preset_ok) skip.insert("hardware.preset");
  if (!sel.strategy_ok) skip.insert("strategy.name");
  if (!sel.model_ok)
    for (const auto* entry : WorkloadRegistry::instance().entries())
      for (const ParamSpec& spec : entry->make()->params()) L.lenient["workload"].insert(spec.path);
  if (!sel.strategy_ok || !sel.model_ok)
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
  if (sel.preset_ok) {
    YAML::Node preset_root = load_yaml_file(sel.preset_file, "hardware preset");
    if (auto named = child(preset_root, "preset"))
      L.fail(Error(Err::UnknownKey, node_location(sel.preset_file, *named),
                   "a preset file cannot name another preset ('preset' key)", "hardware.preset"));
    L.walk(preset_root, "hardware", sel.preset_file, skip);
  }

  // The model preset's values, then the experiment file, then overrides.
  if (sel.model_preset_ok) {
    std::set<std::string> preset_skip = skip;
    preset_skip.insert("workload.preset");
    L.walk(sel.model_preset_node, "workload", sel.model_preset_file, preset_skip);
  }
  for (const auto& sec : kSections) {
    if (!sections.node.count(sec)) continue;
    L.group_where[sec] = sections.where(sec);
    L.walk(sections.node.at(sec), sec, file, skip);
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
  if (sel.preset_ok) {
    ParamValue pv = L.values.at("hardware.preset");
    pv.data = sel.preset;
    L.values.put(pv);
  }

  // Required parameters: not those a misspelled key already points at, nor those of a section whose selector
  // failed (they depend on it).
  for (Error& e : sel.missing)
    if (!L.suggested.count(e.key_path())) L.fail(std::move(e));
  for (const auto& spec : L.schema.specs()) {
    if (!spec.required() || L.given.count(spec.path) || L.values.values().count(spec.path) ||
        L.suggested.count(spec.path))
      continue;
    if (skip.count(spec.path)) continue;
    if ((!sel.preset_ok && spec.path.rfind("hardware.", 0) == 0) ||
        (!sel.model_ok && spec.path.rfind("workload.", 0) == 0))
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

}  // namespace podsim::loader_detail
