// A GShard mixture-of-experts feed-forward block (Lepikhin et al. 2020, §2.2), built from einsums over one-hot
// dispatch and combine tensors as the paper writes it (docs/moe.md):
//
//   xg       [G, S, M]    = reshape(x [B, T, M])                 the step's tokens in G groups of S = B T / G
//   logits   [G, S, E]    = einsum("gsm,me->gse", xg, gate.w)
//   combine, dispatch [G, S, E, C], aux_loss, routes = top2_gating(logits)   (workloads/ops/top2_gating.cpp)
//   xin      [E, G, C, M] = einsum("gsec,gsm->egcm", dispatch, xg)            what each expert receives
//   h        [E, G, C, H] = relu(einsum("egcm,emh->egch", xin, wi))
//   xout     [G, E, C, M] = einsum("egch,ehm->gecm", h, wo)                   FFN_e(x) = wo_e . ReLU(wi_e . x)
//   y        [B, T, M]    = reshape(einsum("gsec,gecm->gsm", combine, xout))
//
// Tensors are named "<name>.groups", ".gate.w", ".gate.logits", ".gating.{combine,dispatch,aux_loss,routes}",
// ".dispatched", ".wi", ".hidden", ".relu", ".wo", ".expert_out", ".combined", ".out"; the moe strategy
// (strategies/moe.cpp) finds them by these names. The experts have no biases (the paper's FFN_e has none).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/params/param.h"
#include "workloads/builder.h"

namespace podsim {

struct MoeConfig {
  int64_t experts = 0;           // E; 0: dense (no MoE layers)
  int64_t groups = 0;            // G (resolved: never 0)
  double capacity_factor = 1.0;  // capacity C = min(S, ceil(2 S / E x capacity_factor))
  double aux_loss = 0.0;         // coefficient of the load-balancing loss in the step's loss
  bool sample_second = false;    // random routing of the second expert
  uint64_t seed = 0;             // the run's seed, for random routing
};

// workload.moe.* (experts, groups, capacity_factor, aux_loss, second_expert), declared once.
std::vector<ParamSpec> moe_param_specs();
// The configuration (workload.moe.groups 0 resolves to `batch`: one group per sequence).
MoeConfig moe_config(const ParamSet& p, int64_t batch);
// Cross-field checks (experts 1, groups that do not divide the tokens, no layer to make MoE); throws Error at the
// offending key.
void validate_moe(const ParamSet& p, int64_t batch, int64_t tokens, int64_t layers);
// Per-group expert capacity: ceil(2 S capacity_factor / E), at least 1 and at most S.
int64_t moe_capacity(int64_t group_size, int64_t experts, double capacity_factor);
// Whether layer `l` (0-based) of a Transformer is an MoE layer: every other layer, starting with the second.
inline bool is_moe_layer(int64_t l, const MoeConfig& c) { return c.experts > 0 && l % 2 == 1; }

struct MoeBlock {
  TensorId out = -1;       // [B, T, M], to be added to the residual stream
  TensorId aux_loss = -1;  // the weighted load-balancing loss term [1]
};
// How the experts' matmuls read their weights: `linear(x, weight name, shape, equation, output name)`; empty:
// b.einsum with b.param (a quantized inference step passes its own: workloads/models/transformer_layer.h).
using MoeLinear = std::function<TensorId(TensorId, const std::string&, std::vector<int64_t>, const std::string&,
                                         const std::string&)>;
// `weights`: the prefix of the block's weights when it differs from `name` (the decodes of a generate form share one
// layer's weights).
MoeBlock moe_ffn(GraphBuilder& b, TensorId x, int64_t hidden, const MoeConfig& c, const std::string& name,
                 const MoeLinear& linear = nullptr, const std::string& weights = "");

}  // namespace podsim
