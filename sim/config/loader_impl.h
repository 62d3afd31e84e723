// The steps of loading an experiment (loader.h), shared by the files that implement them (internal to sim/config/):
//   yaml_input.cpp       the input: YAML files and text (one document each) and --set overrides
//   selectors.cpp        the experiment file's sections and the selectors read first (workload.preset,
//                        workload.model, hardware.preset, strategy.name), which decide what parameters exist
//   read_parameters.cpp  every parameter in layers (defaults, hardware preset, model preset, file, overrides) and
//                        the required ones
//   typed_experiment.cpp checks across parameters and the typed Experiment built from them
//   loader.cpp           the loader's entry points, the schema
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "base/params/experiment.h"
#include "base/params/param_reader.h"

namespace podsim {
class Mesh;
}

namespace podsim::loader_detail {

inline const std::vector<std::string> kSections = {"hardware", "workload", "strategy", "mesh", "run", "search",
                                                   "serving"};

// ---- the input (yaml_input.cpp) ----

struct Override {
  std::string path;
  std::string value;
  SourceLocation where;
};

std::vector<Override> parse_overrides(const std::vector<std::string>& raw);

YAML::Node load_yaml_file(const std::string& path, const std::string& what);
// One YAML document; a second one (after '---') is an error rather than silently ignored.
YAML::Node load_yaml_text(const std::string& text, const std::string& label);

std::optional<YAML::Node> child(const YAML::Node& map, const std::string& key);
std::string file_stem(const std::string& path);
SourceLocation file_location(const std::string& file);

// ---- sections and selectors (selectors.cpp) ----

// The experiment file's top-level sections, each a mapping, and where each starts.
struct Sections {
  std::string file;
  std::map<std::string, YAML::Node> node;
  std::map<std::string, SourceLocation> at;
  // Where section `sec` starts, or the file when it has none.
  SourceLocation where(const std::string& sec) const;
};
// Throws for a file that is no mapping or is empty; an unknown section or one that is no mapping fails in L.
Sections read_sections(ParamReader& L, const YAML::Node& root, const std::string& file);

// The selectors, each "ok" when given and valid; a failed one is reported once (in L) and the parameters that depend
// on it are then read leniently.
struct Selection {
  std::string model;
  bool model_ok = false;
  std::string preset, preset_file;  // hardware.preset as given, and its file
  bool preset_ok = false;
  std::string model_preset, model_preset_file;  // workload.preset as given, and its file
  YAML::Node model_preset_node;                 // the preset file's `workload` mapping
  bool model_preset_ok = false;
  std::vector<std::string> strategy_names;  // {"auto"} when not given
  bool strategy_ok = true;
  // Selectors missing: reported with the other missing keys, unless a misspelled key already points at them.
  std::vector<Error> missing;
};
Selection read_selectors(ParamReader& L, const Sections& sections, const std::vector<Override>& overrides);

// ---- the parameters (read_parameters.cpp) ----

// Reads the experiment's parameters into L (preset, file, overrides), collecting errors in L. Stops early (by
// throwing) only at an error after which nothing further can be read, such as an unreadable preset.
void read_parameters(ParamReader& L, const YAML::Node& root, const std::string& file,
                     const std::vector<Override>& overrides, std::string& model,
                     std::vector<std::string>& strategy_names, std::string& preset);

// ---- the typed experiment (typed_experiment.cpp) ----

// Checks that only make sense across parameters (the pod's shape), recording the resolved lists.
void validate_hardware(Experiment& e, ParamReader& L);
void build_typed(Experiment& e, const ParamSet& p);
// workload.bn_group (replicas per batch-norm group) as the workload's bn_batch (examples per group), now that the
// data axis is known. Returns whether it set bn_batch.
bool resolve_bn_group(Experiment& e, const Mesh& mesh);

}  // namespace podsim::loader_detail
