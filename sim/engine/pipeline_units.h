// summary.json "pipeline.stage_units": the schedule as it ran. Per stage, each of its units (a micro-batch's
// forward pass, its backward pass, or the recomputation of its forward activations) in the schedule's order, with
// the simulated time its first op started and its last op ended on the stage's first chip. One entry per unit,
// not per op: K x M x 2 (3 with re-materialization) entries. `podsim report` draws them (pipeline.png).
//
//   summary["pipeline"]["stage_units"] = pipeline_stage_units(prepared, simulation);
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace podsim {

struct Prepared;
struct Simulation;

// [[{"micro_batch", "pass": forward | backward | recompute, "start_s", "end_s"}, ...] per stage]; a unit during
// which the stage idled also lists the spans it worked in ("spans_s": [[start, end], ...]). An empty array when
// the plan has no pipeline.
nlohmann::ordered_json pipeline_stage_units(const Prepared& p, const Simulation& s);

}  // namespace podsim
