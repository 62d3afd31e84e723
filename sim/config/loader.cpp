// The loader's entry points (loader.h): an experiment read in the steps of loader_impl.h, then checked and typed.
#include "sim/config/loader.h"

#include <algorithm>

#include "base/text.h"
#include "sim/config/loader_impl.h"
#include "sim/config/model_params.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"

namespace podsim {
namespace {

using namespace loader_detail;

Experiment load(const YAML::Node& file_root, const std::string& file, const std::string& stem, const LoadOptions& opts) {
  ParamReader L;
  std::vector<Override> overrides = parse_overrides(opts.overrides);
  YAML::Node root = file_root;
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
