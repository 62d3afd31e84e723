// Workload graphs: shapes, op counts per phase, and FLOP counts against hand-computed formulas.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/config/loader.h"
#include "workloads/builder.h"
#include "workloads/i_workload.h"
#include "workloads/op_def.h"
#include "workloads/ops/op_kind.h"

using namespace podsim;

namespace {

ModelGraph build(const std::string& workload_yaml) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload:\n" + workload_yaml, "g.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

double matmul_flops(const ModelGraph& g, Phase phase) {
  double f = 0;
  for (const Op& op : g.ops())
    if (op.kind == OpKind::MatMul && op.phase == phase) f += op_cost(g, op).flops;
  return f;
}

std::vector<int64_t> shape(const ModelGraph& g, const std::string& name) {
  TensorId t = g.find_tensor(name);
  EXPECT_GE(t, 0) << name;
  return t >= 0 ? g.tensor(t).shape : std::vector<int64_t>{};
}

}  // namespace

TEST(GraphTest, MatmulIsOneForwardOp) {
  ModelGraph g = build("  model: matmul\n  m: 300\n  k: 200\n  n: 100\n");
  ASSERT_EQ(g.num_ops(), 1u);
  EXPECT_DOUBLE_EQ(g.total_flops(), 2.0 * 300 * 200 * 100);
  OpCost c = op_cost(g, g.op(0));
  EXPECT_EQ(c.unit, Unit::Mxu);
  EXPECT_DOUBLE_EQ(c.bytes_read, 2.0 * (300 * 200 + 200 * 100));
  EXPECT_DOUBLE_EQ(c.bytes_written, 2.0 * 300 * 100);
}

// workload.batch: B independent products [B, M, K] x [B, K, N], both operands inputs (neither is a weight that
// stays in the MXU across the batch); B = 1 keeps the two-dimensional product.
TEST(GraphTest, BatchedMatmulShapesFlopsAndBytes) {
  const int64_t B = 6, M = 30, K = 20, N = 10;
  ModelGraph g = build("  model: matmul\n  batch: 6\n  m: 30\n  k: 20\n  n: 10\n");
  ASSERT_EQ(g.num_ops(), 1u);
  EXPECT_EQ(g.op(0).attrs.equation, "bmk,bkn->bmn");
  EXPECT_EQ(g.tensor(g.op(0).inputs[0]).shape, (std::vector<int64_t>{B, M, K}));
  EXPECT_EQ(g.tensor(g.op(0).inputs[1]).shape, (std::vector<int64_t>{B, K, N}));
  EXPECT_EQ(g.tensor(g.op(0).outputs[0]).shape, (std::vector<int64_t>{B, M, N}));
  EXPECT_DOUBLE_EQ(g.total_flops(), 2.0 * B * M * K * N);
  OpCost c = op_cost(g, g.op(0));
  EXPECT_DOUBLE_EQ(c.bytes_read, 2.0 * B * (M * K + K * N));
  EXPECT_DOUBLE_EQ(c.bytes_written, 2.0 * B * M * N);
  EXPECT_EQ(build("  model: matmul\n  batch: 1\n  m: 30\n  k: 20\n  n: 10\n").op(0).attrs.equation, "mk,kn->mn");
}

TEST(GraphTest, MlpShapesAndFlops) {
  const int64_t B = 16, I = 12, H = 24, L = 3, C = 5;
  ModelGraph g = build("  model: mlp\n  batch: 16\n  input: 12\n  hidden: 24\n  layers: 3\n  classes: 5\n");
  EXPECT_EQ(shape(g, "fc0.w"), (std::vector<int64_t>{I, H}));
  EXPECT_EQ(shape(g, "fc2.relu"), (std::vector<int64_t>{B, H}));
  EXPECT_EQ(shape(g, "out.bias"), (std::vector<int64_t>{B, C}));
  EXPECT_EQ(shape(g, "fc1.w.grad"), (std::vector<int64_t>{H, H}));
  EXPECT_EQ(shape(g, "fc1.w.new"), (std::vector<int64_t>{H, H}));
  double fwd = 2.0 * B * (I * H + (L - 1) * H * H + H * C);
  EXPECT_DOUBLE_EQ(matmul_flops(g, Phase::Forward), fwd);
  // Backward: a weight gradient for every layer, an input gradient for every layer but the first (x is data).
  EXPECT_DOUBLE_EQ(matmul_flops(g, Phase::Backward), 2 * fwd - 2.0 * B * I * H);
  std::map<Phase, int> per_phase;
  for (const Op& op : g.ops()) ++per_phase[op.phase];
  EXPECT_EQ(per_phase[Phase::Forward], 3 * L + 2);       // matmul, bias, relu per layer + out matmul, bias
  EXPECT_EQ(per_phase[Phase::Loss], 1);
  EXPECT_EQ(per_phase[Phase::Optimizer], 2 * (L + 1));  // one update per weight and bias
}

TEST(GraphTest, TransformerFlopsPerLayer) {
  const int64_t L = 2, D = 64, F = 256, H = 4, V = 100, S = 32, B = 3, T = B * S;
  ModelGraph g = build("  model: transformer\n  layers: 2\n  d_model: 64\n  d_ff: 256\n  heads: 4\n  vocab: 100\n"
                       "  seq_len: 32\n  batch: 3\n");
  // q, k, v and output projections 4 * 2TD^2; scores and context 2 * 2BS^2D; FFN 2 * 2TDF; logits 2TDV.
  double per_layer = 8.0 * T * D * D + 4.0 * B * S * S * D + 4.0 * T * D * F;
  double fwd = L * per_layer + 2.0 * T * D * V;
  EXPECT_DOUBLE_EQ(matmul_flops(g, Phase::Forward), fwd);
  EXPECT_DOUBLE_EQ(matmul_flops(g, Phase::Backward), 2 * fwd);
  EXPECT_EQ(shape(g, "layer0.attn.q"), (std::vector<int64_t>{B, S, H, D / H}));
  EXPECT_EQ(shape(g, "layer0.attn.q.w"), (std::vector<int64_t>{D, H, D / H}));
  EXPECT_EQ(shape(g, "layer0.attn.o.w"), (std::vector<int64_t>{H, D / H, D}));
  EXPECT_EQ(shape(g, "layer1.attn.scores"), (std::vector<int64_t>{B, H, S, S}));
  EXPECT_EQ(shape(g, "layer1.ffn.gelu"), (std::vector<int64_t>{B, S, F}));
  EXPECT_EQ(shape(g, "logits"), (std::vector<int64_t>{B, S, V}));
  EXPECT_EQ(shape(g, "embedding.grad"), (std::vector<int64_t>{V, D}));
  EXPECT_EQ(shape(g, "layer0.ffn.w1.m"), (std::vector<int64_t>{D, F}));  // Adam state by default
  // Parameters: embedding, unembedding, final LN, and per layer 4 D^2 + 2 D F + F + D + 4 D (LN).
  double params = 0;
  for (const auto& t : g.tensors())
    if (t.role == TensorRole::Parameter) params += static_cast<double>(t.elements());
  EXPECT_DOUBLE_EQ(params, 2.0 * V * D + 2 * D + L * (4.0 * D * D + 2.0 * D * F + F + D + 4.0 * D));
}

TEST(GraphTest, TensorNamesAreUnique) {
  // Sharding annotations and tensors/*.npy address tensors by name.
  for (const char* w : {"  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  vocab: 10\n"
                        "  seq_len: 4\n  batch: 2\n",
                        "  model: mlp\n  batch: 4\n  input: 3\n  hidden: 5\n  layers: 3\n  classes: 2\n"}) {
    ModelGraph g = build(w);
    std::set<std::string> names;
    for (const auto& t : g.tensors()) EXPECT_TRUE(names.insert(t.name).second) << "two tensors named " << t.name;
  }
}

TEST(GraphTest, EveryOpHasACostAndEveryComputeOpAKernel) {
  ModelGraph g = build("  model: transformer\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  vocab: 10\n"
                       "  seq_len: 4\n  batch: 2\n");
  for (const Op& op : g.ops()) {
    const OpKindDef* d = find_op_kind(op.kind);
    ASSERT_NE(d, nullptr) << op.name;
    EXPECT_NE(d->cost, nullptr) << op.name;
    EXPECT_NE(d->kernel, nullptr) << op.name;
    OpCost c = op_cost(g, op);
    EXPECT_GT(c.bytes_read + c.bytes_written, 0) << op.name;
  }
}

TEST(GraphTest, TopologicalOrderIsDeterministicAndValid) {
  ModelGraph g = build("  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  vocab: 10\n"
                       "  seq_len: 4\n  batch: 2\n");
  auto a = g.topological_order(), b = g.topological_order();
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), g.num_ops());
  std::vector<int> pos(g.num_ops());
  for (size_t i = 0; i < a.size(); ++i) pos[a[i]] = static_cast<int>(i);
  for (size_t v = 0; v < g.num_ops(); ++v)
    for (OpId p : g.predecessors(static_cast<OpId>(v))) EXPECT_LT(pos[p], pos[v]);
  // Construction order is already topological, so the order keeps it.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], static_cast<OpId>(i));
}

TEST(GraphTest, GradientsAccumulateForTensorsUsedTwice) {
  ModelGraph g = build("  model: transformer\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  vocab: 10\n"
                       "  seq_len: 4\n  batch: 2\n");
  // The residual stream feeds both the attention block and the residual add: its gradient is a sum.
  int sums = 0;
  for (const Op& op : g.ops()) sums += op.kind == OpKind::Add && op.phase == Phase::Backward;
  EXPECT_GE(sums, 2);
}

// Model FLOPs (what MFU counts, docs/outputs.md): every matmul of the logical step once, forward and backward, the
// optimizer left out. Each matmul of docs/model.md's MLP is listed here by hand: a product M x K @ K x N costs
// 2·M·K·N forward, and its backward computes the weight gradient (the same size) and the input gradient (the same
// size) unless the input is the batch, which takes no gradient.
TEST(GraphTest, ModelFlopsOfAnMlpCountEveryMatmulOnce) {
  const double B = 16, I = 12, H = 24, C = 5;  // 3 hidden layers
  ModelGraph g = build("  model: mlp\n  batch: 16\n  input: 12\n  hidden: 24\n  layers: 3\n  classes: 5\n");
  const double fc0 = 2 * B * I * H, fc1 = 2 * B * H * H, fc2 = 2 * B * H * H, out = 2 * B * H * C;
  const double forward = fc0 + fc1 + fc2 + out;
  const double weight_grads = fc0 + fc1 + fc2 + out;  // dW = h^T dy: the same M, K, N reordered
  const double input_grads = fc1 + fc2 + out;         // dh = dy W^T; none for fc0, whose input is x
  EXPECT_DOUBLE_EQ(g.matmul_flops(), forward + weight_grads + input_grads);
  int matmuls = 0;
  for (const Op& op : g.ops()) matmuls += op_cost(g, op).unit == Unit::Mxu && op.phase != Phase::Optimizer;
  EXPECT_EQ(matmuls, 4 + 4 + 3);
}

// docs/model.md's Transformer, each matmul listed: per layer the Q, K, V and output projections (T x D @ D x D),
// the scores Q·K^T and the context P·U (per sequence and head S x d_h @ d_h x S and S x S @ S x d_h: 2·B·S²·D
// each, the whole S x S although the causal mask zeroes half of P, as PaLM counts attention), the FFN's up and
// down projections (T x D @ D x F, T x F @ F x D); after the layers the unembedding (T x D @ D x V). The embedding
// is a lookup, not a matmul. Backward: both operands of every product take a gradient (the first layer's input
// is the embedding's output), each a product as large as the forward one.
TEST(GraphTest, ModelFlopsOfATransformerCountEveryMatmulOnce) {
  const double L = 2, D = 64, F = 256, V = 100, S = 32, B = 3, T = B * S;
  ModelGraph g = build("  model: transformer\n  layers: 2\n  d_model: 64\n  d_ff: 256\n  heads: 4\n  vocab: 100\n"
                       "  seq_len: 32\n  batch: 3\n");
  const double qkvo = 4 * (2 * T * D * D), attention = 2 * (2 * B * S * S * D), ffn = 2 * (2 * T * D * F);
  const double unembed = 2 * T * D * V;
  const double forward = L * (qkvo + attention + ffn) + unembed;
  EXPECT_DOUBLE_EQ(g.matmul_flops(), forward + 2 * forward);
  int matmuls = 0;
  for (const Op& op : g.ops()) matmuls += op_cost(g, op).unit == Unit::Mxu && op.phase != Phase::Optimizer;
  EXPECT_EQ(matmuls, 2 * 8 * 3 + 3);  // 8 products per layer and the unembedding, each with two gradients
  // Without the causal mask the count is the same: the mask changes the softmax, not the products.
  ModelGraph full = build("  model: transformer\n  layers: 2\n  d_model: 64\n  d_ff: 256\n  heads: 4\n  vocab: 100\n"
                          "  seq_len: 32\n  batch: 3\n  causal: false\n");
  EXPECT_DOUBLE_EQ(full.matmul_flops(), g.matmul_flops());
}

// The two conventions of model FLOPs (run.flops_convention) on one Llama-shaped layer (grouped-query attention,
// SwiGLU, RoPE), by hand as each source writes its formula, for both attention paths (the fused kernel counts what
// the einsums do, whatever it executes):
//  - PaLM, Appendix B (Chowdhery et al. 2022): 6 N + 12 L H Q T FLOPs per token, N the weights that multiply (here
//    the Q, K, V, output and three FFN matrices and the unembedding), H heads of width Q, T tokens per sequence;
//  - MaxText's calculate_tflops_training_per_device (maxtext_utils.py): per step 3 x (ffn1 + ffn2 + qkv +
//    projection + embedding) + 3 x causal attention, where ffn1 = 2 b s F D x 2 activations, ffn2 = 2 b s F D,
//    qkv = 2 b s D (H + 2 KV) Q, projection = 2 b s D H Q, embedding = 2 b s D V (the logits), and causal attention
//    is its 4 b s^2 H Q halved for the mask.
TEST(GraphTest, ModelFlopsConventionsOfOneLayerByHand) {
  const double b = 3, s = 32, D = 64, H = 4, KV = 2, Q = 16, F = 96, V = 100;
  for (const char* attention : {"einsum", "flash"}) {
    SCOPED_TRACE(attention);
    ModelGraph g = build(std::string("  model: transformer\n  layers: 1\n  d_model: 64\n  heads: 4\n  kv_heads: 2\n"
                                     "  d_ff: 96\n  vocab: 100\n  seq_len: 32\n  batch: 3\n  ffn: swiglu\n"
                                     "  norm: rmsnorm\n  rope: true\n  attention: ") + attention + "\n");
    const double N = D * H * Q + 2 * D * KV * Q + H * Q * D + 3 * D * F + D * V;
    const double palm = (6 * N + 12 * 1 * H * Q * s) * b * s;
    EXPECT_DOUBLE_EQ(g.model_flops(FlopsConvention::Palm), palm);
    EXPECT_DOUBLE_EQ(g.matmul_flops(), palm);
    const double ffn1 = 2 * b * s * F * D * 2, ffn2 = 2 * b * s * F * D, qkv = 2 * b * s * D * (H + 2 * KV) * Q;
    const double projection = 2 * b * s * D * H * Q, embedding = 2 * b * s * D * V;
    const double causal_attention = 4 * b * s * s * H * Q / 2;
    EXPECT_DOUBLE_EQ(g.model_flops(FlopsConvention::MaxText),
                     3 * (ffn1 + ffn2 + qkv + projection + embedding) + 3 * causal_attention);
  }
  // Without the mask MaxText's count is PaLM's.
  ModelGraph full = build("  model: transformer\n  layers: 1\n  d_model: 64\n  heads: 4\n  d_ff: 96\n  vocab: 100\n"
                          "  seq_len: 32\n  batch: 3\n  causal: false\n  attention: flash\n");
  EXPECT_DOUBLE_EQ(full.model_flops(FlopsConvention::MaxText), full.model_flops(FlopsConvention::Palm));
}

TEST(GraphTest, ModelFlopsLeaveTheOptimizerOut) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {4, 8}, DType::F32);
  TensorId y = b.matmul(x, b.param("w", {8, 2}), "mm");
  EXPECT_DOUBLE_EQ(g.matmul_flops(), 2.0 * 4 * 8 * 2);
  g.op(g.producer(y)).phase = Phase::Optimizer;  // a matmul inside an update is not the model's
  EXPECT_DOUBLE_EQ(g.matmul_flops(), 0.0);
  // The matmul workload is one forward product.
  EXPECT_DOUBLE_EQ(build("  model: matmul\n  m: 300\n  k: 200\n  n: 100\n").matmul_flops(), 2.0 * 300 * 200 * 100);
}
