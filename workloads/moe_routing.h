// GShard top-2 routing, shared by the gating kernels (workloads/ops/top2_gating.cpp) and the reports that read
// their decisions (sim/engine/moe_report.h, tests). Lepikhin et al. 2020, §2.2 and Algorithm 1.
//
// One group of S tokens with gate probabilities gates[s][e] (softmax of the logits over E experts), capacity C:
//   e1 = argmax_e gates, e2 = argmax_{e != e1} gates (ties: the lower index); w1 = g1 / (g1 + g2), w2 = g2 / (g1 + g2).
//   Random routing (optional): the token is sent to e2 only if 2 w2 > u, u uniform in [0, 1) per token.
//   Slots: tokens claim their first expert in token order (slot = how many earlier tokens chose it), then, after
//   every first choice, their second expert in token order, after the first choices the expert accepted. A slot >= C
//   is over capacity: that assignment is dropped (a token with both dropped passes through the residual only).
//
//   std::vector<Route> r = route_group(gates, S, E, C, sample_second, uniform_of_token);
//
// The routes tensor [G, S, 4] holds per token {e1, slot1, e2, slot2}: a slot >= 0 is the position in the expert's
// buffer, -1 means over capacity (dropped), -2 means the second expert was not sampled (random routing). Padded
// groups of a partitioned run hold -1 everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "workloads/tensor.h"

namespace podsim {

constexpr int64_t kOverCapacity = -1;
constexpr int64_t kNotSampled = -2;

struct Route {
  int64_t e1 = -1, slot1 = kOverCapacity, e2 = -1, slot2 = kOverCapacity;
  double w1 = 0, w2 = 0;  // normalised gates of the two experts
};

// Routes one group; `gates` is S x E row-major. `uniform(s)` is called only when `sample_second`.
std::vector<Route> route_group(const std::vector<double>& gates, int64_t S, int64_t E, int64_t C, bool sample_second,
                               const std::function<double(int64_t s)>& uniform);

// Softmax of one row of E logits into `out` (double precision).
void gate_softmax(const float* logits, int64_t E, double* out);

// The uniform number in [0, 1) that random routing draws for token `token` (global position in the step's token
// order, group-major) of gating op `op_name` in a run with `seed`: a hash, so every partitioning draws the same.
double routing_uniform(uint64_t seed, const std::string& op_name, int64_t token);

// Per-expert load of one gating op from its routes tensor (the logical [G, S, 4] tensor).
struct ExpertLoad {
  int64_t tokens = 0;                  // G x S
  int64_t requested = 0;               // assignments asked for: one or two per token
  int64_t routed = 0;                  // assignments accepted within capacity
  int64_t dropped_tokens = 0;          // tokens routed to no expert (residual only)
  int64_t second_not_sampled = 0;      // second choices skipped by random routing
  std::vector<int64_t> first_choice;   // tokens whose first choice is each expert (before capacity)
  std::vector<int64_t> per_expert;     // assignments each expert accepted
};
ExpertLoad expert_load(const Tensor& routes, int64_t experts);

}  // namespace podsim
