// The chip-model parameters beyond the core hardware description: HBM device timings, the MXU's accumulator
// capacity and run.fusion. read_model_params() copies them from the experiment's ParamSet into its typed structs;
// prepare() (sim/engine/engine.h) calls it, so every run and test that goes through the engine has them.
#pragma once

#include "sim/config/experiment.h"

namespace podsim {

void read_model_params(Experiment& e);

}  // namespace podsim
