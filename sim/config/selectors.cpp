// The experiment file's sections and its selectors (loader_impl.h): workload.preset, workload.model, hardware.preset
// and strategy.name decide which parameters exist, so they are read first (an override wins).
#include <algorithm>

#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/config/loader_impl.h"
#include "strategies/i_strategy.h"
#include "workloads/i_workload.h"

namespace podsim::loader_detail {

SourceLocation Sections::where(const std::string& sec) const {
  auto it = at.find(sec);
  return it == at.end() ? file_location(file) : it->second;
}

Sections read_sections(ParamReader& L, const YAML::Node& root, const std::string& file) {
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    throw Error(Err::NotAMapping, node_location(file, root),
                std::string("the experiment file must be a mapping of keys to values, not ") +
                    (root.IsSequence() ? "a list" : "'" + root.Scalar() + "'"));
  if (root.IsNull() || !root.IsDefined())
    throw Error(Err::MissingKey, file_location(file),
                "the experiment is empty; it needs at least hardware.preset and workload.model", "");

  Sections sections;
  sections.file = file;
  for (const ParamReader::Entry& en : L.entries(root, file, "")) {
    if (std::find(kSections.begin(), kSections.end(), en.key) == kSections.end()) {
      if (!nearest(en.key, kSections).empty()) L.suggested.insert(nearest(en.key, kSections));
      L.fail(Error(Err::UnknownKey, en.where, "unknown section '" + en.key + "' (" + suggestion(en.key, kSections) + ")",
                   en.key));
      continue;
    }
    sections.at[en.key] = en.where;
    if (!en.value.IsMap() && !en.value.IsNull()) {
      L.fail(Error(Err::NotAMapping, node_location(file, en.value),
                   "'" + en.key + "' must be a mapping of keys to values, not " +
                       (en.value.IsSequence() ? std::string("a list") : "'" + en.value.Scalar() + "'"),
                   en.key));
      continue;
    }
    sections.node[en.key] = en.value;
  }
  return sections;
}

Selection read_selectors(ParamReader& L, const Sections& sections, const std::vector<Override>& overrides) {
  Selection sel;
  // One selector's value and where it was given (an override wins); false when it was not.
  auto selector = [&](const std::string& sec, const std::string& key, std::string& out, SourceLocation& where) {
    std::string path = sec + "." + key;
    for (const auto& o : overrides)
      if (o.path == path) {
        out = o.value;
        where = o.where;
        return true;
      }
    auto sit = sections.node.find(sec);
    if (sit == sections.node.end()) return false;
    auto found = child(sit->second, key);
    if (!found) return false;
    const YAML::Node& n = *found;
    where = node_location(sections.file, n);
    if (!n.IsScalar()) {
      L.fail(Error(Err::WrongType, where, path + " expects a name, got " + (n.IsMap() ? "a mapping" : "a list"), path));
      out.clear();
      return true;
    }
    out = n.Scalar();
    return true;
  };
  SourceLocation model_w, strategy_w, preset_w, model_preset_w;
  // workload.preset: a model preset (configs/workloads/NAME.yaml) sets workload.model and the model's shape; the
  // file's keys and overrides then override it.
  const bool model_preset_named = selector("workload", "preset", sel.model_preset, model_preset_w);
  sel.model_preset_ok = model_preset_named && !sel.model_preset.empty();
  if (sel.model_preset_ok) {
    sel.model_preset_file = find_model_preset(sel.model_preset);
    if (sel.model_preset_file.empty()) {
      std::vector<std::string> names;
      for (const auto& pi : list_model_presets()) names.push_back(pi.name);
      const std::string near = nearest(sel.model_preset, names);
      L.fail(Error(Err::UnknownWorkload, model_preset_w,
                   "unknown model preset '" + sel.model_preset + "' (" +
                       (near.empty() ? std::string() : "did you mean '" + near + "'? ") + "valid: " +
                       join(names, ", ") + "; `podsim list workloads` describes them)",
                   "workload.preset"));
      sel.model_preset_ok = false;
    } else {
      YAML::Node preset_root = load_yaml_file(sel.model_preset_file, "model preset");
      if (auto w = child(preset_root, "workload")) sel.model_preset_node = *w;
      if (!sel.model_preset_node.IsMap())
        throw Error(Err::NotAMapping, file_location(sel.model_preset_file),
                    "a model preset file needs a 'workload' mapping of the values it sets");
      if (auto named = child(sel.model_preset_node, "preset"))
        L.fail(Error(Err::UnknownKey, node_location(sel.model_preset_file, *named),
                     "a model preset cannot name another preset ('preset' key)", "workload.preset"));
    }
  }
  sel.model_ok = selector("workload", "model", sel.model, model_w);
  if (sel.model_ok && sel.model_preset_ok)
    if (auto m = child(sel.model_preset_node, "model"); m && m->IsScalar() && m->Scalar() != sel.model) {
      L.fail(Error(Err::BadChoice, model_w,
                   "workload.model = " + sel.model + ", but model preset '" + sel.model_preset + "' is a " +
                       m->Scalar() + " model; leave workload.model out (the preset sets it) or the preset",
                   "workload.model"));
      sel.model_preset_ok = false;
    }
  if (!sel.model_ok && sel.model_preset_ok)
    if (auto m = child(sel.model_preset_node, "model"); m && m->IsScalar()) {
      sel.model = m->Scalar();
      model_w = node_location(sel.model_preset_file, *m);
      sel.model_ok = true;
    }
  if (!sel.model_ok && model_preset_named) {
    // The preset was reported (or names no model: then the file must).
    if (sel.model_preset_ok)
      L.fail(Error(Err::MissingKey, file_location(sel.model_preset_file),
                   "model preset '" + sel.model_preset + "' sets no workload.model (add 'model: transformer' to it)",
                   "workload.model"));
  } else if (!sel.model_ok) {
    sel.missing.emplace_back(Err::MissingKey, sections.where("workload"),
                             "missing required key 'workload.model' (" +
                                 ParamSpec::choice("workload.model", WorkloadRegistry::instance().names(), "")
                                     .type_text() +
                                 ")",
                             "workload.model");
  } else if (!sel.model.empty() && !WorkloadRegistry::instance().find(sel.model)) {
    L.fail(Error(Err::UnknownWorkload, model_w,
                 "unknown workload model '" + sel.model + "' (" +
                     suggestion(sel.model, WorkloadRegistry::instance().names()) + ")",
                 "workload.model"));
    sel.model_ok = false;
  }
  sel.model_ok = sel.model_ok && !sel.model.empty();
  sel.preset_ok = selector("hardware", "preset", sel.preset, preset_w);
  if (!sel.preset_ok)
    sel.missing.emplace_back(Err::MissingKey, sections.where("hardware"),
                             "missing required key 'hardware.preset' (one of the presets in `podsim list "
                             "hardware`, or a preset file)",
                             "hardware.preset");
  sel.preset_ok = sel.preset_ok && !sel.preset.empty();
  sel.preset_file = sel.preset_ok ? find_preset(sel.preset) : "";
  if (sel.preset_ok && sel.preset_file.empty()) {
    std::vector<std::string> names;
    for (const auto& pi : list_presets()) names.push_back(pi.name);
    L.fail(Error(Err::UnknownPreset, preset_w,
                 "unknown hardware preset '" + sel.preset + "' (" + suggestion(sel.preset, names) + ")",
                 "hardware.preset"));
    sel.preset_ok = false;
  }
  // strategy.name: one name, or a list of strategies composed in one experiment (each owning its mesh axes).
  sel.strategy_names = {"auto"};
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
          sel.strategy_ok = false;
        }
      }
    if (!node && sel.strategy_ok && sections.node.count("strategy"))
      if (auto found = child(sections.node.at("strategy"), "name")) {
        node = *found;
        strategy_w = node_location(sections.file, *node);
      }
    if (node) {
      sel.strategy_names.clear();
      if (node->IsScalar()) {
        sel.strategy_names.push_back(node->Scalar());
      } else if (node->IsSequence() && node->size() > 0) {
        for (size_t i = 0; i < node->size() && sel.strategy_ok; ++i) {
          if (!(*node)[i].IsScalar()) {
            L.fail(Error(Err::WrongType, strategy_w, "strategy.name lists strategy names, e.g. [data_parallel, spmd]",
                         "strategy.name"));
            sel.strategy_ok = false;
          } else {
            sel.strategy_names.push_back((*node)[i].Scalar());
          }
        }
      } else {
        L.fail(Error(Err::WrongType, strategy_w,
                     "strategy.name expects a strategy name or a list of them, e.g. data_parallel or "
                     "[data_parallel, spmd]",
                     "strategy.name"));
        sel.strategy_ok = false;
      }
    }
  }
  std::vector<std::string> strategies = StrategyRegistry::instance().names();
  strategies.insert(strategies.begin(), "auto");
  for (const std::string& strategy : sel.strategy_names) {
    if (!sel.strategy_ok) break;
    std::string problem;
    if (std::find(strategies.begin(), strategies.end(), strategy) == strategies.end())
      problem = "unknown strategy '" + strategy + "' (" + suggestion(strategy, strategies) + ")";
    else if ((strategy == "auto" || strategy == "single_device" || strategy == "replicate") &&
             sel.strategy_names.size() > 1)
      problem = "strategy '" + strategy + "' places the whole step by itself and cannot be composed with others; "
                "compose sharding strategies such as [data_parallel, spmd]";
    else if (std::count(sel.strategy_names.begin(), sel.strategy_names.end(), strategy) > 1)
      problem = "strategy '" + strategy + "' is listed twice";
    if (!problem.empty()) {
      L.fail(Error(Err::UnknownStrategy, strategy_w, problem, "strategy.name"));
      sel.strategy_ok = false;
    }
  }
  return sel;
}

}  // namespace podsim::loader_detail
