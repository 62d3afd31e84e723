#include "sim/engine/inference_report.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "hw/pod/pod.h"
#include "hw/pod/pod_context.h"
#include "sim/engine/engine.h"
#include "workloads/inference.h"
#include "workloads/model_flops.h"
#include "workloads/op_def.h"
#include "workloads/ragged.h"

namespace podsim {
namespace {

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }

const char* step_name(StepKind k) {
  switch (k) {
    case StepKind::Prefill: return "prefill";
    case StepKind::Decode: return "decode";
    case StepKind::Mixed: return "mixed";
    case StepKind::Generate: return "generate";
    case StepKind::Train: break;
  }
  return "train";
}

const char* type_name(DType t) { return dtype_name(t); }

}  // namespace

double step_model_flops(const Prepared& p, FlopsConvention convention) {
  const ParamSet& params = p.exp.params;
  const ModelGraph& g = p.graph;
  if (!params.has("workload.step") || !inference_step(params)) return g.model_flops(convention);
  const InferenceStep it = inference_config(params);
  if (it.pad_sequences == 0 && it.pad_tokens == 0) return g.model_flops(convention);
  const TensorId last = g.find_tensor("final_ln.last");
  const OpId split = last >= 0 ? g.producer(last) : -1;
  const double places = static_cast<double>(it.rows * it.row_len);
  const double token_share = places > 0 ? static_cast<double>(it.real_places()) / places : 1.0;
  const double seq_share =
      static_cast<double>(it.real_sequences()) / static_cast<double>(ragged_sequences(it.seqs));
  return model_flops_scaled(g, convention, [&](OpId i) { return i > split ? seq_share : token_share; });
}

std::optional<nlohmann::ordered_json> inference_report(const Prepared& p, const Simulation& s) {
  const ParamSet& params = p.exp.params;
  if (!params.has("workload.step") || !inference_step(params)) return std::nullopt;
  const InferenceStep it = inference_config(params);
  const double T = s.step_time;
  int64_t context = 0;
  for (int64_t i = 0; i < ragged_sequences(it.seqs); ++i) context += ragged_context(it.seqs, i);
  // The result chip's cache traffic: what its attention kernels read from the KV cache (their reads less the
  // queries), what its cache writes wrote.
  double kv_read = 0, kv_written = 0, kv_cache = 0, weights = 0;
  const int32_t role = p.plan.role_of_chip[p.plan.result_chip];
  if (role >= 0) {
    const ModelGraph& g = p.plan.programs[role].graph;
    for (const Op& op : g.ops()) {
      if (op.kind == OpKind::RaggedAttention)
        kv_read += op_cost(g, op).bytes_read - g.tensor(op.inputs[0]).stored_bytes();
      if (op.kind == OpKind::KvCacheWrite) kv_written += op_cost(g, op).bytes_written;
    }
    const MemoryPlan& m = p.ctx->programs[role].memory;
    kv_cache = m.at_peak.kv_cache;
    weights = m.at_peak.weights;
  }
  const double peak_bw = p.exp.hardware.chip.hbm.bandwidth;
  nlohmann::ordered_json j;
  j["step"] = step_name(it.kind);
  j["sequences"] = it.real_sequences();
  // Generate: the prompts' tokens, then one token a sequence for each decode after the prefill.
  const int64_t decodes = it.generate > 0 ? (it.generate - 1) * ragged_sequences(it.seqs) : 0;
  if (it.pad_sequences > 0 || it.pad_tokens > 0) {
    j["padding_sequences"] = it.pad_sequences;  // the engine's batch padding (workload.pad_sequences, pad_tokens)
    j["padding_tokens"] = it.pad_tokens;
  }
  j["new_tokens"] = it.new_tokens() + decodes;
  j["computed_tokens"] = it.rows * it.row_len + decodes;  // the padding past a packed row's last sequence too
  j["context_tokens"] = context;
  if (it.generate > 0) j["generated_tokens"] = it.generate * ragged_sequences(it.seqs);
  j["packed"] = it.seqs.packed;
  j["attention"] = it.flash ? "flash" : "ragged";
  j["kv_capacity"] = it.capacity;
  j["kv_sequences"] = it.resident;
  j["weight_dtype"] = type_name(it.weight);
  j["kv_dtype"] = type_name(it.kv);
  j["activation_dtype"] = type_name(it.activation);
  j["sampling"] = it.sampling.sampling;
  j["kv_cache_bytes_per_chip"] = kv_cache;
  j["weight_bytes_per_chip"] = weights;
  j["kv_bytes_read_per_chip"] = kv_read;
  j["kv_bytes_written_per_chip"] = kv_written;
  // Tokens per second: a generate step's generated tokens, an iteration's new ones.
  const double tokens = j.value("generated_tokens", j["new_tokens"].get<double>());
  j["tokens_per_s"] = T > 0 ? tokens / T : 0.0;
  // Memory-bandwidth utilization as serving papers define it: the bytes a step must stream (its weights and the
  // cache its attention reads) over the step time, against the chip's HBM bandwidth.
  j["mbu"] = T > 0 && peak_bw > 0 ? r6((weights + kv_read) / T / peak_bw) : 0.0;
  return j;
}

}  // namespace podsim
