// strategy.name: fsdp — fully sharded data parallelism (ZeRO stage 3, Rajbhandari et al. 2020; PyTorch FSDP, Zhao
// et al. 2023; XLA's fsdp sharding) over mesh axis `fsdp`.
//  - The batch (dimension 0 of every step input and label, the sequences of an inference step's KV caches) is split
//    over it, after `data` when data_parallel is composed (each data replica is a group of fsdp shards: hybrid
//    sharding).
//  - Every parameter with an optimizer update is stored split over it along the first dimension no other axis
//    splits that the axis divides (else the one that pads least), and so are its gradient and optimizer state: each chip holds
//    1/N of them and the optimizer updates its shard only. An inference step's parameters (it updates none) are all
//    stored so: Pope et al.'s weight-gathered layout, over the axes the fsdp axis spans (X, XY or XYZ).
//  - Forward and backward ops read the parameter gathered over `fsdp` (in the spec the other strategies give it):
//    the partitioner all-gathers it before its first forward use, frees that copy after its last forward use, and
//    all-gathers it again before its first backward use (a parameter no backward op reads, a bias, is gathered once).
//    Each gradient comes out of the backward pass as a partial sum over the batch axes and is reduce-scattered into
//    its shard as soon as it is complete (then all-reduced over `data`, if composed).
//  - The gathers of the next layer (model cell) are issued one layer ahead, before the current layer's first op,
//    forward and backward (FSDP's forward and backward prefetch; XLA's asynchronous all-gather), so they overlap
//    its compute and at most two layers' gathered weights are live at once (partition/partitioner.h). In a pipeline
//    stage a gather is issued one schedule unit (micro-batch pass) ahead instead (partition/pipeline.h).
// strategy.fsdp_algorithm picks the collective algorithm of the gathers and reduce-scatters;
// strategy.fsdp_keep_gathered keeps the forward's gathered copies for the backward pass (no second gather).
#include "collectives/i_algorithm.h"
#include "base/error.h"
#include "base/text.h"
#include "strategies/planner.h"

namespace podsim {
namespace {

constexpr const char* kAxis = "fsdp";

class Fsdp : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    return {ParamSpec::text("strategy.fsdp_algorithm",
                            "fsdp: collective algorithm for the parameter all-gathers and gradient reduce-scatters "
                            "(`podsim list collectives`); empty: the library's default.")
                .def("\"\""),
            ParamSpec::boolean("strategy.fsdp_keep_gathered",
                               "fsdp: keep each weight's forward gathered copy for the backward pass instead of "
                               "gathering it again (PyTorch FSDP's reshard_after_forward=False): a third fewer bytes, "
                               "the weights the backward reads held whole from their forward use to their backward use.")
                .def("false")};
  }

  void validate(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.fsdp_algorithm");
    if (!algo.empty()) {
      const auto* entry = CollectiveRegistry::instance().find(algo);
      bool ok = entry != nullptr;
      if (ok) {
        auto kinds = entry->make()->supports();
        for (CollectiveKind k : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
          ok = ok && std::find(kinds.begin(), kinds.end(), k) != kinds.end();
      }
      if (!ok) {
        std::vector<std::string> valid;
        for (const auto* e : CollectiveRegistry::instance().entries()) {
          auto kinds = e->make()->supports();
          if (std::find(kinds.begin(), kinds.end(), CollectiveKind::ReduceScatter) != kinds.end() &&
              std::find(kinds.begin(), kinds.end(), CollectiveKind::AllGather) != kinds.end())
            valid.push_back(e->name);
        }
        throw Error(Err::UnknownAlgorithm, p.where("strategy.fsdp_algorithm"),
                    "strategy.fsdp_algorithm '" + algo + "' is not an algorithm for reduce_scatter and all_gather "
                    "(valid: " + join(valid, ", ") + ")",
                    "strategy.fsdp_algorithm");
      }
    }
    if (p.has("strategy.weight_update_sharding") && p.b("strategy.weight_update_sharding"))
      throw Error(Err::BadSharding, p.where("strategy.weight_update_sharding"),
                  "fsdp already shards the weights, their gradients and the optimizer state; weight-update sharding "
                  "over `data` on top of it is not supported (set strategy.weight_update_sharding: false)",
                  "strategy.weight_update_sharding");
  }

  std::vector<std::string> axes(const ParamSet&) const override { return {kAxis}; }
  std::vector<std::string> gathered_axes(const ParamSet&) const override { return {kAxis}; }
  bool keep_gathered(const ParamSet& p) const override { return p.b("strategy.fsdp_keep_gathered"); }

  void annotate(const ModelGraph& g, const Experiment& exp, const Mesh&, Annotations& specs) const override {
    refuse_packed_batch(g, exp, "fsdp");
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
      const int dim = batch_dim(g, static_cast<TensorId>(t));
      if (dim < 0) continue;
      ShardSpec s = ShardSpec::replicated(info.shape.size());
      s.dims[static_cast<size_t>(dim)] = {kAxis};
      add_spec(specs, g, static_cast<TensorId>(t), s);
    }
  }

  // The dimension a parameter is sharded along: the first one no other axis splits whose local size the fsdp axis
  // divides; when none does, the one of those that pads least (the largest local size, the first among equals);
  // dimension 0, after the others, when every dimension is split. (A [heads, head_dim, d_model] projection of 64
  // heads over 256 chips is sharded along d_model, not padded to 256 heads.)
  static size_t shard_dim(const TensorInfo& info, const ShardSpec& s, int64_t n) {
    size_t best = s.rank();
    int64_t best_pad = 0;
    for (size_t d = 0; d < s.rank(); ++d) {
      if (s.splits(d)) continue;
      const int64_t size = info.shape[d];
      const int64_t pad = (n - size % n) % n;
      if (pad == 0) return d;
      if (best == s.rank() || pad * info.shape[best] < best_pad * size) best = d, best_pad = pad;
    }
    return best == s.rank() ? 0 : best;
  }

  // After every strategy's annotate(): each updated parameter, its gradient and its optimizer state split over
  // `fsdp` along shard_dim().
  void refine(const ModelGraph& g, const Experiment&, const Mesh& mesh, Annotations& specs) const override {
    // An inference step updates no parameter: every parameter is stored sharded and gathered for its use
    // (Pope et al.'s weight-gathered layout).
    bool training = false;
    for (const Op& op : g.ops()) training = training || op.phase == Phase::Optimizer;
    if (!training)
      for (size_t t = 0; t < g.num_tensors(); ++t) {
        const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
        if (info.role != TensorRole::Parameter || info.shape.empty()) continue;
        auto it = specs.find(static_cast<TensorId>(t));
        ShardSpec s = it != specs.end() ? it->second : ShardSpec::replicated(info.shape.size());
        if (!s.uses(kAxis)) s.dims[shard_dim(info, s, mesh.axis_size(kAxis))].push_back(kAxis);
        specs[static_cast<TensorId>(t)] = s;
      }
    for (const Op& op : g.ops()) {
      if (op.phase != Phase::Optimizer) continue;
      const TensorId param = op.inputs.front();
      const TensorInfo& info = g.tensor(param);
      if (info.shape.empty()) continue;
      auto it = specs.find(param);
      ShardSpec s = it != specs.end() ? it->second : ShardSpec::replicated(info.shape.size());
      // A parameter two optimizer ops read (LARS's norms, then its update) is sharded by the first.
      if (!s.uses(kAxis)) s.dims[shard_dim(info, s, mesh.axis_size(kAxis))].push_back(kAxis);
      for (TensorId t : op.inputs)  // the parameter, its gradient and its optimizer state (not LARS's norms)
        if (g.tensor(t).shape == info.shape) specs[t] = s;
    }
  }

  std::map<std::string, std::string> algorithms(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.fsdp_algorithm");
    if (algo.empty()) return {};
    return {{"reduce_scatter", algo}, {"all_gather", algo}};
  }
};

PODSIM_REGISTER_STRATEGY(Fsdp, "fsdp",
                         "Fully sharded data parallelism (ZeRO-3/FSDP) over mesh axis 'fsdp': batch split, weights, "
                         "gradients and optimizer state sharded, weights gathered per layer (prefetched one layer "
                         "ahead) forward and backward, gradients reduce-scattered");

}  // namespace
}  // namespace podsim
