#include "sim/engine/memory_summary.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "hw/pod/pod_context.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

using J = nlohmann::ordered_json;

J breakdown(const MemoryBreakdown& b) {
  return {{"weights", b.weights},
          {"gradients", b.gradients},
          {"optimizer_state", b.optimizer_state},
          {"activations", b.activations},
          {"temporaries", b.temporaries},
          {"weight_copies", b.weight_copies},
          {"kv_cache", b.kv_cache}};
}

}  // namespace

void summary_head(const Prepared& p, bool simulated, J& j) {
  const Experiment& e = p.exp;
  j["podsim_version"] = PODSIM_VERSION;
  j["experiment"] = e.run.name;
  j["hardware"] = e.hardware.preset;
  j["workload"] = e.workload;
  j["strategy"] = e.strategy;
  j["numeric"] = e.run.numeric;
  j["seed"] = e.run.seed;
  j["pod_dims"] = e.hardware.pod.dims;
  j["chips"] = e.hardware.pod.chips();
  int64_t active = 0;
  for (int32_t r : p.plan.role_of_chip) active += r >= 0;
  j["active_chips"] = active;
  j["simulated"] = simulated;
}

bool microbenchmark(const Prepared& p) {
  const ParamSet& params = p.exp.params;
  const std::string model = params.has("workload.model") ? params.s("workload.model") : "";
  return model == "matmul" || model == "collective" || model == "traffic" || model == "memory";
}

std::optional<int64_t> trainable_parameters(const Prepared& p) {
  // An imported module's parameters are weights and optimizer state alike: nothing tells them apart.
  if (microbenchmark(p) || p.plan.logical_copies > 1 || p.exp.workload == "hlo") return std::nullopt;
  double n = 0;
  for (const TensorInfo& t : p.graph.tensors())
    if (t.role == TensorRole::Parameter) n += static_cast<double>(t.elements());
  return static_cast<int64_t>(n);
}

bool every_role_fits(const Prepared& p) {
  for (size_t r = 0; r < p.plan.programs.size(); ++r)
    if (p.ctx->programs[r].memory.peak_bytes > p.exp.hardware.chip.hbm.capacity) return false;
  return true;
}

J role_memory(const Prepared& p, size_t role) {
  const MemoryPlan& m = p.ctx->programs[role].memory;
  return {{"peak_memory_bytes", m.peak_bytes},
          {"memory_at_peak", breakdown(m.at_peak)},
          {"fits", m.peak_bytes <= p.exp.hardware.chip.hbm.capacity}};
}

J memory_section(const Prepared& p) {
  const int32_t role = p.plan.role_of_chip[p.plan.result_chip];
  const ExecProgram& ep = p.ctx->programs[role];
  const MemoryPlan& m = ep.memory;
  J largest = J::array();
  for (const auto& t : m.largest_at_peak) largest.push_back({{"name", t.name}, {"role", t.role}, {"bytes", t.bytes}});
  return {{"peak_bytes", m.peak_bytes},
          {"capacity_bytes", p.exp.hardware.chip.hbm.capacity},
          {"fits", every_role_fits(p)},
          {"peak_op", m.peak_op >= 0 ? ep.ops[m.peak_op].name : std::string()},
          {"at_peak", breakdown(m.at_peak)},
          {"largest_at_peak", largest}};
}

J pipeline_plan(const Prepared& p) {
  const PlanPipeline& pp = p.plan.pipeline;
  if (pp.stages <= 0) return nullptr;
  J cells = J::array();
  for (const auto& c : pp.cells) cells.push_back(c);
  const double k = static_cast<double>(pp.stages), m = static_cast<double>(pp.micro_batches);
  return {{"stages", pp.stages},
          {"micro_batches", pp.micro_batches},
          {"schedule", pp.schedule},
          {"remat", pp.remat},
          {"stage_cells", cells},
          {"stage_estimated_s", pp.stage_seconds},
          {"ideal_bubble_fraction", std::round((k - 1) / (m + k - 1) * 1e6) / 1e6}};
}

std::string memory_summary_json(const Prepared& p) {
  J j;
  summary_head(p, false, j);
  if (p.plan.role_of_chip[p.plan.result_chip] >= 0) {
    j["peak_memory_bytes"] = p.ctx->programs[p.plan.role_of_chip[p.plan.result_chip]].memory.peak_bytes;
    j["memory"] = memory_section(p);
  } else {
    j["peak_memory_bytes"] = 0.0;
  }
  // Per role that runs on some chip, in role order (as in the full summary).
  std::vector<int64_t> count(p.plan.programs.size(), 0);
  for (int32_t r : p.plan.role_of_chip)
    if (r >= 0) ++count[r];
  J roles = J::array();
  for (size_t r = 0; r < p.plan.programs.size(); ++r) {
    if (count[r] == 0) continue;
    const J mem = role_memory(p, r);
    roles.push_back({{"role", p.plan.programs[r].role},
                     {"chips", count[r]},
                     {"peak_memory_bytes", mem["peak_memory_bytes"]},
                     {"memory_at_peak", mem["memory_at_peak"]},
                     {"fits", mem["fits"]}});
  }
  j["roles"] = roles;
  if (const auto n = trainable_parameters(p)) j["parameters"] = *n;
  if (p.plan.pipeline.stages > 0) j["pipeline"] = pipeline_plan(p);
  j["notes"] = p.plan.notes;
  return j.dump(2) + "\n";
}

}  // namespace podsim
