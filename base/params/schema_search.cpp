// The search section's keys (podsim search, docs/search.md): the training search's and a serving search's.
#include "base/params/schema.h"

namespace podsim {

std::vector<ParamSpec> search_param_specs() {
  using P = ParamSpec;
  return {
      P::choice_list("search.strategies", {"data_parallel", "fsdp", "spmd", "pipeline", "moe"},
                     "podsim search: the strategies a candidate may compose, each owning its mesh axis (data, fsdp, "
                     "model, pipe, expert); [] takes data_parallel, fsdp, spmd and pipeline, and moe too when the "
                     "workload has experts.")
          .one_or_more()
          .length(0, 5)
          .def("[]"),
      P::integer("search.max_strategies", "podsim search: the most strategies one candidate composes.")
          .range(1, 5)
          .def("3"),
      P::choice("search.placements", {"auto", "all"},
                "podsim search: auto lays every mesh out automatically (the last axis innermost); all also tries the "
                "model and pipe axes on each other torus dimension that holds them whole, so that they stay on "
                "neighbouring chips.")
          .def("all"),
      P::int_list("search.micro_batches", "podsim search: micro-batches tried by pipeline candidates.")
          .range(1, 1 << 20)
          .length(1, 16)
          .one_or_more()
          .def("[4, 8, 16]"),
      P::choice_list("search.remat", {"none", "dots", "full", "stage"},
                     "podsim search: re-materialization policies tried: none, dots and full are workload.remat; stage "
                     "is a pipeline's per-stage re-materialization (strategy.remat), tried by pipeline candidates only.")
          .one_or_more()
          .length(1, 4)
          .def("[none, dots, full]"),
      P::bool_list("search.sequence_parallel",
                   "podsim search: strategy.sequence_parallel values tried by candidates with spmd.")
          .length(1, 2)
          .def("[false, true]"),
      P::text_list("search.algorithms",
                   "podsim search: collective algorithms (`podsim list collectives`) tried for the gradient reductions "
                   "of data_parallel (strategy.gradient_algorithm) and the gathers and reduce-scatters of fsdp "
                   "(strategy.fsdp_algorithm); [] keeps the library's default.")
          .length(0, 8)
          .def("[]"),
      P::choice("search.objective", {"step_time", "mfu"},
                "podsim search: what the ranking minimises (step_time) or maximises (mfu); with search.memory_cap, "
                "under that cap.")
          .def("step_time"),
      P::quantity("search.memory_cap", Quantity::Size,
                  "podsim search: candidates whose peak HBM use exceeds this are dropped before simulating; unset: "
                  "the chip's HBM capacity.")
          .positive(1e15)
          .optional(),
      P::integer("search.budget", "podsim search: the most candidates simulated, most promising first by the cheap "
                                  "estimate; 0: every candidate that fits (--budget overrides it).")
          .range(0, 1000000)
          .def("0"),
      // A serving experiment's search (docs/search.md, "Serving"); the keys above are then not read.
      P::choice_list("search.layouts", {"1d", "1d_kv_batch", "2d", "2d_kv_batch"},
                     "podsim search of a serving experiment: the layouts tried (docs/serving.md, Layouts): 1d is "
                     "1-D weight-stationary (spmd over every chip of a replica), 2d 2-D weight-stationary over the "
                     "pod's first torus dimension and the rest; _kv_batch splits the KV cache over the batch.")
          .one_or_more()
          .length(1, 4)
          .def("[1d]"),
      P::int_list("search.replicas",
                  "podsim search of a serving experiment: data-parallel replicas of the serving slice tried, each "
                  "holding the pod's chips over the count (1: one slice of every chip).")
          .range(1, 1 << 20)
          .length(1, 16)
          .one_or_more()
          .def("[1]"),
      P::int_list("search.slots",
                  "podsim search of a serving experiment: decode slots tried (serving.engine.slots); [] keeps the "
                  "experiment's.")
          .range(1, 1 << 20)
          .length(0, 16)
          .def("[]"),
      P::choice_list("search.weight_dtypes", {"bf16", "fp32", "int8", "fp8"},
                     "podsim search of a serving experiment: weight formats tried (workload.weight_dtype); [] keeps "
                     "the experiment's.")
          .length(0, 4)
          .def("[]"),
      P::choice_list("search.kv_dtypes", {"bf16", "fp32", "int8", "fp8"},
                     "podsim search of a serving experiment: KV cache formats tried (workload.kv_dtype); [] keeps the "
                     "experiment's.")
          .length(0, 4)
          .def("[]"),
      P::quantity("search.tpot_target", Quantity::Time,
                  "podsim search of a serving experiment: the p99 time per output token a candidate must keep; "
                  "unset: no bound.")
          .positive(1e6)
          .optional(),
      P::quantity("search.ttft_target", Quantity::Time,
                  "podsim search of a serving experiment: the p99 time to first token a candidate must keep; unset: "
                  "no bound.")
          .positive(1e6)
          .optional(),
  };
}

}  // namespace podsim
