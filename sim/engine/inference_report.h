// summary.json "inference": what one inference iteration (workload.step: prefill, decode, mixed, generate) did, as a
// serving engine reads it (docs/outputs.md lists the fields): its sequences and tokens, the KV cache it holds and
// the cache bytes its attention read, the weights it streamed, the types it served in, and the memory-bandwidth
// utilization serving papers report beside MFU.
//
//   if (auto inf = inference_report(prepared, simulation)) summary["inference"] = *inf;
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "workloads/graph.h"

namespace podsim {

struct Prepared;
struct Simulation;

// The step's model FLOPs (ModelGraph::model_flops on the logical step) with an inference step's batch padding left
// out (workload.pad_sequences, pad_tokens): each matmul through the layers counts the real sequences' places of all
// it computes, each after the final norm (the logits) the real sequences of all; attention counts its own (the real
// queries' visible keys). Any other step: ModelGraph::model_flops.
double step_model_flops(const Prepared& p, FlopsConvention convention);

// nullopt for a training step (and for workloads without workload.step).
std::optional<nlohmann::ordered_json> inference_report(const Prepared& p, const Simulation& s);

}  // namespace podsim
