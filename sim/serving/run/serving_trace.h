// The timeline of a serving run (docs/serving.md, "Figures"), written with the simulator's TraceWriter in the
// experiment's run.trace format (Perfetto protobuf by default, Chrome JSON, gzip or none):
//   - process "engine": the iterations on a track ("iterations", and "prefill slice" when disaggregated), the KV
//     cache transfers between the slices on one more, and counters of the sequences each iteration ran, the sequences
//     holding a slot and the tokens in the caches at its end;
//   - process "requests": every request as a slice "request N" from sent to its last token, holding "to first token"
//     and "decoding", on lanes that requests in flight at once share (a lane per request in flight, not per request).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/params/experiment.h"
#include "sim/serving/disaggregated.h"
#include "sim/serving/engine.h"

namespace podsim::serving {

struct ServingTrace {
  std::string file;    // the file's name in the folder; empty with run.trace.format: off
  int64_t events = 0;  // slices and counter values written
};

// Writes the trace into `dir` (a folder that exists); `on_prefill` tells, per iteration of `r`, whether it ran on
// the prefill slice, and `transfers` (by request id, or empty) the KV caches' crossings. Error(OutputUnwritable) when
// the file cannot be written.
ServingTrace write_serving_trace(const std::string& dir, const TraceOptions& opt, const EngineResult& r,
                                 const std::vector<bool>& on_prefill, const std::vector<Transfer>& transfers);

}  // namespace podsim::serving
