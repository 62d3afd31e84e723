// hardware.faults: a pod that is not uniform. Each entry is one text "TARGET: EFFECT, EFFECT":
//
//   chip 5: clock 0.8                 chip 5's TensorCores run at 80 % of hardware.chip.clock
//   chip (3,4): clock 0.8, hbm 0.5    by coordinates (x,y[,z]); hbm scales hardware.chip.hbm.bandwidth
//   random 4: clock 0.9               4 chips drawn with run.seed ("random 25%": a fraction of the pod)
//   link 12 +x: bandwidth 0.5         the link leaving chip 12 in direction +x runs at half hardware.ici.link_bandwidth
//   link (0,0) -y: down               that link carries nothing; routes detour around it (topology/torus.h)
//
// Factors lie in (0, 1]. A link is one direction of a cable; a failed cable is two entries, one per direction.
#pragma once

#include <cstdint>

#include "base/params/experiment.h"

namespace podsim {

// Reads hardware.faults for the pod `pod` into typed faults, drawing random chips from `seed`. Throws
// Error(BadFault) at the entry's file:line when an entry cannot be read or names a chip or link the pod lacks.
FaultConfig read_faults(const ParamSet& p, const PodConfig& pod, uint64_t seed);

}  // namespace podsim
