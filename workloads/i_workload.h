// A workload plugin: declares its parameters (under "workload.") and builds the logical training step graph.
// One file per workload, registered by name: a model under workloads/models/, an op-level microbenchmark under
// workloads/microbench/:
//
//   PODSIM_REGISTER_WORKLOAD(MlpWorkload, "mlp", "Stack of dense layers with activation");
//
// Contract: build() returns a graph whose ops are in a valid execution order and whose every op has a cost and
// (for compute ops) a kernel; validate() throws Error naming the offending key's location.
#pragma once

#include <string>
#include <vector>

#include "base/registry.h"
#include "base/params/param.h"
#include "workloads/graph.h"

namespace podsim {

class IWorkload {
 public:
  virtual ~IWorkload() = default;
  virtual std::vector<ParamSpec> params() const = 0;
  // Cross-field checks (divisibility, axes against the pod); `p` holds every parameter of the experiment.
  virtual void validate(const ParamSet& p) const { (void)p; }
  virtual ModelGraph build(const ParamSet& p) const = 0;
  // Drops what the workload keeps for these parameters between validate, build and its strategy's place (an
  // imported module's graph), once the run has its plan: the engine asks nothing more of it.
  virtual void release(const ParamSet& p) const { (void)p; }
  // The strategy used when strategy.name is "auto".
  virtual std::string default_strategy() const { return "single_device"; }
};

using WorkloadRegistry = Registry<IWorkload>;

}  // namespace podsim

#define PODSIM_REGISTER_WORKLOAD(Impl, name, description) PODSIM_REGISTER(::podsim::IWorkload, Impl, name, description)
