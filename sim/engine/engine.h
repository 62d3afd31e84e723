// The engine: run(experiment) -> results folder. One elaboration per process (SystemC's rule).
//
//   Experiment e = load_experiment("configs/quickstart.yaml");
//   RunOutcome r = run_experiment(e, {.out_dir = "results/quickstart"});
//
// Steps: workload graph -> strategy plan -> lowering per role (hw/compiler) -> memory check -> elaborate the pod
// (hw/pod) -> sc_start under a wall-clock watchdog -> deadlock check -> summary.json, config.resolved.yaml,
// host.json, trace, tensors/*.npy, written atomically (sim/engine/output_dir.h). With RunOptions::memory_only the
// run stops after the memory check and writes the memory figures only (sim/engine/memory_summary.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/params/experiment.h"
#include "plan/plan.h"

namespace podsim {

struct PodContext;
class Pod;
class Chip;
struct HloOpStats;

// Everything decided before the simulation starts.
struct Prepared {
  Experiment exp;
  ModelGraph graph{"step"};
  Plan plan;
  std::unique_ptr<PodContext> ctx;
  std::vector<std::string> notes;  // things the user should know (trace skipped, OOM allowed, ...)
  Prepared();
  ~Prepared();
};

std::unique_ptr<Prepared> prepare(const Experiment& exp);

struct Simulation {
  std::unique_ptr<Pod> pod;
  double step_time = 0;  // seconds
  double wall = 0;       // seconds the simulation took
  uint64_t activations = 0;
  // Per op of the result chip, its busy time within its span (summary.cpp, op_busy()): summary.json's op table and
  // hlo_op_stats.csv both read it, so it is worked out once, on first use (for the chip named here).
  mutable std::vector<double> result_op_busy;
  mutable const Chip* result_op_busy_chip = nullptr;
  // An imported program's figures per instruction and per category (sim/engine/hlo_stats.h), worked out once.
  mutable std::shared_ptr<const HloOpStats> hlo_stats;
  mutable bool hlo_stats_done = false;
  Simulation();
  Simulation(Simulation&&) noexcept;
  ~Simulation();
};

// Elaborates and runs the pod. Throws Error(Deadlock) when chips wait on each other forever. Once per process.
// `progress`: a progress line on stderr when it is a terminal and the run is long (sim/engine/run_progress.h).
Simulation simulate(Prepared& p, bool progress = false);

// summary.json text (deterministic: same experiment and seed give the same bytes).
std::string summary_json(const Prepared& p, const Simulation& s);

struct RunOptions {
  std::string out_dir;  // "" -> results/<run.name>
  bool force = false;
  // Stop after the memory check: write the memory figures (memory_summary_json), config.resolved.yaml and host.json,
  // simulate nothing. A step that does not fit fails as in a full run (PODSIM-MEM-001 unless run.allow_oom).
  bool memory_only = false;
  // A progress line on stderr while a long simulation runs, when stderr is a terminal (podsim run without -q).
  bool progress = false;
};

struct RunOutcome {
  std::string out_dir;
  std::string summary;  // summary.json text
  std::vector<std::string> notes;
};

RunOutcome run_experiment(const Experiment& exp, const RunOptions& opts);

}  // namespace podsim
