#include "strategies/spmd_checks.h"

#include <set>
#include <string>

#include "base/error.h"
#include "base/text.h"

namespace podsim {

void check_spmd_convolutional(bool has_rules, const Experiment& exp) {
  const ParamSet& p = exp.params;
  static const std::set<std::string> cnn = {"resnet", "amoebanet", "efficientnet", "ssd", "botnet"};
  if (has_rules || !cnn.count(exp.workload) || p.s("strategy.scheme") == "none" || p.b("strategy.spatial") ||
      !p.strings("strategy.shard").empty())
    return;
  const std::string key = p.where("strategy.scheme").file.empty() ? "strategy.name" : "strategy.scheme";
  throw Error(Err::StrategyMismatch, p.where(key),
              "strategy.scheme " + p.s("strategy.scheme") + " has no tensor-sharding rules for the " + exp.workload +
                  " workload (its convolutions' channels are not split), so spmd would run the whole step on "
                  "every chip; split the images with strategy.spatial: true, annotate tensors with "
                  "strategy.shard, or use data_parallel or fsdp",
              key);
}

// strategy.kv_sharding: batch splits the caches by sequence: one row per sequence, as many as the axes divide.
void check_spmd_kv_batch(const ModelGraph& g, const Experiment& exp, const Mesh& mesh) {
  const ParamSet& p = exp.params;
  const TensorId k = g.find_tensor("layer0.attn.k_cache");
  if (k < 0 || p.s("strategy.kv_sharding") != "batch") return;
  const auto& axes = p.strings("strategy.spmd_axes");
  int64_t n = 1;
  for (const std::string& a : axes) n *= mesh.axis_size(a);
  const int64_t seqs = g.tensor(k).shape[0];
  const TensorId tokens = g.find_tensor("tokens");
  const bool packed = tokens >= 0 && g.tensor(tokens).shape[0] == 1 && seqs > 1;
  if (!packed && seqs % n == 0) return;
  throw Error(Err::KvShardingSplit, p.where("strategy.kv_sharding"),
              packed ? "strategy.kv_sharding: batch splits the KV cache by sequence, but the iteration packs its " +
                           std::to_string(seqs) + " sequences of unequal lengths into one row (ragged prompts or "
                           "chunks); give the sequences equal lengths (prefill_padding: max) or split by heads"
                     : "strategy.kv_sharding: batch splits the iteration's " + std::to_string(seqs) +
                           " sequences over the " + std::to_string(n) + " devices of [" + join(axes, ", ") +
                           "], which do not divide them; use a batch that is a multiple of " + std::to_string(n) +
                           " or kv_sharding: heads",
              "strategy.kv_sharding");
}

}  // namespace podsim
