// summary.json "inference": what one inference iteration (workload.step: prefill, decode, mixed, generate) did, as a
// serving engine reads it (docs/outputs.md lists the fields): its sequences and tokens, the KV cache it holds and
// the cache bytes its attention read, the weights it streamed, the types it served in, and the memory-bandwidth
// utilization serving papers report beside MFU.
//
//   if (auto inf = inference_report(prepared, simulation)) summary["inference"] = *inf;
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

namespace podsim {

struct Prepared;
struct Simulation;

// nullopt for a training step (and for workloads without workload.step).
std::optional<nlohmann::ordered_json> inference_report(const Prepared& p, const Simulation& s);

}  // namespace podsim
