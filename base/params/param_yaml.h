// Internal to sim/config: converts yaml-cpp nodes into typed parameter values. Only sim/config includes yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include "base/params/param.h"

namespace podsim {

// 1-based file:line:column of a node.
SourceLocation node_location(const std::string& file, const YAML::Node& node);

// Parses `node` against `spec` (type, unit, range); throws Error with `where` on any problem.
ParamData parse_param_node(const ParamSpec& spec, const YAML::Node& node, const SourceLocation& where);

}  // namespace podsim
