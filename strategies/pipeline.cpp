// strategy.name: pipeline — GPipe (Huang et al. 2019) over mesh axis `pipe`: the model's layers cut into as many
// stages as the axis has chips (balanced by estimated cost unless strategy.stage_boundaries pins the cuts), the
// mini-batch run as strategy.micro_batches micro-batches, boundary activations and their gradients sent between
// neighbouring stages, one synchronous update per mini-batch. strategy.remat recomputes each stage's forward
// activations during the backward pass (only what a stage received is kept); strategy.schedule picks GPipe's
// all-forward-then-all-backward order or 1F1B. Composes with data_parallel and spmd on the other mesh axes
// (partition/pipeline.h does the work).
#include "base/error.h"
#include "strategies/planner.h"

namespace podsim {
namespace {

class Pipeline : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::integer("strategy.micro_batches", "pipeline: micro-batches M the mini-batch is split into; they "
                                                     "must divide each data replica's batch.")
            .range(1, 1 << 20)
            .def("4"),
        ParamSpec::boolean("strategy.remat", "pipeline: re-materialization of each stage as a whole (workload.remat: "
                                             "full per stage): keep only the activations a stage receives and "
                                             "recompute the rest of a micro-batch's forward just before its backward. "
                                             "Not with workload.remat, which re-materializes each layer.")
            .def("false"),
        ParamSpec::choice("strategy.schedule", {"gpipe", "1f1b"},
                          "pipeline: gpipe (every forward, then every backward) or 1f1b (stage k runs K-1-k "
                          "forwards ahead, then one forward and one backward in turn).")
            .def("gpipe"),
        ParamSpec::int_list("strategy.stage_boundaries",
                            "pipeline: the first cell (layer) of stages 1 .. K-1; [] balances the stages by estimated "
                            "cost. Cells: the Transformer's embedding is 0, layer l is l + 1, the head is L + 1; the "
                            "MLP's layer l is l and the output layer L.")
            .range(1, 1 << 20)
            .length(0, 4096)
            .def("[]"),
    };
  }

  void validate(const ParamSet& p) const override {
    if (p.b("strategy.remat") && p.has("workload.remat") && p.s("workload.remat") != "none")
      throw Error(Err::BadChoice, p.where("strategy.remat"),
                  "strategy.remat: true re-materializes each stage as a whole (workload.remat: full per stage); with "
                  "workload.remat: " + p.s("workload.remat") + " the layers are re-materialized already. Set one of them",
                  "strategy.remat");
  }

  std::vector<std::string> axes(const ParamSet&) const override { return {"pipe"}; }
  std::vector<std::string> contiguous_axes(const ParamSet&) const override { return {"pipe"}; }

  std::optional<PipelineOptions> pipeline(const ParamSet& p) const override {
    PipelineOptions o;
    o.micro_batches = p.i("strategy.micro_batches");
    o.remat = p.b("strategy.remat");
    o.schedule = p.s("strategy.schedule");
    o.boundaries = p.ints("strategy.stage_boundaries");
    return o;
  }
};

PODSIM_REGISTER_STRATEGY(Pipeline, "pipeline",
                         "GPipe: layers cut into stages over mesh axis 'pipe', micro-batches, optional "
                         "re-materialization");

}  // namespace
}  // namespace podsim
