// The loader's entry points (loader.h): an experiment read in the steps of loader_impl.h, then checked and typed.
#include "sim/config/loader.h"

#include <algorithm>
#include <optional>

#include "base/text.h"
#include "sim/config/loader_impl.h"
#include "base/params/param_yaml.h"
#include "sim/config/model_params.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"

namespace podsim {
namespace {

using namespace loader_detail;

Experiment load(const YAML::Node& file_root, const std::string& file, const std::string& stem, const LoadOptions& opts);

bool is_prefill_override(const Override& o) { return o.path.rfind("serving.prefill.", 0) == 0; }

// The mapping without some of its keys; its other entries are the same nodes (they keep their places in the file,
// which YAML::Clone drops).
YAML::Node without(const YAML::Node& map, const std::vector<std::string>& keys) {
  YAML::Node out(YAML::NodeType::Map);
  for (auto it = map.begin(); it != map.end(); ++it)
    if (!it->first.IsScalar() || std::find(keys.begin(), keys.end(), it->first.Scalar()) == keys.end())
      out.force_insert(it->first, it->second);
  return out;
}

// The experiment file without serving.prefill.
YAML::Node without_prefill(const YAML::Node& file_root) {
  YAML::Node root = without(file_root, {"serving"});
  if (auto serving = child(file_root, "serving")) root.force_insert(YAML::Node("serving"), without(*serving, {"prefill"}));
  return root;
}

// serving.prefill (docs/serving.md, "Per-phase layouts"): the prefill iterations' strategy and mesh. The section is
// taken out of the experiment before its parameters are read and loaded as an experiment of its own, the file with
// its strategy and mesh replaced (the nodes keep their places in the file, so its errors point at them), the
// overrides of strategy.* and mesh.* dropped and those of serving.prefill.strategy.* / .mesh.* applied instead.
std::string load_prefill_phase(const YAML::Node& file_root, const std::optional<YAML::Node>& section,
                               const std::vector<Override>& overrides, const std::string& file,
                               const std::string& stem) {
  std::vector<Override> mine;
  for (const Override& o : overrides)
    if (is_prefill_override(o)) mine.push_back(o);
  if (!section && mine.empty()) return "";
  const SourceLocation at = section ? node_location(file, *section) : mine.front().where;
  bool strategy = false;
  if (section) {
    if (!section->IsMap())
      throw Error(Err::ServingPhases, at,
                  "serving.prefill is a mapping of the prefill iterations' layout: {strategy: {...}, mesh: {...}}",
                  "serving.prefill");
    for (auto it = section->begin(); it != section->end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key != "strategy" && key != "mesh")
        throw Error(Err::UnknownKey, node_location(file, it->first),
                    "unknown key 'serving.prefill." + key +
                        "' (serving.prefill holds the prefill iterations' layout: strategy and mesh)",
                    "serving.prefill." + key);
      if (!it->second.IsMap())
        throw Error(Err::ServingPhases, node_location(file, it->second),
                    "serving.prefill." + key + " is a mapping, as the experiment's own " + key + " section",
                    "serving.prefill." + key);
      strategy = strategy || key == "strategy";
    }
  }
  for (const Override& o : mine) {
    const std::string rest = o.path.substr(std::string("serving.prefill.").size());
    if (rest.rfind("strategy.", 0) != 0 && rest.rfind("mesh.", 0) != 0)
      throw Error(Err::UnknownKey, o.where,
                  "unknown key '" + o.path + "' (serving.prefill holds strategy.* and mesh.*)", o.path);
    strategy = strategy || rest.rfind("strategy.", 0) == 0;
  }
  if (!strategy)
    throw Error(Err::ServingPhases, at,
                "serving.prefill gives the prefill iterations a layout of their own and needs its strategy "
                "(serving.prefill.strategy: {name: ...}); drop the section to prefill under the experiment's",
                "serving.prefill.strategy");
  YAML::Node root = without(without_prefill(file_root), {"strategy", "mesh"});
  if (section)
    for (auto it = section->begin(); it != section->end(); ++it) root.force_insert(it->first, it->second);
  LoadOptions po;
  for (const Override& o : overrides) {
    if (o.path.rfind("strategy.", 0) == 0 || o.path.rfind("mesh.", 0) == 0) continue;
    po.overrides.push_back(
        (is_prefill_override(o) ? o.path.substr(std::string("serving.prefill.").size()) : o.path) + "=" + o.value);
  }
  try {
    const Experiment phase = load(root, file, stem, po);
    return resolved_yaml(phase, false);
  } catch (const Error& e) {
    Error out(e.err(), e.where(), "the prefill layout (serving.prefill): " + e.message(),
              e.key_path().empty() ? "serving.prefill" : "serving.prefill." + e.key_path());
    for (const Error& a : e.also())
      out.add_also(Error(a.err(), a.where(), "the prefill layout (serving.prefill): " + a.message(),
                         "serving.prefill." + a.key_path()));
    throw out;
  }
}

Experiment load(const YAML::Node& file_root, const std::string& file, const std::string& stem, const LoadOptions& opts) {
  ParamReader L;
  std::vector<Override> overrides = parse_overrides(opts.overrides);
  YAML::Node root = file_root;
  std::optional<YAML::Node> prefill_section;
  if (auto serving = child(file_root, "serving"))
    if (auto pre = child(*serving, "prefill")) prefill_section = *pre;
  std::vector<Override> all_overrides = overrides;
  if (prefill_section || std::any_of(overrides.begin(), overrides.end(), is_prefill_override)) {
    if (prefill_section) root = without_prefill(file_root);
    overrides.erase(std::remove_if(overrides.begin(), overrides.end(), is_prefill_override), overrides.end());
  }
  if (opts.single_device) {
    // The reference normalizes the partitioned step's batch-norm groups (per replica by default, or bn_group's
    // replicas), which only the partitioned experiment's mesh resolves.
    LoadOptions partitioned = opts;
    partitioned.single_device = false;
    int64_t bn_batch = 0;
    try {
      const Experiment whole = load(file_root, file, stem, partitioned);
      if (whole.params.has("workload.bn_batch")) bn_batch = whole.params.i("workload.bn_batch");
    } catch (const Error&) {
      // the reference's own load reports what is wrong with the file
    }
    root = YAML::Clone(file_root);
    if (root.IsMap()) {
      root.remove("mesh");
      root.remove("strategy");
      root["strategy"]["name"] = "single_device";
      if (prefill_section) root["serving"].remove("prefill");  // the reference has one layout
      if (bn_batch > 0 && root["workload"].IsMap()) {
        root["workload"].remove("bn_group");
        root["workload"]["bn_batch"] = bn_batch;
      }
    }
    if (bn_batch > 0)
      overrides.erase(std::remove_if(overrides.begin(), overrides.end(),
                                     [](const Override& o) {
                                       return o.path == "workload.bn_group" || o.path == "workload.bn_batch";
                                     }),
                      overrides.end());
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
  if (!opts.single_device) e.prefill_phase = load_prefill_phase(file_root, prefill_section, all_overrides, file, stem);
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
  s.add_all(serving_param_specs());
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
