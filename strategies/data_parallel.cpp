// strategy.name: data_parallel — owns mesh axis `data`. The batch (dimension 0 of every step input and label, and the
// sequences of an inference step's KV caches: replicas of a serving slice) is split over it; parameters are replicated; each parameter's gradient comes out of the backward pass as a partial
// sum over `data` and is all-reduced as soon as the last backward op writing it finishes, so the reductions overlap
// the rest of the backward pass. When the data axis spans two torus dimensions the default all-reduce is the 2-D
// torus algorithm (reduce-scatter along one dimension, all-reduce along the other, all-gather back; Ying et al.
// 2018), the collectives library's "torus".
//
// strategy.weight_update_sharding (Xu et al. 2020): the gradient is reduce-scattered instead, each replica updates
// its 1/N of the parameter with its 1/N of the optimizer state, and the updated parameter is all-gathered. Bytes
// moved are those of one all-reduce; update FLOPs and optimizer memory per chip are divided by N. The shard is
// taken along the first dimension of the parameter that no other axis splits and N divides (else the one of those
// that pads least).
#include "collectives/i_algorithm.h"
#include "base/error.h"
#include "base/text.h"
#include "strategies/planner.h"

namespace podsim {
namespace {

class DataParallel : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::boolean("strategy.weight_update_sharding",
                           "data_parallel: shard the weight update over the data axis (reduce-scatter the gradients, "
                           "update 1/N of each parameter and of its optimizer state, all-gather the parameter).")
            .def("false"),
        ParamSpec::text("strategy.gradient_algorithm",
                        "data_parallel: collective algorithm for the gradient reductions (`podsim list collectives`); "
                        "empty: the library's default (torus).")
            .def("\"\""),
    };
  }

  void validate(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.gradient_algorithm");
    if (algo.empty()) return;
    const auto* entry = CollectiveRegistry::instance().find(algo);
    bool ok = entry != nullptr;
    if (ok) {
      auto kinds = entry->make()->supports();
      for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
        ok = ok && std::find(kinds.begin(), kinds.end(), k) != kinds.end();
    }
    if (!ok) {
      std::vector<std::string> valid;
      for (const auto* e : CollectiveRegistry::instance().entries()) {
        auto kinds = e->make()->supports();
        if (std::find(kinds.begin(), kinds.end(), CollectiveKind::AllReduce) != kinds.end()) valid.push_back(e->name);
      }
      throw Error(Err::UnknownAlgorithm, p.where("strategy.gradient_algorithm"),
                  "strategy.gradient_algorithm '" + algo + "' is not an algorithm for all_reduce, reduce_scatter and "
                  "all_gather (valid: " + join(valid, ", ") + ")",
                  "strategy.gradient_algorithm");
    }
  }

  std::vector<std::string> axes(const ParamSet&) const override { return {"data"}; }

  void annotate(const ModelGraph& g, const Experiment& exp, const Mesh&, Annotations& specs) const override {
    refuse_packed_batch(g, exp, "data_parallel");
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
      // The batch, and state kept per example row (batch-norm moving averages: state no parameter owns).
      bool per_example = info.role == TensorRole::OptimizerState;
      for (OpId c : g.consumers(static_cast<TensorId>(t)))
        per_example = per_example && g.tensor(g.op(c).inputs.front()).role != TensorRole::Parameter;
      const int dim = per_example && !info.shape.empty() ? 0 : batch_dim(g, static_cast<TensorId>(t));
      if (dim < 0) continue;
      ShardSpec s = ShardSpec::replicated(info.shape.size());
      s.dims[static_cast<size_t>(dim)] = {"data"};
      add_spec(specs, g, static_cast<TensorId>(t), s);
    }
  }

  void refine(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) const override {
    if (!exp.params.b("strategy.weight_update_sharding")) return;
    for (const Op& op : g.ops()) {
      if (op.phase != Phase::Optimizer) continue;
      const TensorId param = op.inputs.front();
      if (g.tensor(param).role != TensorRole::Parameter) continue;  // state split with the batch (batch-norm averages)
      const TensorInfo& info = g.tensor(param);
      auto it = specs.find(param);
      ShardSpec base = it != specs.end() ? it->second : ShardSpec::replicated(info.shape.size());
      // The first dimension no other axis splits and the data axis divides (a convolution's filter [KH, KW, Ci, Co]
      // shards along its features, not its 1 or 3 rows); when none divides, the one that pads least.
      const int64_t n = mesh.axis_size("data");
      size_t dim = base.rank();
      for (size_t d = 0; d < base.rank() && dim == base.rank(); ++d)
        if (!base.splits(d) && info.shape[d] % n == 0) dim = d;
      if (dim == base.rank()) {  // none divides: the one that pads least (the first among equals)
        dim = 0;
        while (dim < base.rank() && base.splits(dim)) ++dim;
        if (dim == base.rank()) dim = 0;
        auto kept = [&](size_t d) {
          return static_cast<double>(info.shape[d]) / static_cast<double>((info.shape[d] + n - 1) / n * n);
        };
        for (size_t d = dim + 1; d < base.rank(); ++d)
          if (!base.splits(d) && kept(d) > kept(dim)) dim = d;
      }
      ShardSpec s = base;
      s.dims[dim].push_back("data");
      // The gradient and every optimizer-state input (inputs 1 and up) in the sharded spec: the update runs there.
      // (Not LARS's norms, which are not shaped like the parameter: the partitioner all-reduces their partial sums.)
      for (size_t i = 1; i < op.inputs.size(); ++i) {
        if (g.tensor(op.inputs[i]).shape != info.shape) continue;
        specs.erase(op.inputs[i]);
        specs[op.inputs[i]] = s;
      }
    }
  }

  std::map<std::string, std::string> algorithms(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.gradient_algorithm");
    if (algo.empty()) return {};
    return {{"all_reduce", algo}, {"reduce_scatter", algo}, {"all_gather", algo}};
  }
};

PODSIM_REGISTER_STRATEGY(DataParallel, "data_parallel",
                         "Split the batch over mesh axis 'data', all-reduce the gradients (optionally shard the "
                         "weight update)");

}  // namespace
}  // namespace podsim
