// An op of a training step: what it computes (kind + attributes), on which tensors, in which phase.
// Costs (FLOPs, bytes, vector work), numeric kernels and gradients live with each kind in workloads/ops/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/tensor_info.h"

namespace podsim {

enum class OpKind : uint8_t {
  // Matrix unit: a contraction given by an einsum equation (workloads/einsum.h), e.g. "bsd,dhe->bshe".
  MatMul,
  // Elementwise on the vector unit.
  Add,          // out = a + b (same shape)
  Scale,        // out = alpha * a
  BiasAdd,      // out[t, j] = x[t, j] + bias[j]
  Relu,
  ReluGrad,     // dx = dy * (y > 0); inputs (dy, y), y = relu(x) (y > 0 exactly where x > 0)
  Gelu,         // tanh approximation
  GeluGrad,     // inputs (dy, x)
  Mul,          // out = a * b (same shape), the gate of a gated FFN
  Silu,         // x * sigmoid(x)
  SiluGrad,     // inputs (dy, x)
  Rope,         // rotary position embedding of [B, S, ..., E]; attrs.alpha = +1 (rotate) or -1 (its gradient)
  Convert,      // the same values in the output's element type (fp32 master weight -> bf16 copy, and back)
  // Reductions and normalisations on the vector unit.
  BiasGrad,       // dbias[j] = sum_t dy[t, j]
  LayerNorm,      // inputs (x, gamma, beta) -> (y, mean, rstd); over the last dimension
  LayerNormGrad,  // inputs (dy, x, gamma, mean, rstd) -> (dx, dgamma, dbeta)
  RmsNorm,        // inputs (x, gamma) -> (y, rstd); over the last dimension
  RmsNormGrad,    // inputs (dy, x, gamma, rstd) -> (dx, dgamma)
  Softmax,        // over the last dimension of [G, S, S] scores, with scale alpha and optional causal mask
  SoftmaxGrad,    // inputs (dy, y) -> dx, including the scale alpha
  // Fused attention (workloads/ops/flash_attention.cpp): the flash kernel's online softmax over blocks of keys, the
  // scores never stored. q [B, S, H, E] (grouped: [B, S, KV, G, E]), k and v [B, T, H or KV, E]; scale alpha,
  // causal mask, block sizes attrs.blocks; attrs.axes: the mesh axes splitting the queries' positions (context
  // parallelism; the mask then offsets them by the device's index).
  FlashAttention,      // inputs (q, k, v) -> (o like q, lse [B, H, S] or [B, KV, G, S] fp32: each row's logsumexp)
  FlashAttentionGrad,  // inputs (q, k, v, o, lse, do) -> (dq, dk, dv), recomputing the scores block by block
  // Data movement.
  Slice,          // a piece of one dimension: the device's shard (attrs.axes), or a static pad/crop; zero-fills
  Embedding,      // inputs (table[V, D], ids[T] int32) -> out[T, D]
  EmbeddingGrad,  // inputs (dy[T, D], ids[T]) -> dtable[V, D] (scatter-add)
  MemoryStream,   // HBM microbenchmark traffic: out = x; attrs.pattern read | write | copy | gather, attrs.message_bytes
                  // the request size (workload.model: memory)
  Reshape,        // the same elements in row-major order under another shape ([B, S, D] -> [G, S', D])
  Concat,         // the inputs (equal shapes) side by side along the last dimension (channels): x[..., k C + c] =
                  // input k's [..., c]; its gradient is one Slice per input
  // Transfers between the chip's HBM and its host's memory over the host link (hw/chip/host_link.h), e.g. host
  // offload of activations: the same values, the output in host memory or back in HBM.
  ToHost,         // x (HBM) -> the same tensor in host memory (takes no HBM); reads x from HBM, moves it to the host
  FromHost,       // x (host memory) -> the same tensor in HBM; moves its bytes from the host, writes them to HBM
  // Mixture of experts (GShard top-2 gating, workloads/ops/top2_gating.cpp).
  Top2Gating,      // logits[G, S, E] -> (combine[G, S, E, C], dispatch[G, S, E, C], aux_loss[1], routes[G, S, 4])
  Top2GatingGrad,  // inputs (logits, routes[, dcombine]) -> dlogits, including the auxiliary loss's gradient
  // Convolutional networks (NHWC activations, HWIO filters; workloads/ops/conv2d.cpp, pool.cpp, batch_norm.cpp).
  // Window attributes in attrs.window (filter size from the filter's shape).
  Conv2d,            // inputs (x[B, H, W, Ci], w[KH, KW, Ci, Co]) -> y[B, Ho, Wo, Co]
  Conv2dInputGrad,   // inputs (dy, w) -> dx[B, H, W, Ci]
  Conv2dFilterGrad,  // inputs (x, dy) -> dw[KH, KW, Ci, Co]
  MaxPool,           // x -> y over attrs.window (padding never wins the max)
  MaxPoolGrad,       // inputs (dy, x) -> dx: each window's dy to its (first) maximum (select-and-scatter)
  AvgPool,           // x -> y, the mean over the window's positions inside the input (global pooling: the whole map)
  AvgPoolGrad,       // dy -> dx
  // Batch normalization in training mode, over groups of attrs.count consecutive examples (0: the whole batch).
  // Statistics are kept per example row ([B, C]: the example's group's), so they split with the batch.
  BatchNormStats,    // x[B, H, W, C] -> (mean[B, C], rstd[B, C]) fp32
  BatchNormApply,    // inputs (x, mean, rstd, gamma[C], beta[C]) -> y = (x - mean) * rstd * gamma + beta
  BatchNormGrad,     // inputs (dy, x, mean, rstd, gamma) -> (dx, dgamma, dbeta)
  BatchNormMoving,   // inputs (moving_mean, moving_var, mean, rstd) -> the moving averages updated (attrs.alpha
                     // the momentum): optimizer phase
  // The local steps of a batch norm whose groups span devices (its partition rule; never in a logical step): each
  // device's sums over its rows, all-reduced over the group's devices, then finished.
  BatchNormSums,        // x [, the group's sum of x] -> [2, C]: the sum of x (or of its squared deviations from the
                        // group's mean) as an fp32 pair (hi, lo)
  BatchNormFinish,      // (the group's sum, sum of squared deviations) -> (mean, rstd) of the local rows; attrs.count
                        // values per group
  BatchNormGradSums,    // inputs (dy, x, mean, rstd) -> sums[4, C]: sum of dy and of dy * xhat, as pairs
  BatchNormGradFinish,  // inputs (dy, x, mean, rstd, gamma, group sums) -> (dx, dgamma, dbeta); attrs.dim devices
                        // per group
  // The local steps of a convolution or pooling whose input rows are split over devices (spatial partitioning,
  // plan/halo.h; never in a logical step). attrs.axes the splitting axes, attrs.dim / dim2 the halo rows from the
  // previous / next device, attrs.offset the step between devices' windows, window.pt the map's top padding,
  // attrs.count the map's rows.
  HaloRows,    // x -> rows [attrs.offset, attrs.offset + out rows) of dimension 1 (a halo to send)
  HaloWindow,  // inputs (x [, rows from above] [, rows from below]) -> the device's input window; positions outside
               // the map read 0 (-infinity with attrs.reduce_max)
  HaloFold,    // the gradient of a window -> (own rows [, rows above] [, rows below]); outside the map dropped
  HaloAdd,     // inputs (own [, rows from below] [, rows from above]) -> own with the neighbours' parts added
  // Depthwise convolution (workloads/ops/depthwise_conv.cpp; MobileNet's and EfficientNet's MBConv blocks): each
  // feature convolved with its own KH x KW filter, no sum over features (XLA's feature_group_count = C).
  DepthwiseConv2d,            // inputs (x[B, H, W, C], w[KH, KW, C]) -> y[B, Ho, Wo, C]
  DepthwiseConv2dInputGrad,   // inputs (dy, w) -> dx[B, H, W, C]
  DepthwiseConv2dFilterGrad,  // inputs (x, dy) -> dw[KH, KW, C]
  // Squeeze-and-excitation's pieces (workloads/ops/sigmoid.cpp, channel_scale.cpp).
  Sigmoid,           // 1 / (1 + exp(-x)), elementwise
  SigmoidGrad,       // inputs (dy, y) -> dy y (1 - y), y = sigmoid(x)
  ChannelScale,      // inputs (x[B, H, W, C], s[B, C]) -> x[b, h, w, c] * s[b, c]
  ChannelScaleGrad,  // inputs (dy, x) -> ds[B, C] = sum over (h, w) of dy * x
  // 2-D relative position logits (workloads/ops/rel_pos_logits.cpp; BoTNet's attention over an H x W map).
  RelPosLogits,      // inputs (rh[B, N, H W, 2H - 1], rw[B, N, H W, 2W - 1]) -> [B, N, H W, H W], relative to absolute
  RelPosLogitsGrad,  // inputs (dout) -> (drh, drw): dout summed back onto the relative offsets
  // A learned token before a sequence (workloads/ops/prepend_token.cpp; the Vision Transformer's class token).
  PrependToken,      // inputs (x[B, N, D], token[D]) -> [B, N + 1, D], the token first
  PrependTokenGrad,  // inputs (dy) -> (dx [B, N, D], dtoken [D] summed over the batch)
  // Loss.
  SoftmaxCrossEntropy,      // inputs (logits[T, V], labels[T]) -> (loss[1], probs[T, V]); mean over T
  SoftmaxCrossEntropyGrad,  // inputs (probs, labels) -> dlogits = (probs - onehot) / T
  // The local steps of a cross-entropy over classes split across devices (its partition rule; never in a logical
  // step): each row's max over the local classes; with the global max M, the local sum of exp(x - M) and the
  // label's logit (0 when another device holds the label's class); with the global sums, the loss and the local
  // probabilities.
  CrossEntropyMax,     // inputs (logits[T, v]) -> max[T]
  CrossEntropySums,    // inputs (logits, labels, max) -> (sumexp[T], target[T])
  CrossEntropyFinish,  // inputs (logits, max, sumexp, target) -> (loss[1], probs[T, v])
  // Single-shot detection (SSD's MultiBox loss; workloads/models/ssd.cpp): the class logits and box offsets of each
  // feature map's anchors, [B, n_i, C] and [B, n_i, 4], read map by map (the maps' anchors concatenated in order).
  AnchorCrossEntropy,      // inputs (logits_0..logits_{m-1}, labels[B, A] int32) -> (ce[B, A], negatives[B, A],
                           // lse[B, A]) fp32: per anchor the softmax cross-entropy, the same where the label is the
                           // background class 0 (else 0), and the logsumexp (workloads/ops/anchor_cross_entropy.cpp)
  AnchorCrossEntropyGrad,  // inputs (dce[B, A], lse, labels, logits_0..) -> (dlogits_0..)
  TopKMask,                // inputs (scores[B, N] fp32, counts[B]) -> mask[B, N]: 1 at the k_b largest scores of row
                           // b, k_b = min(alpha counts[b], N), by a binary search of the k-th value
                           // (workloads/ops/topk_mask.cpp)
  MultiboxLoss,            // inputs (ce, negatives mask, labels, matched[B], box targets[B, A, 4], boxes_0..) ->
                           // loss[1]: (sum of the ce of positive and mined anchors + the positives' smooth-L1) /
                           // matched, averaged over attrs.count images (workloads/ops/multibox_loss.cpp)
  MultiboxLossGrad,        // inputs (negatives mask, labels, matched, box targets, boxes_0..) -> (dce, dboxes_0..)
  // Optimizer updates, one op per parameter.
  SgdUpdate,   // inputs (w, g) -> w' = w - lr * g; attrs: alpha = lr
  AdamUpdate,  // inputs (w, g, m, v) -> (w', m', v'); attrs: alpha = lr, beta1, beta2, eps, step
  MomentumUpdate,  // inputs (w, g, u) -> (w', u'): u' = beta1 u + g; w' = w - lr u'; attrs: alpha = lr, beta1 = momentum
  LarsNorms,       // inputs (w, g) -> [sum w^2, sum g^2] (fp32 [2]): the squared norms LARS's trust ratio needs
  LarsUpdate,      // inputs (w, g, u, norms) -> (w', u'); attrs: alpha = lr, beta1 = momentum, eta, weight_decay
  RmsPropUpdate,   // inputs (w, g, ms, u) -> (w', ms', u'); attrs: alpha = lr, beta2 = decay, beta1 = momentum, eps
  // Each update above (and LambMoments) takes an optional last input, the global-norm clipping factor c [1]: it
  // updates with c * g in place of g (workload.clip_norm).
  // LAMB (You et al. 2019, as MLPerf's BERT codes it; workloads/ops/lamb.cpp), per weight in two kernels: Adam's
  // moments with the squared norms of the weight and of its update u = m^ / (sqrt(v^) + eps) + wd w, then the
  // update scaled by the trust ratio ||w|| / ||u||. attrs: alpha = lr, beta1, beta2, eps, step, weight_decay.
  LambMoments,  // inputs (w, g, m, v[, clip]) -> (m', v', [sum w^2, sum u^2] fp32 [2])
  LambUpdate,   // inputs (w, m', v', norms) -> w'
  // Global-norm gradient clipping (tf.clip_by_global_norm; workloads/ops/grad_clip.cpp).
  GradSquaredNorm,  // inputs (g) -> [sum g^2] fp32 [1]
  ClipFactor,       // inputs (every gradient's squared norm [1]) -> clip / max(sqrt(sum), clip) [1]; attrs.alpha = clip
  // Language models' pieces (BERT's heads, GNMT's attention and recurrent layers).
  Tanh,              // elementwise (BERT's pooler)
  TanhGrad,          // inputs (dy, y) -> dy (1 - y^2), y = tanh(x)
  GatherPositions,   // inputs (x[B, S, D], positions[B, P] int32) -> [B, P, D] (workloads/ops/gather_positions.cpp)
  ScatterPositions,  // inputs (dy[B, P, D], positions) -> dx[B, S, D]: dy added into rows of zeros; attrs.dim = S
  TimingSignal,      // x [B, S, D] + the sinusoids of position s (Vaswani et al. 2017; T2T's add_timing_signal_1d)
  // GNMT's normalized Bahdanau scores (workloads/ops/additive_attention.cpp): s[b, t, r] = sum_h a[h] tanh(q[b, t, h]
  // + k[b, r, h] + bias[h]), a = g v / ||v||.
  AdditiveAttention,      // inputs (q[B, T, H], k[B, S, H], bias[H], v[H], g[1]) -> scores[B, T, S]
  AdditiveAttentionGrad,  // inputs (dscores, q, k, bias, v, g) -> (dq, dk, dbias, dv, dg)
  // A recurrent LSTM layer as one scanned kernel (workloads/ops/lstm.cpp): per step the gates' recurrent product
  // h[t-1] . Wh on the MXU and the cell on the vector unit; attrs.shift = -1 runs backwards in time.
  LstmScan,      // inputs (xw[B, T, 4, H] the input projection with the biases, wh[H, 4, H]) -> (h, c [B, T, H],
                 // gates[B, T, 4, H]: i, f, g, o activated)
  LstmScanGrad,  // inputs (dh[B, T, H], h, c, gates, wh) -> (dxw[B, T, 4, H], dwh[H, 4, H])
  // Array ops: the instructions of an imported XLA HLO module (hlo/, docs/hlo.md) that no kind above expresses.
  // Fields of attrs as each says (OpAttrs: dims, lo, hi, stride, fn, values); kernels in workloads/ops/array.cpp
  // unless noted.
  Elementwise,         // attrs.fn element by element on inputs of the output's shape (an input of one element
                       // broadcasts): arithmetic, comparisons, select, math functions
  BroadcastInDim,      // input dimension i is output dimension attrs.dims[i]; the output repeats it along the others
  Transpose,           // output dimension i is input dimension attrs.dims[i] (the identity: a copy to another layout)
  Bitcast,             // the input's elements under the output's shape, transposed by attrs.dims when given, with no
                       // data moved (XLA's bitcast: the layouts make the reshape or transpose free); a view of its
                       // input's buffer
  Reduce,              // inputs (x, init) -> x combined by attrs.fn over dimensions attrs.dims, starting from init
  Iota,                // no inputs; each element its index along dimension attrs.dims[0]
  Constant,            // no inputs; attrs.values (a single value fills the tensor)
  StridedSlice,        // per dimension, input elements attrs.lo, lo + stride, ... below attrs.hi
  Pad,                 // inputs (x, value): attrs.lo, attrs.hi (negative: cut) and attrs.stride (interior) per dimension
  Concatenate,         // the inputs side by side along dimension attrs.dims[0]
  DynamicSlice,        // inputs (x, offset per dimension): a window of the output's shape, offsets clamped into x
  DynamicUpdateSlice,  // inputs (x, update, offset per dimension): x with update written there; in place
  Gather,              // inputs (x, indices): rows of x picked by indices (cost only: workloads/ops/array_cost.cpp)
  Scatter,             // inputs (x, indices, updates): x with updates combined into rows; in place (cost only)
  Sort,                // inputs sorted along dimension attrs.dims[0], all of them by the first (cost only)
  ReduceWindow,        // inputs (x, init): attrs.fn over windows (attrs.window's sizes in attrs.dims, strides in
                       // attrs.stride) (cost only)
  Convolution,         // inputs (x, w): an N-D convolution as dim_labels say, on the MXU (cost only; its GEMM:
                       // attrs.dims = batch, m, k, n)
  FusedAttention,      // inputs (q[B, S, H, D], k[B, T, G, D], v[B, T, G, D], ...) -> (o[B, S, H, D], stats, ...):
                       // flash attention in one kernel, causal when attrs.causal (cost only)
  FusedAttentionGrad,  // inputs (q, k, v, ..., o, do, ...) -> (dq, dk, dv, ...): its backward pass (cost only)
  CustomCost,          // a kernel known only by its cost: attrs.flops and attrs.bytes (workload.custom_calls)
  DeviceId,            // no inputs; this device's index over mesh axes attrs.axes (partition-id, replica-id)
  // Serving (inference steps; workloads/models/transformer_inference.cpp, docs/serving.md). The sequences of an
  // iteration are described by attrs.ragged: per sequence the tokens it adds (fresh) after the tokens already in
  // its cache (cached), laid out one sequence per row of [R, S, ...] activations or packed along row 0.
  KvCacheWrite,     // inputs (cache [N, C, KV, E] [, scale [N, C, KV]], new [R, S, KV, E]) -> the cache (and scale)
                    // with each sequence's fresh keys or values written at its positions cached, cached + 1, ...;
                    // in place (workloads/ops/kv_cache.cpp); an int8 or fp8 cache quantizes per (token, head)
  RaggedAttention,  // inputs (q [R, S, H, E] or [R, S, KV, G, E], k cache, v cache [N, C, KV, E] [, k scale, v
                    // scale]) -> o like q: each sequence's fresh queries over its own cached and fresh keys, the cache
                    // streamed from HBM in blocks of attrs.blocks.kv, online softmax (workloads/ops/ragged_attention.cpp)
  TokenSelect,      // x [R, S, D] -> [N, D]: each sequence's last fresh position (the one whose logits sample)
  Sample,           // logits [N, V] -> ids [N] int32: greedy (argmax), top_k or top_p (workloads/ops/sample.cpp)
  SampleCandidates, // logits [N, v] (a vocabulary shard) -> [1, N, 2 K]: its K best (value, global index) pairs
  SampleFinish,     // candidates [P, N, 2 K] from P shards -> ids [N]: the sample over the pooled candidates
  // Quantized matmuls (AQT's int8 and fp8; workloads/ops/quantize.cpp): x = q * scale with per-row or per-channel
  // scales, the product of quantized operands rescaled by the scales it factors out.
  RowAbsMax,        // x -> max |x| over its last attrs.count dimensions (fp32, the other dimensions kept)
  Quantize,         // inputs (x, absmax) -> x / scale rounded to the output's type (int8: to [-127, 127]; fp8 e4m3)
  Rescale,          // inputs (y, s1 [, s2]) -> y * s1 [* s2], each scale indexed by the letters attrs.equation gives
                    // it ("bsf,f,bs": s1 per channel f, s2 per row), the scale of int8 or fp8 being absmax / qmax
  // Communication between chips (executed by the chip's DMA engines over ICI).
  AllReduce, ReduceScatter, AllGather, AllToAll, CollectivePermute, Broadcast,
  Send, Recv,
  // Synthetic network load (workload.model: traffic).
  Traffic,
};

const char* op_kind_name(OpKind k);  // "matmul", "layer_norm_grad", "all_reduce", ...
bool is_communication(OpKind k);     // AllReduce .. Recv, Traffic

// What an Elementwise op computes, and how a Reduce or ReduceWindow combines (workloads/ops/array.cpp).
enum class ArrayFn : uint8_t {
  // two inputs
  Add, Subtract, Multiply, Divide, Maximum, Minimum, Power, Remainder, Atan2, And, Or, Xor, ShiftLeft,
  ShiftRightArithmetic, ShiftRightLogical, CompareEq, CompareNe, CompareLt, CompareLe, CompareGt, CompareGe,
  // three inputs
  Select, Clamp,
  // one input
  Copy, Negate, Abs, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Cbrt, Tanh, Logistic, Sine, Cosine, Tan, Floor, Ceil,
  RoundAwayFromZero, RoundNearestEven, Sign, Not, IsFinite, Erf, PopulationCount, ReducePrecision, Lgamma, Digamma,
  ErfInv,
  // a combiner podsim cannot compute (a reduction of tuples: argmax): cost only
  Other,
};
const char* array_fn_name(ArrayFn f);  // "add", "compare_lt", "select", ...
int array_fn_arity(ArrayFn f);         // inputs it takes (0 for Other)

enum class Phase : uint8_t { Forward, Loss, Backward, Optimizer, Communication };
const char* phase_name(Phase p);

// Attributes; each kind documents which fields it reads.
struct OpAttrs {
  // MatMul: the einsum equation; sizes come from the tensors' shapes.
  std::string equation;
  // Scale, Softmax(Grad) scale, learning rate of updates.
  double alpha = 1.0;
  // Adam and LayerNorm; momentum (beta1) and RMSProp's decay (beta2).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-5;
  int64_t step = 1;
  // LARS: the trust coefficient and the weight decay.
  double eta = 0.001, weight_decay = 0;
  // Softmax and FlashAttention (a causal mask over the last two dimensions: query and key positions). A MatMul
  // marked causal is a product over a causal mask's (query, key) square (attention's scores and context, and their
  // gradients): conventions of model FLOPs that count the mask's triangle count half of it.
  bool causal = false;
  // FlashAttention(Grad): the kernel's block sizes, query rows by key rows, forward and backward; fused_bwd: the
  // backward as one kernel (splash attention's use_fused_bwd_kernel: dq from the key/value kernel, summed after);
  // scale_in_kernel: the kernel multiplies each score by alpha (the Pallas flash kernel given an sm_scale other than
  // 1) rather than taking queries scaled outside it (MaxText, Praxis, Flax; splash attention has no scale).
  struct Blocks {
    int64_t q = 128, kv = 128, q_bwd = 128, kv_bwd = 128;
    bool fused_bwd = false;
    bool scale_in_kernel = false;
  };
  Blocks blocks;
  // Communication: mesh axes of the group, algorithm (empty: the collective's default), permute shift and
  // broadcast root (rank in the group); Send/Recv: the peer `shift` steps along `axes` (a pipeline's neighbour
  // stage; with no axes, `peer` is an absolute chip id), and a tag pairing them.
  // all_gather / reduce_scatter gather or scatter tensor dimension `dim`; all_to_all splits `dim` and concatenates
  // `dim2`. Slice: the dimension it cuts, and the mesh axes whose index picks the piece (none: from index 0).
  std::vector<std::string> axes;
  int64_t dim = 0, dim2 = 0;
  int64_t offset = 0;  // Slice without axes: which piece (the piece's size is the output's)
  std::string algorithm;
  // Communication: the group is each run of `group_block` consecutive ranks of `axes` (0: all of them), e.g. the
  // replicas sharing a batch-norm group.
  int64_t group_block = 0;
  int64_t shift = 1;
  int64_t root = 0;
  int64_t peer = -1;
  // CollectivePermute with arbitrary pairs (an imported collective-permute that is no shift): per rank of the group,
  // the rank it sends to (-1: it sends nothing); a rank no pair targets receives zeros. Empty: the shift above.
  std::vector<int64_t> targets;
  // AllReduce: combine by maximum instead of sum (a cross-entropy over split classes needs each row's global max).
  bool reduce_max = false;
  int64_t tag = 0;
  // Communication on a chip that holds several devices of an imported module (TPU v2/v3: one per TensorCore): the
  // chip moves this many copies of the tensor, its devices' (1: one device per chip).
  int64_t chip_copies = 1;
  // Means over rows (cross-entropy): the global row count to divide by (0: the rows the op sees), and the
  // dimensions of the first input a partitioned op holds padded shards of (rows at or past `global` are padding).
  struct Padded {
    int dim = 0;
    int64_t global = 0;
    std::vector<std::string> axes;
  };
  int64_t count = 0;
  std::vector<Padded> padded;
  // Top2Gating(Grad): the run's seed for random routing of the second expert (sample_second), drawn per token from
  // (seed, op name, global token position); attrs.alpha is the auxiliary loss coefficient, attrs.count the global
  // group count and attrs.axes the mesh axes splitting the groups.
  uint64_t seed = 0;
  bool sample_second = false;
  // Traffic: pattern (uniform, transpose, neighbor), injection rate (fraction of one link's bandwidth each chip
  // offers), message size in bytes, and injection window in seconds.
  std::string pattern;
  double rate = 0, message_bytes = 0, duration = 0;
  // Convolution and pooling windows: size (pooling only; a convolution's is its filter's), strides, and padding
  // before and after along height and width.
  struct Window {
    int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pb = 0, pl = 0, pr = 0;
  };
  Window window;
  // Array ops (the kinds after Elementwise): a list of dimensions and per-dimension bounds as each kind says, the
  // function applied or combined, a constant's values, a custom kernel's cost.
  std::vector<int64_t> dims, lo, hi, stride;
  ArrayFn fn = ArrayFn::Copy;
  std::vector<float> values;
  double flops = 0, bytes = 0;
  // Serving: the sequences of an inference iteration (KvCacheWrite, RaggedAttention, TokenSelect, Rope). Sequence i
  // adds fresh[i] tokens after the cached[i] its cache holds; `packed`: they follow one another along row 0 of the
  // activations (vLLM's ragged batch), else sequence i is row i, its tokens at positions 0 .. fresh[i] - 1 of the
  // row (the rest padding). attrs.axes name the mesh axes splitting the rows (a device's rows start at its index
  // times its row count). Empty: a training step's plain positions.
  struct Ragged {
    std::vector<int64_t> fresh, cached;
    std::vector<int64_t> width;  // places each sequence takes, padding included (empty: fresh; workloads/ragged.h)
    bool packed = false;
    bool empty() const { return fresh.empty(); }
  };
  Ragged ragged;
  // Sample: how (greedy, top_k or top_p), top_k's k (and the candidates each vocabulary shard keeps), top_p's p.
  std::string sampling;
  int64_t top_k = 0;
  double top_p = 1;
};

struct Op {
  std::string name;
  OpKind kind = OpKind::Add;
  Phase phase = Phase::Forward;
  // The model cell (layer) the op belongs to, in model order: a pipeline cuts the step between cells. Backward
  // ops take the cell of the forward op they differentiate, optimizer ops their parameter's. -1: none.
  int32_t cell = -1;
  // A re-materialized copy of a forward op (workloads/remat.h): it recomputes, during the backward pass, values the
  // step did not keep. It computes what the original computes (hardware FLOPs, not model FLOPs).
  bool recompute = false;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  OpAttrs attrs;
};

}  // namespace podsim
