#include "sim/serving/run/serving_phases.h"

#include <algorithm>

#include "base/error.h"
#include "base/text.h"
#include "base/params/units.h"
#include "sim/config/loader.h"
#include "workloads/models/transformer_layer.h"

namespace podsim::serving {
namespace {

std::string ints_text(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  return strprintf("[%s]", join(parts, ", ").c_str());
}

std::string layout_text(const Experiment& x) {
  const ParamSet& p = x.params;
  std::string t = x.strategy;
  if (p.has("strategy.scheme") && p.s("strategy.scheme") != "megatron") t += " " + p.s("strategy.scheme");
  if (p.has("strategy.kv_sharding")) t += ", kv_sharding " + p.s("strategy.kv_sharding");
  if (p.has("mesh.axes") && p.has("mesh.shape") && !p.strings("mesh.axes").empty())
    t += strprintf(" over [%s] %s", join(p.strings("mesh.axes"), ", ").c_str(), ints_text(p.ints("mesh.shape")).c_str());
  return t;
}

nlohmann::ordered_json collectives(const std::string& label) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [kind, c] : first_collectives(label)) j[kind] = {{"count", c.first}, {"bytes_per_chip", c.second}};
  return j;
}

}  // namespace

std::unique_ptr<PrefillPhase> PrefillPhase::make(const Experiment& e, const ShapeFrame& decode, const EngineConfig& c,
                                                 size_t requests, const TimerOptions& to) {
  if (e.prefill_phase.empty()) return nullptr;
  const ParamSet& p = e.params;
  if (p.s("serving.engine.policy") == "chunked")
    throw Error(Err::ServingPhases, p.where("serving.engine.policy"),
                "the chunked policy's iterations hold prefill chunks and decodes in one step, which one layout "
                "runs; serving.prefill's layout cannot apply to them. Use the continuous or static policy, or drop "
                "serving.prefill",
                "serving.engine.policy");
  if (p.has("serving.disaggregated.prefill_pod"))
    throw Error(Err::ServingPhases, p.where("serving.disaggregated.prefill_pod"),
                "disaggregated serving prefills on a slice of its own, under the experiment's layout; "
                "serving.prefill lays out prefills on the decode's slice. Drop one of them",
                "serving.disaggregated.prefill_pod");
  std::unique_ptr<PrefillPhase> ph(new PrefillPhase());
  ph->m_exp = &e;
  const Experiment phase = load_experiment_text(e.prefill_phase, e.run.name + " (serving.prefill)");
  ph->m_prefill_layout = layout_text(phase);
  ph->m_decode_layout = layout_text(e);
  ph->m_frame = decode;
  ph->m_frame.yaml = e.prefill_phase;
  ph->m_frame.label = e.run.name + " (a prefill iteration of its serving run, under serving.prefill's layout)";
  PrefillPhase* self = ph.get();
  ph->m_timer = std::make_unique<IterationTimer>(to, [self](const std::vector<Shape>& s) {
    std::vector<IterationCost> costs = simulate_shapes(self->m_frame, s);
    self->check_memory(costs, s, self->m_extra_prefill, "prefill");
    return costs;
  });
  // Both layouts as the partitioner makes them: the decode's at its slots, the prefill's at its first batch.
  ph->m_decode = probe_layout(decode, Shape(static_cast<size_t>(c.slots), Chunk{1, 1}));
  const int64_t first = p.s("serving.engine.policy") == "static"
                            ? std::min<int64_t>(c.slots, static_cast<int64_t>(requests))
                            : 1;
  const LayoutProbe& pre = ph->probe(std::max<int64_t>(1, first));
  // The weights: one stored copy of each weight both layouts split alike, and a copy for each layout of the others
  // (the other layout's part held beside each phase's step).
  std::vector<double> in_prefill(pre.kv_held.size(), 0.0), in_decode(pre.kv_held.size(), 0.0);
  std::vector<double> stored_prefill(pre.kv_held.size(), 0.0), stored_decode(pre.kv_held.size(), 0.0);
  for (const auto& [name, parts] : pre.weights) {
    auto it = ph->m_decode.weights.find(name);
    for (size_t chip = 0; chip < parts.size(); ++chip) {
      const auto none = std::make_pair(std::string(), 0.0);
      const auto& d = it == ph->m_decode.weights.end() || chip >= it->second.size() ? none : it->second[chip];
      stored_prefill[chip] += parts[chip].second;
      stored_decode[chip] += d.second;
      if (parts[chip].first == d.first) continue;
      in_decode[chip] += parts[chip].second;
      in_prefill[chip] += d.second;
    }
    if (it != ph->m_decode.weights.end() && it->second == parts) {
      ++ph->m_alike;
      continue;
    }
    ++ph->m_twice;
    // By kind: layer<N>.x as layer*.x.
    std::string kind = name;
    if (kind.rfind("layer", 0) == 0 && kind.find('.') != std::string::npos) kind = "layer*" + kind.substr(kind.find('.'));
    if (std::find(ph->m_twice_kinds.begin(), ph->m_twice_kinds.end(), kind) == ph->m_twice_kinds.end())
      ph->m_twice_kinds.push_back(kind);
  }
  auto most = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  ph->m_extra_prefill = most(in_prefill);
  ph->m_extra_decode = most(in_decode);
  ph->m_prefill_weights = most(stored_prefill);
  ph->m_decode_weights = most(stored_decode);
  ph->check_memory({IterationCost{0, 0, 0, pre.peak_bytes_per_chip}}, {Shape(1, Chunk{1, 0})}, ph->m_extra_prefill,
                   "prefill");
  ph->check_memory({IterationCost{0, 0, 0, ph->m_decode.peak_bytes_per_chip}}, {Shape(1, Chunk{1, 1})},
                   ph->m_extra_decode, "decode");
  // The cache's bytes as the memory plan holds them (workloads/models/transformer_inference.cpp).
  const TransformerShape t = transformer_shape(p, 1);
  const std::string kv = p.has("workload.kv_dtype") ? p.s("workload.kv_dtype") : p.s("workload.dtype");
  const bool quantized = kv == "int8" || kv == "fp8";
  ph->m_kv = {t.L, quantized ? 1.0 : kv == "fp32" ? 4.0 : 2.0, quantized ? 4.0 : 0.0};
  // A chip's ICI links: two along every torus dimension longer than 2, one along a dimension of 2.
  int64_t links = 0;
  for (int64_t d : e.hardware.pod.dims) links += d > 2 ? 2 : d == 2 ? 1 : 0;
  ph->m_bandwidth = static_cast<double>(links) * e.hardware.ici.link_bandwidth;
  ph->m_latency = e.hardware.ici.hop_latency;
  return ph;
}

const LayoutProbe& PrefillPhase::probe(int64_t prompts) {
  auto it = m_prefill.find(prompts);
  if (it != m_prefill.end()) return it->second;
  return m_prefill[prompts] = probe_layout(m_frame, Shape(static_cast<size_t>(prompts), Chunk{1, 0}));
}

void PrefillPhase::check_memory(const std::vector<IterationCost>& costs, const std::vector<Shape>& shapes,
                                double other, const char* phase) const {
  const double capacity = m_exp->hardware.chip.hbm.capacity;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (other <= 0 || costs[i].peak_bytes_per_chip + other <= capacity || m_exp->run.allow_oom) continue;
    throw Error(Err::ServingPhases, m_exp->params.where("serving.engine.slots"),
                std::string("the prefill layout (serving.prefill: ") + m_prefill_layout + ") and the decode layout (" +
                    m_decode_layout + ") store " + std::to_string(m_twice) +
                    " weights split differently, so a chip holds both copies of those; a " + phase +
                    " iteration (chunks " + shape_text(shapes[i]) + ") peaks at " +
                    format_bytes(costs[i].peak_bytes_per_chip) + " with its own layout's weights and needs " +
                    format_bytes(other) + " more for the other layout's, past the " + format_bytes(capacity) +
                    " of HBM. Give both layouts the same weight split, fewer slots or int8 weights",
                "serving.prefill");
  }
}

void PrefillPhase::check_decode(const std::vector<IterationCost>& costs, const std::vector<Shape>& shapes) const {
  check_memory(costs, shapes, m_extra_decode, "decode");
}

IterationCost PrefillPhase::cost(const Iteration& it) {
  IterationCost c = m_timer->cost(it, {});
  std::vector<int64_t> tokens;
  for (const Work& w : it.work) tokens.push_back(w.fresh + w.cached);
  const LayoutProbe& from = probe(static_cast<int64_t>(tokens.size()));
  const RelayoutCount r = relayout_count(from.kv_held, m_decode.kv_held, tokens, m_kv);
  const double s = relayout_seconds(r, m_bandwidth, m_latency);
  c.seconds += s;
  ++m_relayouts;
  m_bytes += r.total;
  m_max_per_chip = std::max(m_max_per_chip, r.max_per_chip);
  m_max_chips = std::max(m_max_chips, r.chips);
  m_seconds += s;
  return c;
}

nlohmann::ordered_json PrefillPhase::summary(const std::string& decode_label) const {
  nlohmann::ordered_json j;
  j["prefill"] = {{"layout", m_prefill_layout},
                  {"weight_bytes_per_chip", m_prefill_weights},
                  {"other_layout_weight_bytes_per_chip", m_extra_prefill},
                  {"collectives", collectives(m_frame.label)}};
  j["decode"] = {{"layout", m_decode_layout},
                 {"weight_bytes_per_chip", m_decode_weights},
                 {"other_layout_weight_bytes_per_chip", m_extra_decode},
                 {"collectives", collectives(decode_label)}};
  j["weights"] = {{"stored_alike", m_alike}, {"stored_twice", m_twice}, {"stored_twice_kinds", m_twice_kinds}};
  j["relayout"] = {{"iterations", m_relayouts},
                   {"bytes", m_bytes},
                   {"max_bytes_per_chip", m_max_per_chip},
                   {"max_chips_receiving", m_max_chips},
                   {"seconds", m_seconds},
                   {"chip_bandwidth_bytes_per_s", m_bandwidth},
                   {"timing", "formula: the fullest chip's bytes over its ICI links, after one hop"}};
  return j;
}

}  // namespace podsim::serving
