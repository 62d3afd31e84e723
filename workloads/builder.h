// GraphBuilder: builds a training step forward op by op, then derives the explicit backward ops (reverse-mode,
// one gradient rule per op kind) and the optimizer update.
//
//   ModelGraph g("mlp");
//   GraphBuilder b(g, DType::BF16);
//   TensorId x = b.input("x", {64, 256});
//   TensorId w = b.param("fc1.w", {256, 512});
//   TensorId h = b.relu(b.matmul(x, w, "fc1"), "fc1.relu");
//   ...
//   TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
//   b.backward(loss);
//   b.optimizer({Optimizer::Adam, 1e-3});
#pragma once

#include <map>
#include <string>
#include <vector>

#include "workloads/graph.h"

namespace podsim {

// The update rules are in workloads/ops/optimizer.cpp.
enum class Optimizer { Sgd, Adam, Momentum, Lars, RmsProp, Lamb, AdamW };

struct OptimizerConfig {
  Optimizer kind = Optimizer::Sgd;
  double learning_rate = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam; eps also RMSProp's
  int64_t step = 1;  // Adam's step count t, for bias correction
  double momentum = 0.9;       // Momentum, LARS and RMSProp
  double lars_eta = 0.001;     // LARS's trust coefficient
  double weight_decay = 0;     // LARS's, LAMB's and AdamW's (not applied to biases and normalization parameters)
  double rmsprop_decay = 0.9;  // RMSProp's decay of the mean square
  // Global-norm clipping of the gradients before the update (tf.clip_by_global_norm): every gradient scaled by
  // clip_norm / max(clip_norm, ||all gradients||); 0: none (workloads/ops/grad_clip.cpp).
  double clip_norm = 0;
};

class GraphBuilder {
 public:
  // `dtype` is the storage type of parameters and activations (bf16 or fp32); losses, statistics and optimizer
  // state are always fp32.
  GraphBuilder(ModelGraph& g, DType dtype);
  // Mixed precision: parameters (and so their updates) stored as `weight_dtype`; where it differs from `dtype`,
  // every forward use of a parameter reads a copy cast to `dtype` by a Convert op (one per parameter and model
  // cell, role WeightCopy), and the copy's gradient is cast back (workloads/ops/convert.cpp).
  GraphBuilder(ModelGraph& g, DType dtype, DType weight_dtype);

  // A parameter; asked for again by name, the same tensor (the steps of a generate form share their weights).
  TensorId param(const std::string& name, std::vector<int64_t> shape);
  // A parameter stored in its own type (a quantized weight: int8 or fp8, read by the quantized matmuls of
  // workloads/models/transformer_layer.h), whatever the builder's weight type.
  TensorId param(const std::string& name, std::vector<int64_t> shape, DType dtype);
  // What parameter `p` is to the model (workloads/tensor_info.h ParamKind): bias_add marks its bias, layer_norm and
  // rms_norm their scale and offset; a new op taking such parameters (batch norm) marks them the same way.
  void set_param_kind(TensorId p, ParamKind kind);
  TensorId input(const std::string& name, std::vector<int64_t> shape, DType dtype);
  TensorId label(const std::string& name, std::vector<int64_t> shape);

  // Forward ops; `name` names the op and its output.
  // A contraction by einsum equation (workloads/einsum.h): einsum(x, w, "bsd,dhe->bshe", "attn.q").
  TensorId einsum(TensorId a, TensorId b, const std::string& equation, const std::string& name);
  // A rank-2 product, optionally with transposed operands: einsum "mk,kn->mn" (or "km", "nk").
  TensorId matmul(TensorId a, TensorId b, const std::string& name, bool trans_a = false, bool trans_b = false);
  TensorId add(TensorId a, TensorId b, const std::string& name);
  TensorId scale(TensorId a, double alpha, const std::string& name);
  // x [..., N] + bias [N]; or a bias of x's trailing shape ([S, D] for x [B, S, D]: a position table).
  TensorId bias_add(TensorId x, TensorId bias, const std::string& name);
  TensorId relu(TensorId x, const std::string& name);
  TensorId gelu(TensorId x, const std::string& name);
  TensorId mul(TensorId a, TensorId b, const std::string& name);  // elementwise product, same shapes
  TensorId silu(TensorId x, const std::string& name);             // x * sigmoid(x)
  // Rotary position embedding (half rotation, GPT-NeoX / LLaMA) of queries or keys [B, S, ..., E], E even.
  TensorId rope(TensorId x, const std::string& name);
  TensorId layer_norm(TensorId x, TensorId gamma, TensorId beta, const std::string& name, double eps = 1e-5);
  // RMS normalisation over the last dimension: x / sqrt(mean(x^2) + eps) * gamma.
  TensorId rms_norm(TensorId x, TensorId gamma, const std::string& name, double eps = 1e-5);
  TensorId softmax(TensorId scores, double scale, bool causal, const std::string& name);
  // Fused attention (workloads/ops/flash_attention.cpp): softmax(scale q k^T, causal) v without storing the scores.
  // q [B, S, H, E] with k, v [B, T, H, E], or grouped q [B, S, KV, G, E] with k, v [B, T, KV, E]; returns the output
  // (q's shape); the op's second output "<name>.lse" holds each row's logsumexp for the backward.
  TensorId flash_attention(TensorId q, TensorId k, TensorId v, double scale, bool causal, const OpAttrs::Blocks& blocks,
                           const std::string& name);
  TensorId embedding(TensorId table, TensorId ids, const std::string& name);
  // Mean softmax cross-entropy over the rows of logits; returns the scalar loss.
  TensorId softmax_cross_entropy(TensorId logits, TensorId labels, const std::string& name);
  // The first `size` entries of dimension `dim` (workloads/ops/slice.cpp): crop(x, 1, 1, "first") takes a
  // sequence's first position; its gradient pads back with zeros.
  TensorId crop(TensorId x, size_t dim, int64_t size, const std::string& name);
  // x [B, S, D] plus the Transformer's sinusoidal position signal (workloads/ops/timing_signal.cpp); with
  // `grid_width` W > 0, the 2-D sin-cos signal of an (S / W) x W grid of patches (a Vision Transformer's).
  TensorId timing_signal(TensorId x, const std::string& name, int64_t grid_width = 0);
  // tanh, elementwise (workloads/ops/tanh.cpp).
  TensorId tanh(TensorId x, const std::string& name);
  // sigmoid, elementwise (workloads/ops/sigmoid.cpp); x [B, H, W, C] scaled per example and feature by s [B, C]
  // (workloads/ops/channel_scale.cpp): squeeze-and-excitation's gate.
  TensorId sigmoid(TensorId x, const std::string& name);
  TensorId channel_scale(TensorId x, TensorId s, const std::string& name);
  // 2-D relative position logits of an H x W map (workloads/ops/rel_pos_logits.cpp): out[b, n, (x, y), (p, q)] =
  // rh[b, n, (x, y), p - x + H - 1] + rw[b, n, (x, y), q - y + W - 1], from rh [B, N, H W, 2H - 1] and rw
  // [B, N, H W, 2W - 1] (the queries' products with the height and width embeddings): [B, N, H W, H W].
  TensorId rel_pos_logits(TensorId rh, TensorId rw, const std::string& name);
  // x [B, N, D] with the learned token [D] put first in every example's sequence: [B, N + 1, D]
  // (workloads/ops/prepend_token.cpp; a Vision Transformer's class token).
  TensorId prepend_token(TensorId x, TensorId token, const std::string& name);
  // The rows of x [B, S, D] at positions [B, P] (int32, each < S) of each example: [B, P, D]
  // (workloads/ops/gather_positions.cpp; BERT's masked positions).
  TensorId gather_positions(TensorId x, TensorId positions, const std::string& name);
  // An LSTM layer over xw [B, T, 4, H] (the input projection with its biases; gates i, f, g, o) with recurrent
  // weight wh [H, 4, H], one scanned kernel (workloads/ops/lstm.cpp): returns h [B, T, H] (outputs "<name>.c" and
  // "<name>.gates" beside it); `reverse` runs backwards in time.
  TensorId lstm(TensorId xw, TensorId wh, bool reverse, const std::string& name);
  // GNMT's normalized Bahdanau scores [B, T, S] of queries q [B, T, H] against keys k [B, S, H]
  // (workloads/ops/additive_attention.cpp): sum_h g v[h] / ||v|| tanh(q + k + bias)[h].
  TensorId additive_attention(TensorId q, TensorId k, TensorId bias, TensorId v, TensorId g, const std::string& name);
  // The same elements in row-major order under another shape of the same size: reshape(x, {G, S, D}, "groups").
  TensorId reshape(TensorId x, std::vector<int64_t> shape, const std::string& name);
  // The inputs (all of one shape) concatenated along the last dimension (workloads/ops/concat.cpp).
  TensorId concat(const std::vector<TensorId>& xs, const std::string& name);
  // GShard's top-2 gating of logits [G, S, E] with `capacity` slots per expert and group
  // (workloads/ops/top2_gating.cpp). The aux_loss output is aux_coefficient x the load-balancing loss, a term of
  // the step's loss: add it to the loss (its gradient rule, like cross-entropy's, takes d(loss)/d(term) = 1).
  struct Gating {
    TensorId combine = -1, dispatch = -1, aux_loss = -1, routes = -1;
  };
  Gating top2_gating(TensorId logits, int64_t capacity, double aux_coefficient, bool sample_second, uint64_t seed,
                     const std::string& name);

  // Convolutional networks (workloads/ops/conv2d.cpp, pool.cpp, batch_norm.cpp): NHWC x, HWIO filter w; the
  // window's size (pools), strides and padding in `win`. Throws when the window does not fit the padded input.
  TensorId conv2d(TensorId x, TensorId w, const OpAttrs::Window& win, const std::string& name);
  // Depthwise: x [B, H, W, C] with filter w [KH, KW, C], each feature its own filter (workloads/ops/depthwise_conv.cpp).
  TensorId depthwise_conv2d(TensorId x, TensorId w, const OpAttrs::Window& win, const std::string& name);
  TensorId max_pool(TensorId x, const OpAttrs::Window& win, const std::string& name);
  TensorId avg_pool(TensorId x, const OpAttrs::Window& win, const std::string& name);
  // Training-mode batch normalization of x[B, H, W, C] over groups of `group` consecutive examples (0: the whole
  // batch); its moving averages (state "<name>.moving_mean" / "<name>.moving_var", one row per example) are updated
  // by optimizer() with `momentum`.
  TensorId batch_norm(TensorId x, TensorId gamma, TensorId beta, int64_t group, const std::string& name,
                      double eps = 1e-5, double momentum = 0.9);

  // Whether reverse mode computes a gradient for `t`: not for the batch, integer ids or stop-gradient values.
  bool wants_grad(TensorId t) const;

  // Ops added from now on belong to model cell `c` (a layer; pipelines cut between cells).
  void set_cell(int32_t c) { m_cell = c; }

  // Adds Backward ops computing d(loss)/d(every parameter), summing gradients of tensors used more than once.
  void backward(TensorId loss);
  // Adds one Optimizer op per parameter, producing Updated tensors "<param>.new" (and "<param>.m.new", ...); LARS
  // first adds one op per weight computing its squared norms ("<param>.norms"), LAMB one computing its moments and
  // norms ("<param>.moments"). With clip_norm, each gradient's squared norm ("<param>.grad.sq") and the clipping
  // factor ("grad_clip.factor") come first.
  void optimizer(const OptimizerConfig& cfg);

  // The gradient tensor of a parameter or activation after backward(); -1 if it has none.
  TensorId grad_of(TensorId t) const;
  const std::vector<TensorId>& params() const { return m_params; }
  ModelGraph& graph() { return m_g; }

  // Used by gradient rules (workloads/ops/*.cpp): add an op with fresh output tensors shaped like `like`.
  TensorId emit(const std::string& name, OpKind kind, Phase phase, std::vector<TensorId> inputs,
                std::vector<int64_t> out_shape, DType out_dtype, TensorRole role, OpAttrs attrs = {});

 private:
  TensorId forward(const std::string& name, OpKind kind, std::vector<TensorId> inputs, std::vector<int64_t> shape,
                   DType dtype, OpAttrs attrs = {});
  TensorId accumulate(const std::vector<TensorId>& parts, const std::string& name);
  // `t`, or when it is a parameter stored in another type than the compute type, its cast copy for this cell.
  TensorId compute_copy(TensorId t);
  // The model cell of a parameter's first use (its optimizer ops join it); -1 when nothing reads it.
  int32_t param_cell(TensorId p) const;

  ModelGraph& m_g;
  DType m_dtype;
  DType m_weight_dtype;
  std::map<std::pair<TensorId, int32_t>, TensorId> m_copies;  // (parameter, cell) -> its cast copy
  Phase m_phase = Phase::Forward;  // phase of ops the forward methods add (Backward while rules run)
  int32_t m_cell = -1;
  std::vector<TensorId> m_params;
  std::map<std::string, TensorId> m_param_names;
  std::map<TensorId, TensorId> m_grad;
  std::vector<OpId> m_bn_stats;  // batch norms whose moving averages optimizer() updates
};

}  // namespace podsim
