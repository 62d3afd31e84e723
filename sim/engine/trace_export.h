// Writes the trace of a finished simulation (run.trace.*): one process track per traced chip, named with its
// torus coordinates, with Steps, Ops per TensorCore, MXU/VPU, HBM DMA, one track per ICI link direction, a
// Collectives parent with a child per collective instance, counters (MXU utilization %, HBM GB/s, ICI link GB/s)
// and flows from each send to its receive. Layout after XProf's TPU trace viewer; docs/trace.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

struct Prepared;
struct Simulation;

struct TraceStats {
  std::string file;     // "" when no trace was written
  uint64_t events = 0;  // slices + counter values
  uint64_t slices = 0, counter_values = 0, flows = 0, tracks = 0;
  uint64_t bytes = 0;
  std::vector<std::string> notes;
};

// Counts what a trace of this run would hold, without writing it.
TraceStats count_trace(const Prepared& p, const Simulation& s);
TraceStats export_trace(const Prepared& p, const Simulation& s, const std::string& dir);

}  // namespace podsim
