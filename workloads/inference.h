// The inference steps of a Transformer (docs/serving.md, "The inference step"): the keys that pose one serving
// iteration, declared once, checked across fields, and resolved into the sequences the step's graph holds.
//   workload.step: prefill   workload.batch prompts of workload.seq_len tokens, or workload.prompt_lengths (ragged,
//                            padded as workload.prefill_padding says)
//   workload.step: decode    workload.batch sequences of workload.context cached tokens (or workload.context_lengths)
//                            each add one token
//   workload.step: mixed     workload.chunks ["NEW+CACHED", ...]: NEW tokens after CACHED ones (a decode is "1+C")
//   (prefill, decode, mixed)  workload.pad_sequences, pad_tokens: the engine's batch padding (empty slots, padded
//                            request and token buckets), computed as the engine computes it
//   workload.step: generate  a prefill of the prompts and workload.generate - 1 decodes after it in one graph, each
//                            decode fed the token the one before sampled (static batching: Pope et al.)
// The KV cache (workload.kv_capacity places per sequence, workload.kv_sequences sequences resident), the serving
// types (workload.weight_dtype, kv_dtype, activation_dtype) and the sampling (workload.sampling, top_k, top_p).
//
//   if (inference_step(p)) { const InferenceStep s = inference_config(p); ... }
#pragma once

#include <string>
#include <vector>

#include "base/params/param.h"
#include "workloads/op.h"

namespace podsim {

enum class StepKind { Train, Prefill, Decode, Mixed, Generate };

struct InferenceStep {
  StepKind kind = StepKind::Train;
  OpAttrs::Ragged seqs;            // the iteration's sequences (generate: the prompts' prefill)
  int64_t rows = 0, row_len = 0;   // its activations: [rows, row_len, d_model]
  bool flash = false;              // attention by the fused kernel (a prefill without a cached prefix, one row each)
  int64_t capacity = 0;            // KV cache places per sequence
  int64_t resident = 0;            // sequences whose caches are resident (at least the iteration's)
  int64_t generate = 0;            // generate: tokens each sequence generates (the first from the prefill)
  DType weight = DType::BF16;      // the layers' matmul weights (int8, fp8: quantized with per-channel scales)
  DType kv = DType::BF16;          // the KV cache (int8, fp8: quantized per token and head)
  DType activation = DType::BF16;  // the matmuls' activations (int8, fp8: quantized per row: weights and activations)
  OpAttrs sampling;                // sampling, top_k, top_p, seed
  int64_t kv_block = 0;            // keys per block of the decode attention kernel
  // The engine's batch padding (workload.pad_sequences, pad_tokens): the last pad_sequences of seqs are empty
  // (nothing new, nothing cached: no cache read or written, their samples discarded), and pad_tokens places of the
  // activations belong to no real sequence (one to each padded sequence first, the rest to the last padded one, or
  // past the last sequence of a packed row). Computed through every layer; left out of model FLOPs.
  int64_t pad_sequences = 0, pad_tokens = 0;
  int64_t new_tokens() const;      // fresh tokens of the iteration, padding excluded
  int64_t real_sequences() const;  // sequences less the padded ones
  int64_t real_places() const;     // places of the real sequences (their prompts' padding included)
};

// workload.step and the keys above.
std::vector<ParamSpec> inference_param_specs();
// Whether the step is an inference step (workload.step is not train).
bool inference_step(const ParamSet& p);
// The iteration the keys pose, checked (throws Error at the offending key: lengths past workload.max_context, a
// cache that cannot hold a sequence, a number format the chip lacks, a list whose length is not the batch).
InferenceStep inference_config(const ParamSet& p);
// The tokens a sequence of `n` is padded to: n (none), the next power of two (bucket), `longest` (max).
int64_t padded_length(const std::string& padding, int64_t n, int64_t longest);

}  // namespace podsim
