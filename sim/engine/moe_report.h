// summary.json "moe" (numeric mode): per mixture-of-experts layer, the routing its gating op decided on the real
// data of the run: tokens each expert accepted, first choices per expert, assignments and tokens dropped over
// capacity, second choices skipped by random routing (docs/outputs.md lists the fields). The routes are assembled
// from the chips' shards, so a partitioned run reports the whole step as one chip would.
//
//   if (auto m = moe_report(prepared, simulation)) summary["moe"] = *m;
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

namespace podsim {

struct Prepared;
struct Simulation;

// nullopt when the run is not numeric or its step has no MoE layer.
std::optional<nlohmann::ordered_json> moe_report(const Prepared& p, const Simulation& s);

}  // namespace podsim
