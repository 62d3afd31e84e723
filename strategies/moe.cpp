// strategy.name: moe — GShard's expert parallelism (Lepikhin et al. 2020, §3) over mesh axis `expert`.
//  - The experts of every MoE layer are split over it: wi [E, M, H] and wo [E, H, M] along E (padded when the axis
//    does not divide E). Each device holds E / n experts.
//  - Everything else is data-parallel over it, as in GShard: the batch (dimension 0 of the step's inputs and
//    labels) is split over `expert` as its innermost axis (after `data`, when data_parallel is composed), so the
//    groups of tokens [G, S, M] are split over the same axes; attention and dense layers run on the local tokens
//    and their weight gradients are all-reduced over every batch axis.
//  - The expert inputs [E, G, C, M] are annotated split along E over `expert` (and along G over the other batch
//    axes): the partitioner turns the dispatch einsum's group-split output into that with an all-to-all over
//    `expert` (the dispatch); the expert outputs [G, E, C, M] are annotated split along G again, the all-to-all
//    back (the combine). The backward pass mirrors both: the gradient of the expert outputs is annotated split
//    along E (an all-to-all into the experts) and the gradient of the expert inputs along G (back to the groups),
//    so the expert weights' gradients are computed where the experts live.
// strategy.all_to_all_algorithm picks the collective algorithm of those all-to-alls.
#include <set>

#include "collectives/i_algorithm.h"
#include "base/error.h"
#include "base/text.h"
#include "strategies/planner.h"

namespace podsim {
namespace {

constexpr const char* kAxis = "expert";

// The MoE blocks of the step: the prefix of each gating op's name ("layer1.moe" for "layer1.moe.gating").
std::vector<std::string> moe_blocks(const ModelGraph& g) {
  std::vector<std::string> out;
  const std::string suffix = ".gating";
  for (const Op& op : g.ops())
    if (op.kind == OpKind::Top2Gating && op.name.size() > suffix.size() &&
        op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(op.name.substr(0, op.name.size() - suffix.size()));
  return out;
}

class Moe : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    return {ParamSpec::text("strategy.all_to_all_algorithm",
                            "moe: collective algorithm for the dispatch and combine all-to-alls (`podsim list "
                            "collectives`); empty: the library's default (direct).")
                .def("\"\"")};
  }

  void validate(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.all_to_all_algorithm");
    if (algo.empty()) return;
    const auto* entry = CollectiveRegistry::instance().find(algo);
    auto kinds = entry ? entry->make()->supports() : std::vector<CollectiveKind>{};
    if (std::find(kinds.begin(), kinds.end(), CollectiveKind::AllToAll) != kinds.end()) return;
    std::vector<std::string> valid;
    for (const auto* e : CollectiveRegistry::instance().entries()) {
      auto k = e->make()->supports();
      if (std::find(k.begin(), k.end(), CollectiveKind::AllToAll) != k.end()) valid.push_back(e->name);
    }
    throw Error(Err::UnknownAlgorithm, p.where("strategy.all_to_all_algorithm"),
                "strategy.all_to_all_algorithm '" + algo + "' is not an algorithm for all_to_all (valid: " +
                    join(valid, ", ") + ")",
                "strategy.all_to_all_algorithm");
  }

  std::vector<std::string> axes(const ParamSet&) const override { return {kAxis}; }

  void annotate(const ModelGraph& g, const Experiment& exp, const Mesh&, Annotations& specs) const override {
    const std::vector<std::string> blocks = moe_blocks(g);
    if (blocks.empty())
      throw Error(Err::StrategyMismatch, exp.params.where("strategy.name"),
                  "strategy moe splits the experts of mixture-of-experts layers, and this " + exp.workload +
                      " step has none (set workload.moe.experts for a Transformer with MoE layers)",
                  "strategy.name");
    std::set<TensorId> done;  // the decodes of a generate form share their layers' weights
    for (const std::string& b : blocks)
      for (const char* out : {".hidden", ".expert_out"})
        if (const TensorId w = expert_weight(g, exp, b + out); done.insert(w).second)
          add_spec(specs, g, w, ShardSpec::parse("[expert, -, -]"));
  }

  // After every strategy's annotate(): `expert` joins the batch split as its innermost axis, then the MoE tensors
  // take the batch axes.
  void refine(const ModelGraph& g, const Experiment& exp, const Mesh&, Annotations& specs) const override {
    refuse_packed_batch(g, exp, "moe");
    std::vector<std::string> batch;
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
      const int dim = batch_dim(g, static_cast<TensorId>(t));
      if (dim < 0) continue;
      ShardSpec s = ShardSpec::replicated(info.shape.size());
      s.dims[static_cast<size_t>(dim)] = {kAxis};
      add_spec(specs, g, static_cast<TensorId>(t), s);
      if (info.role != TensorRole::KvCache) batch = specs[static_cast<TensorId>(t)].dims[0];
    }
    if (batch.empty()) batch = {kAxis};
    std::vector<std::string> outer(batch.begin(), batch.end() - 1);  // the batch axes other than `expert`
    for (const std::string& b : moe_blocks(g)) {
      ShardSpec groups = ShardSpec::replicated(3);
      groups.dims[0] = batch;
      ShardSpec in = ShardSpec::replicated(4), out = ShardSpec::replicated(4);
      in.dims[0] = {kAxis};
      in.dims[1] = outer;
      out.dims[0] = batch;
      const TensorId xin = find(g, exp, b + ".dispatched"), xout = find(g, exp, b + ".expert_out");
      add_spec(specs, g, find(g, exp, b + ".groups"), groups);
      add_spec(specs, g, xin, in);
      add_spec(specs, g, xout, out);
      // Their gradients, the other way round.
      ShardSpec dxin = ShardSpec::replicated(4), dxout = ShardSpec::replicated(4);
      dxin.dims[1] = batch;
      dxout.dims[0] = outer;
      dxout.dims[1] = {kAxis};
      if (TensorId d = gradient(g, xin); d >= 0) add_spec(specs, g, d, dxin);
      if (TensorId d = gradient(g, xout); d >= 0) add_spec(specs, g, d, dxout);
    }
  }

  std::map<std::string, std::string> algorithms(const ParamSet& p) const override {
    const std::string algo = p.s("strategy.all_to_all_algorithm");
    if (algo.empty()) return {};
    return {{"all_to_all", algo}};
  }

 private:
  // The gradient of a forward tensor read by one forward matmul: that matmul's gradient op for the operand
  // (workloads/ops/matmul.cpp names them "<op>.dA" and "<op>.dB"); -1 when the step has none.
  static TensorId gradient(const ModelGraph& g, TensorId t) {
    std::vector<OpId> users;
    for (OpId c : g.consumers(t))
      if (g.op(c).phase == Phase::Forward) users.push_back(c);
    if (users.size() != 1 || g.op(users[0]).kind != OpKind::MatMul) return -1;
    const Op& op = g.op(users[0]);
    return g.find_tensor(op.name + (op.inputs[0] == t ? ".dA" : ".dB"));
  }

  // The expert weight (wi or wo) the block's matmul making `out` reads: the parameter, through the cast a quantized
  // weight is read by, and past the rescale of a quantized product.
  static TensorId expert_weight(const ModelGraph& g, const Experiment& exp, const std::string& out) {
    OpId op = g.producer(find(g, exp, out));
    if (op >= 0 && g.op(op).kind == OpKind::Rescale) op = g.producer(g.op(op).inputs[0]);
    TensorId w = op >= 0 && g.op(op).inputs.size() > 1 ? g.op(op).inputs[1] : -1;
    if (w >= 0 && g.producer(w) >= 0 && g.op(g.producer(w)).kind == OpKind::Convert) w = g.op(g.producer(w)).inputs[0];
    if (w < 0 || g.tensor(w).role != TensorRole::Parameter)
      throw Error(Err::StrategyMismatch, exp.params.where("strategy.name"),
                  "strategy moe expects '" + out + "' to be an MoE block's product with its experts' weights (as "
                  "workloads/models/moe_layer.h builds it)",
                  "strategy.name");
    return w;
  }

  static TensorId find(const ModelGraph& g, const Experiment& exp, const std::string& name) {
    TensorId t = g.find_tensor(name);
    if (t < 0)
      throw Error(Err::StrategyMismatch, exp.params.where("strategy.name"),
                  "strategy moe expects the tensor '" + name + "' of an MoE block (named as workloads/models/moe_layer.h "
                  "names them); the " + exp.workload + " step has no such tensor",
                  "strategy.name");
    return t;
  }
};

PODSIM_REGISTER_STRATEGY(Moe, "moe",
                         "Mixture of experts (GShard): experts split over mesh axis 'expert', tokens dispatched and "
                         "combined by all-to-all, the rest data-parallel over it");

}  // namespace
}  // namespace podsim
