// summary.json "dcn" (runs over several slices, hardware.slices > 1): what crossed the data-center network
// (hw/dcn/dcn.h) and what it cost. Per chip the bytes it sent to other slices; per host the bytes through its NICs
// each way and their busy time; for the result chip the time its DCN communication ran and the part of it during
// which the chip ran nothing else, neither compute nor communication inside its slice (exposed). docs/outputs.md lists the fields.
//
//   if (auto d = dcn_report(prepared, simulation)) summary["dcn"] = *d;
//   bool crosses = over_dcn(prepared, chip, op);
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "workloads/graph.h"

namespace podsim {

struct Prepared;
struct Simulation;

// Whether `op`, run by `chip`, moves data between slices: a collective whose group spans them, a transfer to or from
// a chip of another slice.
bool over_dcn(const Prepared& p, int64_t chip, const Op& op);

// nullopt with one slice.
std::optional<nlohmann::ordered_json> dcn_report(const Prepared& p, const Simulation& s);

}  // namespace podsim
