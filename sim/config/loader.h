// Loads an experiment: YAML file + hardware preset + --set overrides -> validated, typed Experiment.
//
//   Experiment e = load_experiment("configs/quickstart.yaml", {.overrides = {"hardware.pod.dims=[4,4]"}});
//
// Precedence, lowest first: parameter defaults, the hardware preset (configs/hardware/<name>.yaml), the model preset
// (workload.preset: configs/workloads/<name>.yaml), the experiment file, --set overrides. Every problem is an Error naming file:line:column, the key path and what would be valid.
#pragma once

#include <string>
#include <vector>

#include "base/params/experiment.h"
#include "base/params/schema.h"

namespace podsim {

struct LoadOptions {
  std::vector<std::string> overrides;  // "path=value", value in YAML syntax ("[4, 4]", "900GB/s", "true")
  // The experiment's own single-device reference: its strategy section replaced by `name: single_device` and its
  // mesh section dropped (with any override of either): the same workload and global batch on chip 0.
  bool single_device = false;
};

Experiment load_experiment(const std::string& path, const LoadOptions& opts = {});
// Same, from text; `label` stands in for the file name in locations and as the default run name.
Experiment load_experiment_text(const std::string& yaml, const std::string& label, const LoadOptions& opts = {});

// The fully resolved experiment as YAML: every parameter with its value, commented with where it came from.
// Loading it back gives the same experiment.
std::string resolved_yaml(const Experiment& e, bool with_origins = true);

struct PresetInfo {
  std::string name;
  std::string file;
  std::string description;
  // Model presets: the paper the values come from (with its table), the parameter count it publishes, and how far
  // a count may be from it and still match (the rounding the paper uses).
  std::string source;
  double parameters = 0, parameters_tolerance = 0;
};
// Folders searched for presets, in order: $PODSIM_PRESET_DIR, <executable>/../configs/hardware (an install), and
// the source tree's configs/hardware.
std::vector<std::string> preset_dirs();
std::vector<PresetInfo> list_presets();
// The file of preset `name` (or `name` itself when it is a path to a .yaml file); "" when there is none.
std::string find_preset(const std::string& name);

// Model presets (workload.preset), the same way: $PODSIM_MODEL_PRESET_DIR, <executable>/../configs/workloads and
// the source tree's configs/workloads. A file holds description, source, parameters (the published count) and a
// `workload` mapping of the values it sets (workload.model among them).
std::vector<std::string> model_preset_dirs();
std::vector<PresetInfo> list_model_presets();
std::string find_model_preset(const std::string& name);
// The parameter count of model preset `name` as podsim builds it (the elements of every parameter tensor of the
// step, at batch 1 and the preset's sequence length).
double model_preset_parameter_count(const std::string& name);

// The schema of an experiment using `workload` and `strategy` (for docs and `podsim list params`).
Schema experiment_schema(const std::string& workload, const std::vector<std::string>& strategies);

}  // namespace podsim
