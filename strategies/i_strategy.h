// A strategy plugin turns one logical training step into per-role SPMD programs (plan/plan.h). One file per
// strategy under strategies/, registered by name:
//
//   PODSIM_REGISTER_STRATEGY(DataParallel, "data_parallel", "Replicate weights, shard batch, all-reduce grads");
//
// Contract: a strategy never touches SystemC or hardware models; in numeric mode the programs it returns must
// reproduce the single-device reference step within a stated fp32 tolerance.
#pragma once

#include <string>
#include <vector>

#include "sim/common/registry.h"
#include "sim/config/experiment.h"
#include "plan/plan.h"

namespace podsim {

class IStrategy {
 public:
  virtual ~IStrategy() = default;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual void validate(const ParamSet& p) const { (void)p; }
  virtual Plan plan(const ModelGraph& g, const Experiment& exp) const = 0;
};

using StrategyRegistry = Registry<IStrategy>;

}  // namespace podsim

#define PODSIM_REGISTER_STRATEGY(Impl, name, description) PODSIM_REGISTER(::podsim::IStrategy, Impl, name, description)
