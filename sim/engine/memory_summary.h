// The memory figures of summary.json, which need only the lowered programs (the plan), not the simulation: a
// role's peak and what is live at it, the result chip's "memory" section, and the whole summary of a run that
// stops after the memory check (`podsim run --memory-only`). The full summary (summary.cpp) takes its memory
// figures from here too, so both report the same numbers.
//
//   J role = role_memory(prepared, r);          // peak_memory_bytes, memory_at_peak, fits
//   std::string text = memory_summary_json(p);  // summary.json with "simulated": false
#pragma once

#include <cstddef>
#include <optional>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace podsim {

struct Prepared;

// {"peak_memory_bytes", "memory_at_peak": {weights, gradients, optimizer_state, activations, temporaries}, "fits"}
// of role r's program.
nlohmann::ordered_json role_memory(const Prepared& p, size_t role);

// summary.json "memory": the result chip's peak, what is live at it, and whether every role fits.
nlohmann::ordered_json memory_section(const Prepared& p);

// The fields both summaries begin with: version, experiment, hardware, workload, strategy, numeric, seed, pod_dims,
// chips, active_chips, and "simulated" (whether a step was simulated).
void summary_head(const Prepared& p, bool simulated, nlohmann::ordered_json& j);

// Whether the step is an op-level microbenchmark (matmul, collective, traffic, memory): no model, no batch.
bool microbenchmark(const Prepared& p);

// Trainable parameters of the logical step; none for the op-level microbenchmarks (matmul, collective, traffic,
// memory), whose operands are no model's.
std::optional<int64_t> trainable_parameters(const Prepared& p);

// summary.json "pipeline" as planned (stages, micro-batches, schedule, remat, stage cells and estimates, the ideal
// bubble); a simulated run adds what it measured. A null value when the plan has no pipeline.
nlohmann::ordered_json pipeline_plan(const Prepared& p);

// Whether every role's peak fits the chip's HBM.
bool every_role_fits(const Prepared& p);

// summary.json of a run stopped after the memory check: the experiment, the memory section, per role its chips and
// memory, the pipeline's static figures, the plan's notes; "simulated": false and no time figure.
std::string memory_summary_json(const Prepared& p);

}  // namespace podsim
