// The pieces of a Transformer layer the model builders share (transformer, bert, encoder_decoder): multi-head
// attention of queries from one sequence over keys and values from another (the same for self-attention), and the
// dense feed-forward block. Every tensor keeps its dimensions apart (batch, positions, heads, head width), so a
// strategy can split any of them.
//
//   AttentionSpec a{.heads = 16, .head_dim = 64, .bias = true};
//   TensorId y = attention(b, x, x, a, "layer0.attn");   // weights layer0.attn.q.w [D, H, E], ..., layer0.attn.o.w
//   TensorId f = dense_ffn(b, y, 4096, "gelu", true, "layer0.ffn");
#pragma once

#include <string>

#include "workloads/builder.h"

namespace podsim {

struct AttentionSpec {
  int64_t heads = 1, head_dim = 1;
  bool causal = false;
  // Biases on the query, key, value ([H, E] each) and output ([D]) projections (BERT's dense layers).
  bool bias = false;
  // Rotary position embedding of the queries and keys (workloads/ops/rope.cpp).
  bool rope = false;
  // The fused kernel (workloads/ops/flash_attention.cpp) instead of stored scores, with its block sizes.
  bool flash = false;
  OpAttrs::Blocks blocks;
};

// q = xq Wq, k = xkv Wk, v = xkv Wv (each [D, H, E]); softmax(q k^T / sqrt(E), causal) v; then . Wo [H, E, D]. xq is
// [B, S, D], xkv [B, T, D]. Names under `name`: .q, .k, .v, .scores, .softmax, .context, .o (weights .q.w, ...,
// biases .q.b, ...). Values carry MaxText's checkpoint names (query_proj, key_proj, value_proj, context, out_proj).
TensorId attention(GraphBuilder& b, TensorId xq, TensorId xkv, const AttentionSpec& a, const std::string& name);

// act(x W1 [D, F] + b1) W2 [F, D] + b2, act "gelu" or "relu"; names under `name`: .w1, .b1, .up, .up.bias, .gelu
// (or .relu), .w2, .b2, .down, .down.bias; `bias` false leaves out b1 and b2.
TensorId dense_ffn(GraphBuilder& b, TensorId x, int64_t F, const std::string& act, bool bias, const std::string& name);

}  // namespace podsim
