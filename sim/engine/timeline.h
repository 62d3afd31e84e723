// summary.json "timeline": what the result chip did over the step, in 100 equal bins, for `podsim report`'s
// timeline.png. `chip` is the chip's id, `bin_s` the bins' width. Each series is a share of the bin's time (or bytes
// per second), so a series' mean over the bins is the step's figure it is named after:
//   mxu_busy, vpu_busy        time the units computed / (bin x TensorCores)
//   hbm_Bps                   bytes HBM moved per second (the bandwidth, not the channels' busy time)
//   ici_busy                  time the chip's links were sending / (bin x links)          (per_chip.ici_busy_fraction)
//   communication             time a communication op ran / bin                          (time_breakdown.communication_s)
//   exposed_communication     time a communication op ran and no compute op did / bin    (time_breakdown.exposed_...)
//
//   summary["timeline"] = timeline_json(prepared, simulation, result_chip);
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace podsim {

struct Prepared;
struct Simulation;
class Chip;

nlohmann::ordered_json timeline_json(const Prepared& p, const Simulation& s, const Chip& chip);

}  // namespace podsim
