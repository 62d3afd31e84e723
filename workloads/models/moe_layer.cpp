#include "workloads/models/moe_layer.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace podsim {

std::vector<ParamSpec> moe_param_specs() {
  return {
      ParamSpec::integer("workload.moe.experts",
                         "Experts per MoE layer (GShard): every other feed-forward block (the second, fourth, ...) "
                         "becomes a mixture of this many experts with top-2 gating; 0 = a dense Transformer.")
          .range(0, 1LL << 20)
          .def("0"),
      ParamSpec::integer("workload.moe.groups",
                         "Groups G the step's tokens are split into for routing (each group of S = tokens / G "
                         "tokens routes on its own, with its own expert capacity); independent of the chip count. "
                         "0 = one group per sequence (G = batch).")
          .range(0, 1LL << 30)
          .def("0"),
      ParamSpec::real("workload.moe.capacity_factor",
                      "Expert capacity per group is ceil(2 S / E x capacity_factor) tokens (at most S); "
                      "assignments past it are dropped.")
          .positive(1e6)
          .def("1.0"),
      ParamSpec::real("workload.moe.aux_loss",
                      "Coefficient k of the auxiliary load-balancing loss, added to the loss as k x l_aux with "
                      "l_aux = (1/E) sum_e (c_e / S) m_e averaged over groups (GShard Algorithm 1).")
          .range(0, 1e6)
          .def("0.01"),
      ParamSpec::choice("workload.moe.second_expert", {"all", "random"},
                        "Second-expert policy: all (every token also goes to its second expert, within capacity) "
                        "or random (only if 2 x its normalised gate > a uniform draw, GShard's random routing).")
          .def("all"),
  };
}

int64_t moe_capacity(int64_t group_size, int64_t experts, double capacity_factor) {
  const double c = std::ceil(2.0 * static_cast<double>(group_size) * capacity_factor / static_cast<double>(experts) - 1e-9);
  return std::clamp<int64_t>(static_cast<int64_t>(c), 1, group_size);
}

MoeConfig moe_config(const ParamSet& p, int64_t batch) {
  MoeConfig c;
  c.experts = p.i("workload.moe.experts");
  c.groups = p.i("workload.moe.groups") > 0 ? p.i("workload.moe.groups") : batch;
  c.capacity_factor = p.f("workload.moe.capacity_factor");
  c.aux_loss = p.f("workload.moe.aux_loss");
  c.sample_second = p.s("workload.moe.second_expert") == "random";
  c.seed = static_cast<uint64_t>(p.i("run.seed"));
  return c;
}

void validate_moe(const ParamSet& p, int64_t batch, int64_t tokens, int64_t layers) {
  const int64_t e = p.i("workload.moe.experts");
  if (e == 0) return;
  if (e == 1)
    throw Error(Err::OutOfRange, p.where("workload.moe.experts"),
                "workload.moe.experts = 1: top-2 gating needs at least 2 experts (0 means a dense Transformer)",
                "workload.moe.experts");
  if (layers < 2)
    throw Error(Err::OutOfRange, p.where("workload.layers"),
                strprintf("workload.layers = %lld has no MoE layer: experts replace every other feed-forward block, "
                          "starting with the second layer; use at least 2 layers",
                          static_cast<long long>(layers)),
                "workload.layers");
  const int64_t g = p.i("workload.moe.groups") > 0 ? p.i("workload.moe.groups") : batch;
  if (tokens % g != 0)
    throw Error(Err::NotDivisible, p.where("workload.moe.groups"),
                strprintf("workload.moe.groups = %lld does not divide the step's %lld tokens (batch x seq_len); each "
                          "group holds tokens / groups of them",
                          static_cast<long long>(g), static_cast<long long>(tokens)),
                "workload.moe.groups");
}

MoeBlock moe_ffn(GraphBuilder& b, TensorId x, int64_t hidden, const MoeConfig& c, const std::string& n,
                 const MoeLinear& linear, const std::string& weights) {
  const std::string w = weights.empty() ? n : weights;
  auto expert = [&](TensorId in, const std::string& name, std::vector<int64_t> shape, const char* eq,
                    const std::string& out) {
    return linear ? linear(in, name, shape, eq, out) : b.einsum(in, b.param(name, shape), eq, out);
  };
  const std::vector<int64_t> shape = b.graph().tensor(x).shape;  // [B, T, M]
  const int64_t M = shape.back(), tokens = b.graph().tensor(x).elements() / M;
  const int64_t G = c.groups, S = tokens / G, E = c.experts, C = moe_capacity(S, E, c.capacity_factor);
  TensorId xg = b.reshape(x, {G, S, M}, n + ".groups");
  TensorId logits = b.einsum(xg, b.param(w + ".gate.w", {M, E}), "gsm,me->gse", n + ".gate.logits");
  GraphBuilder::Gating gate = b.top2_gating(logits, C, c.aux_loss, c.sample_second, c.seed, n + ".gating");
  TensorId xin = b.einsum(gate.dispatch, xg, "gsec,gsm->egcm", n + ".dispatched");
  TensorId h = expert(xin, w + ".wi", {E, M, hidden}, "egcm,emh->egch", n + ".hidden");
  TensorId act = b.relu(h, n + ".relu");
  TensorId xout = expert(act, w + ".wo", {E, hidden, M}, "egch,ehm->gecm", n + ".expert_out");
  TensorId y = b.einsum(gate.combine, xout, "gsec,gecm->gsm", n + ".combined");
  return {b.reshape(y, shape, n + ".out"), gate.aux_loss};
}

}  // namespace podsim
