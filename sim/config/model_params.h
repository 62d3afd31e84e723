// The chip-model parameters beyond the core hardware description: HBM device timings, the MXU's accumulator
// capacity and run.fusion. read_model_params() copies them from the experiment's ParamSet into its typed structs;
// the loader (sim/config/loader.h) calls it for every experiment it builds.
#pragma once

#include "base/params/experiment.h"

namespace podsim {

void read_model_params(Experiment& e);

}  // namespace podsim
