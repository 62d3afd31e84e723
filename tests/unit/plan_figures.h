// What the plan-figure tests (plan_figures_test, sequence_parallel_test, pipeline_figures_test) share: the MLP and
// the Transformer they plan, with their parameters by hand, and a role's memory plan as the engine lowers it.
//
// Memory is the lowered program's memory plan, with run.fusion: none so that every tensor of the program lives in HBM
// and the count is over the plan's tensors alone (fusion, which keeps some on chip, has its own tests).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "tests/unit/plan_steps.h"

namespace podsim::plan_models {

using plan_steps::Step;

// The memory plan of role `r` as the engine lowers it.
inline MemoryPlan memory(const Step& s, size_t r) {
  const Program& p = s.plan.programs.at(r);
  return lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"}).memory;
}

// The most bytes of the activations category (activations, the batch, losses) role `r` holds at once: the memory
// plan of the same lowered program with every other tensor taking no space.
inline double activation_peak(const Step& s, size_t r) {
  const Program& p = s.plan.programs.at(r);
  const ExecProgram ep = lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"});
  ModelGraph g = p.graph;
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    TensorInfo& info = g.tensor(static_cast<TensorId>(t));
    const TensorRole role = info.role;
    if (role != TensorRole::Activation && role != TensorRole::Input && role != TensorRole::Label &&
        role != TensorRole::Loss)
      info.role = TensorRole::Updated;  // the memory plan gives an updated value no space of its own
  }
  return plan_memory(g, ep).peak_bytes;
}

// ---- the models, by hand -------------------------------------------------------------------------------------

// The MLP of these tests: batch B, input I, hidden H, 2 hidden layers, C classes, fp32 (4 bytes).
constexpr int64_t B = 16, I = 8, H = 32, C = 4;
constexpr double F32 = 4;

inline std::string mlp(const std::string& optimizer, int64_t batch = B, int layers = 2) {
  return "workload: {model: mlp, batch: " + std::to_string(batch) + ", input: " + std::to_string(I) +
         ", hidden: " + std::to_string(H) + ", layers: " + std::to_string(layers) + ", classes: " + std::to_string(C) +
         ", dtype: fp32, optimizer: " + optimizer + "}\nrun: {fusion: none}\n";
}

// The MLP's parameters and their elements.
inline const std::vector<std::pair<std::string, int64_t>> kMlpParams = {
    {"fc0.w", I * H}, {"fc0.b", H}, {"fc1.w", H * H}, {"fc1.b", H}, {"out.w", H * C}, {"out.b", C}};
constexpr int64_t kMlpElements = I * H + H + H * H + H + H * C + C;

// The Transformer of these tests: d_model D, d_ff F, heads NH of width E = D / NH, vocabulary V, sequence S, batch
// TB (unless a test says otherwise), fp32.
constexpr int64_t D = 16, F = 32, NH = 4, E = D / NH, V = 24, S = 8, TB = 4;

inline std::string transformer(int layers, int64_t batch, const std::string& optimizer) {
  return "workload: {model: transformer, layers: " + std::to_string(layers) + ", d_model: " + std::to_string(D) +
         ", d_ff: " + std::to_string(F) + ", heads: " + std::to_string(NH) + ", vocab: " + std::to_string(V) +
         ", seq_len: " + std::to_string(S) + ", batch: " + std::to_string(batch) + ", dtype: fp32, optimizer: " +
         optimizer + "}\nrun: {fusion: none}\n";
}

// A Transformer parameter: its name, its elements, and by how much Megatron's split over `model` divides it.
struct TParam {
  std::string name;
  int64_t elements;
  int64_t megatron_split;  // 1: replicated
  int wus_dim;             // the dimension weight-update sharding splits (the first one `model` does not)
};

inline std::vector<TParam> transformer_params(int layers, int64_t model) {
  std::vector<TParam> p = {{"embedding", V * D, model, 1}};  // [V, D], V split (vocabulary-parallel)
  for (int l = 0; l < layers; ++l) {
    const std::string n = "layer" + std::to_string(l);
    p.push_back({n + ".ln1.gamma", D, 1, 0});
    p.push_back({n + ".ln1.beta", D, 1, 0});
    for (const char* w : {".attn.q.w", ".attn.k.w", ".attn.v.w"}) p.push_back({n + w, D * NH * E, model, 0});  // [D, H, E]
    p.push_back({n + ".attn.o.w", NH * E * D, model, 1});  // [H, E, D], H split
    p.push_back({n + ".ln2.gamma", D, 1, 0});
    p.push_back({n + ".ln2.beta", D, 1, 0});
    p.push_back({n + ".ffn.w1", D * F, model, 0});  // [D, F], F split
    p.push_back({n + ".ffn.b1", F, model, 0});      // [F] split: data goes after model on the same dimension
    p.push_back({n + ".ffn.w2", F * D, model, 1});  // [F, D], F split
    p.push_back({n + ".ffn.b2", D, 1, 0});
  }
  p.push_back({"final_ln.gamma", D, 1, 0});
  p.push_back({"final_ln.beta", D, 1, 0});
  p.push_back({"unembed", D * V, model, 0});  // [D, V], V split
  return p;
}

}  // namespace podsim::plan_models
