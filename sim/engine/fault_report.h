// summary.json "faults" (runs with hardware.faults): the faults as resolved (random chips drawn), the slowest chip
// (most TensorCore busy time) and the slowest link (most busy time: a degraded link or the detour around a down
// one), per collective the time its first member waited for its slowest member, and every link's utilization
// (busy / step time) per chip and direction, which `podsim report` draws as links.png. docs/outputs.md lists the
// fields; the console prints the slowest chip, link and wait.
//
//   if (auto f = fault_report(prepared, simulation)) summary["faults"] = *f;
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

namespace podsim {

struct Prepared;
struct Simulation;

// nullopt when the experiment's hardware.faults is empty.
std::optional<nlohmann::ordered_json> fault_report(const Prepared& p, const Simulation& s);

}  // namespace podsim
