// A serving run of `podsim run` (an experiment with a serving section; docs/serving.md): the request stream through
// the engine policy, each iteration's time from the SystemC models (sim/serving/run/shape_simulator.h), and the
// results folder: summary.json with its `serving` object (latencies and throughputs as benchmark_serving reports
// them, per iteration kind the count, time, MFU and memory-bandwidth utilization), requests.csv, iterations.csv,
// a trace with the iterations and each request's life, config.resolved.yaml and host.json.
//
//   if (serving::serving_run(e.params)) r = serving::run_serving(e, opts);
#pragma once

#include "sim/engine/engine.h"

namespace podsim::serving {

RunOutcome run_serving(const Experiment& e, const RunOptions& opts);

}  // namespace podsim::serving
