// The decoder Transformer's pieces (workloads/models/transformer.cpp has the equations), shared by its training
// step and its inference steps (transformer_inference.cpp): its shape from the workload's keys, the norms, the
// layer (attention projections, the attention itself left to the caller, the FFN or MoE block, the residuals) and
// the matmuls that read a weight, in bf16 or quantized (AQT int8 or fp8: workloads/ops/quantize.cpp).
//
//   TransformerShape s = transformer_shape(p, batch);
//   DecoderBuilder d(b, s);
//   x = d.layer(x, 0, "", attend, &aux_terms, nullptr);   // attend(q, k, v, 0, "layer0") -> the context
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "workloads/builder.h"
#include "workloads/models/moe_layer.h"

namespace podsim {

struct TransformerShape {
  int64_t L = 0, D = 0, F = 0, H = 0, KV = 0, dh = 0, V = 0;
  bool causal = true, rms = false, parallel = false, rope = false, flash = false, tie = false;
  std::string ffn = "gelu";
  OpAttrs::Blocks blocks;
  MoeConfig moe;
};
// The shape the workload's keys give; `moe_batch` resolves workload.moe.groups 0 (one group per row).
TransformerShape transformer_shape(const ParamSet& p, int64_t moe_batch);

// The types a layer's weighted matmuls read: weights as stored (the builder's weight type) unless `weight` is int8
// or fp8 (quantized with per-channel scales, "<w>.scale"); activations quantized per row too when `activation` is.
struct MatmulTypes {
  DType weight = DType::BF16, activation = DType::BF16;
};

class DecoderBuilder {
 public:
  DecoderBuilder(GraphBuilder& b, const TransformerShape& s, MatmulTypes t = {});

  // The attention of one layer: q, k, v (after the rotary embedding), the layer and its tensors' name ("layer0",
  // "gen1.layer0") -> the context, shaped like q.
  using Attend = std::function<TensorId(TensorId q, TensorId k, TensorId v, int64_t layer, const std::string& name)>;

  // A parameter in the builder's weight type.
  TensorId weight(const std::string& name, std::vector<int64_t> shape);
  // The norm `name` of x, its parameters "<weights>.gamma" (and ".beta"); `weights` empty: `name`.
  TensorId norm(TensorId x, const std::string& name, const std::string& weights = "");
  // x . W by `equation`, W the layer weight `wname` (quantized as the types say); the output is named `name`.
  TensorId linear(TensorId x, const std::string& wname, std::vector<int64_t> shape, const std::string& equation,
                  const std::string& name);
  // Layer l of the decoder on the residual stream x [R, S, D]: its weights named "layer<l>." ..., its other tensors
  // `prefix` + "layer<l>." ... (the decodes of a generate form each have their own prefix); an MoE layer's load
  // balancing term goes to `aux`. `positions` (an inference step's sequences) places the rotary embedding's tokens.
  TensorId layer(TensorId x, int64_t l, const std::string& prefix, const Attend& attend, std::vector<TensorId>* aux,
                 const OpAttrs::Ragged* positions);
  // The final norm and the logits of hf [.., D]: x . unembed [D, V] (or the embedding's transpose when tied), by
  // `equation` ("bsd,dv->bsv").
  TensorId logits(TensorId hf, const std::string& equation, const std::string& name);

 private:
  GraphBuilder& m_b;
  TransformerShape m_s;
  MatmulTypes m_t;
  // Activations quantized for the matmuls that read them (q, k and v read one): x -> (its row absmax, x quantized).
  std::map<TensorId, std::pair<TensorId, TensorId>> m_quantized;
};

}  // namespace podsim
