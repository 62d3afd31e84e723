// The declared parameters of an experiment. Hardware and run parameters are fixed; workload and strategy
// parameters come from the chosen plugins, under "workload." and "strategy.".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/params/param.h"

namespace podsim {

std::vector<ParamSpec> hardware_param_specs();
std::vector<ParamSpec> run_param_specs();
std::vector<ParamSpec> mesh_param_specs();
// The `search` section: the space `podsim search` explores (sim/search/, docs/search.md). `podsim run` ignores it.
std::vector<ParamSpec> search_param_specs();
// The `serving` section: a request stream through an engine policy, which makes `podsim run` a serving run
// (sim/serving/, docs/serving.md).
std::vector<ParamSpec> serving_param_specs();

// An ordered set of specs with lookup by path and by group prefix.
class Schema {
 public:
  void add(ParamSpec spec);
  void add_all(std::vector<ParamSpec> specs);

  const ParamSpec* find(const std::string& path) const;
  // Gives a declared parameter a default (a section that decides the value itself, as a serving run the batch).
  void set_default(const std::string& path, std::string yaml_text);
  // Is `prefix` a group (a path some parameter lives under)?
  bool is_group(const std::string& prefix) const;
  // The valid keys directly under `prefix` ("" for the top), parameters and groups.
  std::vector<std::string> children(const std::string& prefix) const;
  std::vector<std::string> paths() const;
  const std::vector<ParamSpec>& specs() const { return m_specs; }

 private:
  std::vector<ParamSpec> m_specs;
  std::map<std::string, size_t> m_index;
};

}  // namespace podsim
