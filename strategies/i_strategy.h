// A strategy plugin decides how one logical training step is placed on a pod. One file per strategy under
// strategies/, registered by name, parameters declared once (under "strategy."):
//
//   PODSIM_REGISTER_STRATEGY(DataParallel, "data_parallel", "Split the batch, all-reduce the gradients");
//
// Most strategies are sharding emitters (GSPMD's design): they own mesh axes and annotate tensors of the logical
// step with sharding specs over those axes (annotate(), then refine() once every strategy of a composition has
// annotated); the shared SPMD partitioner (partition/) turns the annotations into programs. A strategy that places
// the step by itself (single_device, replicate, out-of-tree test plugins) returns the plan from place() instead and
// cannot be composed. strategies/planner.h combines them.
//
// Contract: a strategy never touches SystemC or hardware models; in numeric mode the programs that come out must
// reproduce the single-device reference step within the tolerances of docs/strategies.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "partition/pipeline.h"
#include "plan/plan.h"
#include "base/registry.h"
#include "base/params/experiment.h"

namespace podsim {

// Specs by logical tensor. Strategies add to it; a tensor split by several strategies gets their axes merged
// dimension by dimension (strategies/planner.h: merge_spec).
using Annotations = std::map<TensorId, ShardSpec>;

class IStrategy {
 public:
  virtual ~IStrategy() = default;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual void validate(const ParamSet& p) const { (void)p; }

  // The mesh axes this strategy owns, by name (e.g. {"data"}).
  virtual std::vector<std::string> axes(const ParamSet& p) const {
    (void)p;
    return {};
  }
  // Its axes whose consecutive indices should be neighbouring chips (a pipeline's stages pass data to the next);
  // the automatic mesh layout gives them a run of neighbouring chips (plan/mesh.h).
  virtual std::vector<std::string> contiguous_axes(const ParamSet& p) const {
    (void)p;
    return {};
  }
  // Sharding specs over its own axes for tensors of the logical step `g`.
  virtual void annotate(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) const {
    (void)g, (void)exp, (void)mesh, (void)specs;
  }
  // Runs after every composed strategy's annotate(): specs that depend on the others' (weight-update sharding
  // picks a dimension no other axis splits).
  virtual void refine(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) const {
    (void)g, (void)exp, (void)mesh, (void)specs;
  }
  // Its axes over which parameters are stored sharded but read whole (FSDP): the partitioner gathers each such
  // parameter over them before its forward use and again before its backward use (partition/partitioner.h).
  virtual std::vector<std::string> gathered_axes(const ParamSet& p) const {
    (void)p;
    return {};
  }
  // Whether the forward pass's gathered copy is kept for the backward pass instead of gathered again.
  virtual bool keep_gathered(const ParamSet& p) const {
    (void)p;
    return false;
  }
  // Collective algorithms by collective name for the communication this strategy causes ({"all_reduce": "ring"}).
  virtual std::map<std::string, std::string> algorithms(const ParamSet& p) const {
    (void)p;
    return {};
  }
  // A pipeline strategy says how it cuts the step into stages over its axis (partition/pipeline.h); the planner then
  // builds one program per stage, partitioned over the other strategies' axes.
  virtual std::optional<PipelineOptions> pipeline(const ParamSet& p) const {
    (void)p;
    return std::nullopt;
  }
  // A strategy that places the whole step itself returns its plan here.
  virtual std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const {
    (void)g, (void)exp;
    return std::nullopt;
  }
};

using StrategyRegistry = Registry<IStrategy>;

}  // namespace podsim

#define PODSIM_REGISTER_STRATEGY(Impl, name, description) PODSIM_REGISTER(::podsim::IStrategy, Impl, name, description)
