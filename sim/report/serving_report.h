// `podsim report` of a serving run (an experiment with a serving section, docs/serving.md): the stream's figures of
// summary.json's serving object as tables.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>

namespace podsim {

void print_serving_report(const nlohmann::json& summary, std::ostream& out);

}  // namespace podsim
