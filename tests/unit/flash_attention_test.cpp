// The fused attention kernel (workloads/ops/flash_attention.cpp): its online softmax against the einsum path
// (scores, softmax, context as separate ops) forward and backward, in fp32 and bf16; a device's queries of a
// sequence split over devices; its cost by hand count; its partition rule; and how the compiler lowers it.
#include <gtest/gtest.h>

#include <memory>

#include "hw/compiler/lower.h"
#include "plan/mesh.h"
#include "sim/config/loader.h"
#include "workloads/builder.h"
#include "workloads/compare_rules.h"
#include "workloads/ops/op_kind.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

using namespace podsim;

namespace {

struct Shapes {
  int64_t B = 2, S = 13, KV = 2, G = 1, E = 8;
  bool grouped() const { return G > 1; }
  std::vector<int64_t> q() const {
    return grouped() ? std::vector<int64_t>{B, S, KV, G, E} : std::vector<int64_t>{B, S, KV, E};
  }
  std::vector<int64_t> kv() const { return {B, S, KV, E}; }
};

// Both paths on the same q, k, v and output gradient: the flash kernel and its gradient rule, and the einsum path's
// scores, softmax and context with theirs. Returns the relative norm errors of o, dq, dk, dv (flash against einsum).
std::vector<double> flash_against_einsum(const Shapes& sh, DType dtype, bool causal, OpAttrs::Blocks blocks) {
  ModelGraph g("attn");
  GraphBuilder b(g, dtype);
  TensorId q = b.param("q", sh.q()), k = b.param("k", sh.kv()), v = b.param("v", sh.kv());
  TensorId dy = g.add_tensor({"dy", sh.q(), dtype, TensorRole::Input});
  const double scale = 0.35;
  TensorId o = b.flash_attention(q, k, v, scale, causal, blocks, "flash");
  const Op flash = g.op(g.producer(o));
  std::vector<TensorId> fg = find_op_kind(OpKind::FlashAttention)->grad(b, flash, {dy, -1});
  const char* e1 = sh.grouped() ? "bskge,btke->bkgst" : "bshe,bthe->bhst";
  const char* e2 = sh.grouped() ? "bkgst,btke->bskge" : "bhst,bthe->bshe";
  TensorId s = b.einsum(q, k, e1, "scores");
  TensorId p = b.softmax(s, scale, causal, "probs");
  TensorId c = b.einsum(p, v, e2, "context");
  const OpKindDef* mm = find_op_kind(OpKind::MatMul);
  // Copies: a rule adds ops, which may move the op table.
  const Op ctx_op = g.op(g.producer(c)), softmax_op = g.op(g.producer(p)), scores_op = g.op(g.producer(s));
  std::vector<TensorId> dpv = mm->grad(b, ctx_op, {dy});
  std::vector<TensorId> ds = find_op_kind(OpKind::Softmax)->grad(b, softmax_op, {dpv[0]});
  std::vector<TensorId> dqk = mm->grad(b, scores_op, {ds[0]});
  TensorStore st;
  init_step_inputs(g, st, 3);
  run_reference(g, st);
  auto err = [&](TensorId a, TensorId ref) { return compare_tensors(st.get(a), st.get(ref)).rel_norm; };
  return {err(o, c), err(fg[0], dqk[0]), err(fg[1], dqk[1]), err(fg[2], dpv[1])};
}

OpAttrs::Blocks blocks(int64_t q, int64_t kv, int64_t q_bwd, int64_t kv_bwd) {
  OpAttrs::Blocks b;
  b.q = q, b.kv = kv, b.q_bwd = q_bwd, b.kv_bwd = kv_bwd;
  return b;
}

}  // namespace

TEST(FlashAttentionTest, EqualsTheEinsumPathInFp32) {
  // 13 positions in blocks of 4 and 3 (partial blocks; several key blocks per row, so the running max and sum are
  // rescaled), one block per pass, multi-head and grouped queries, causal and not.
  for (const OpAttrs::Blocks& bl : {blocks(4, 3, 5, 4), blocks(128, 128, 128, 128)})
    for (int64_t G : {1, 3})
      for (bool causal : {true, false}) {
        Shapes sh;
        sh.G = G;
        SCOPED_TRACE("block_q " + std::to_string(bl.q) + " G " + std::to_string(G) + (causal ? " causal" : ""));
        for (double e : flash_against_einsum(sh, DType::F32, causal, bl)) EXPECT_LE(e, 1e-5);
      }
}

TEST(FlashAttentionTest, FusedBackwardEqualsTheEinsumPath) {
  // One backward kernel (dq per key block, summed after): the same gradients, in fp32 to 1e-5 and in bf16 within
  // the bound (each key block's dq share is rounded to bf16 before the sum).
  OpAttrs::Blocks bl = blocks(4, 3, 5, 4);
  bl.fused_bwd = true;
  for (int64_t G : {1, 3})
    for (bool causal : {true, false}) {
      Shapes sh;
      sh.G = G;
      SCOPED_TRACE("G " + std::to_string(G) + (causal ? " causal" : ""));
      for (double e : flash_against_einsum(sh, DType::F32, causal, bl)) EXPECT_LE(e, 1e-5);
      sh.S = 33;
      for (double e : flash_against_einsum(sh, DType::BF16, causal, bl)) EXPECT_LE(e, precision_tolerance(DType::BF16));
    }
}

TEST(FlashAttentionTest, EqualsTheEinsumPathInBf16WithinCompareBound) {
  // bf16 tensors: both round what they store, the einsum path its scores and probabilities too, the kernel the
  // probabilities and score gradients it feeds the MXU; podsim compare's bf16 bound holds.
  for (int64_t G : {1, 3}) {
    Shapes sh;
    sh.G = G;
    sh.S = 33;
    for (double e : flash_against_einsum(sh, DType::BF16, true, blocks(8, 8, 16, 8)))
      EXPECT_LE(e, precision_tolerance(DType::BF16));
  }
}

namespace {

struct At : DeviceIndex {
  int64_t i;
  explicit At(int64_t x) : i(x) {}
  int64_t index(const std::vector<std::string>&) const override { return i; }
};

}  // namespace

TEST(FlashAttentionTest, SplitQueriesMaskFromTheirDevicesOffset) {
  // Context parallelism: a device holding queries [r S/n, (r + 1) S/n) with every key computes those rows of the
  // whole causal attention (attrs.axes says which axes' index r is).
  const int64_t B = 1, S = 12, H = 2, E = 4, n = 3;
  ModelGraph g("attn");
  GraphBuilder b(g, DType::F32);
  TensorId q = b.param("q", {B, S, H, E}), k = b.param("k", {B, S, H, E}), v = b.param("v", {B, S, H, E});
  TensorId full = b.flash_attention(q, k, v, 0.5, true, blocks(2, 3, 2, 3), "full");
  TensorStore st;
  init_step_inputs(g, st, 9);
  run_reference(g, st);
  for (int64_t r = 0; r < n; ++r) {
    ModelGraph lg("local");
    GraphBuilder lb(lg, DType::F32);
    TensorId lq = lb.param("q", {B, S / n, H, E}), lk = lb.param("k", {B, S, H, E}), lv = lb.param("v", {B, S, H, E});
    OpAttrs::Blocks bl = blocks(2, 3, 2, 3);
    // A query block of S / n rows against all S keys: not square, so build the op by hand.
    Op op;
    op.name = "local";
    op.kind = OpKind::FlashAttention;
    op.inputs = {lq, lk, lv};
    op.outputs = {lg.add_tensor({"o", {B, S / n, H, E}, DType::F32, TensorRole::Activation}),
                  lg.add_tensor({"lse", {B, H, S / n}, DType::F32, TensorRole::Activation})};
    op.attrs.alpha = 0.5;
    op.attrs.causal = true;
    op.attrs.blocks = bl;
    op.attrs.axes = {"seq"};
    lg.add_op(op);
    TensorStore ls(lg.num_tensors());
    ls.set_device(std::make_shared<At>(r));
    Tensor qr({B, S / n, H, E});
    const auto& qa = st.get(q).data;
    std::copy(qa.begin() + r * (S / n) * H * E, qa.begin() + (r + 1) * (S / n) * H * E, qr.data.begin());
    ls.put(lq, qr);
    ls.put(lk, st.get(k));
    ls.put(lv, st.get(v));
    run_op(lg, lg.op(0), ls);
    Tensor want({B, S / n, H, E});
    const auto& fa = st.get(full).data;
    std::copy(fa.begin() + r * (S / n) * H * E, fa.begin() + (r + 1) * (S / n) * H * E, want.data.begin());
    EXPECT_LE(compare_tensors(ls.get(op.outputs[0]), want).rel_norm, 1e-6) << "device " << r;
  }
}

namespace {

OpCost cost_of(int64_t S, bool causal, OpAttrs::Blocks bl, bool backward) {
  ModelGraph g("attn");
  GraphBuilder b(g, DType::BF16);
  TensorId q = b.param("q", {2, S, 4, 128}), k = b.param("k", {2, S, 4, 128}), v = b.param("v", {2, S, 4, 128});
  TensorId o = b.flash_attention(q, k, v, 0.1, causal, bl, "a");
  const Op op = g.op(g.producer(o));
  if (!backward) return op_cost(g, op);
  TensorId dy = g.add_tensor({"dy", {2, S, 4, 128}, DType::BF16, TensorRole::Input});
  find_op_kind(OpKind::FlashAttention)->grad(b, op, {dy, -1});  // `op` is a copy
  return op_cost(g, g.op(static_cast<OpId>(g.num_ops() - 1)));
}

}  // namespace

TEST(FlashAttentionTest, CostByHandCount) {
  // B 2, H 4 (8 batch-heads), S = T = 1024, E 128, bf16. Blocks of 128: 8 x 8 block pairs, 36 of them on or below
  // the diagonal (1 + 2 + ... + 8).
  const double bh = 8, E = 128, S = 1024;
  OpCost c = cost_of(1024, true, blocks(128, 128, 256, 128), false);
  EXPECT_EQ(c.unit, Unit::Mxu);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 2.0 * 128 * 128 * E * 36 * bh);  // two GEMMs per visible pair
  EXPECT_DOUBLE_EQ(c.model_flops, 4 * bh * S * S * E);           // the whole square, as the einsum path
  EXPECT_DOUBLE_EQ(c.causal_flops, c.model_flops);
  // q once, a key block and a value block per visible pair; o (bf16) and lse (fp32) once.
  EXPECT_DOUBLE_EQ(c.bytes_read, bh * S * E * 2 + bh * 36 * 2 * 128 * E * 2);
  EXPECT_DOUBLE_EQ(c.bytes_written, bh * S * E * 2 + bh * S * 4);
  EXPECT_DOUBLE_EQ(c.vector.elements, bh * 36 * 128 * 128);  // the scores computed
  EXPECT_DOUBLE_EQ(c.vector.transcendental, 1);
  EXPECT_DOUBLE_EQ(c.vector.reduce, 2);         // the row max and sum,
  EXPECT_DOUBLE_EQ(c.vector.reduce_row, 128);  // along a block's keys
  // Not causal: all 64 pairs, no model FLOPs over a mask.
  OpCost full = cost_of(1024, false, blocks(128, 128, 128, 128), false);
  EXPECT_DOUBLE_EQ(full.flops, 2 * 2.0 * 128 * 128 * E * 64 * bh);
  EXPECT_DOUBLE_EQ(full.causal_flops, 0);
  // Backward in blocks of 256 queries by 128 keys: 4 x 8 pairs, 2 + 4 + 6 + 8 = 20 visible; seven GEMMs each.
  OpCost bw = cost_of(1024, true, blocks(128, 128, 256, 128), true);
  EXPECT_DOUBLE_EQ(bw.flops, 7 * 2.0 * 256 * 128 * E * 20 * bh);
  EXPECT_DOUBLE_EQ(bw.model_flops, 8 * bh * S * S * E);
  EXPECT_DOUBLE_EQ(bw.vector.elements, bh * 20 * 256 * 128);
  EXPECT_DOUBLE_EQ(bw.vector.transcendental, 2);
  // Reads: o and do for di; k, v once and q, do, lse, di per visible pair (key/value kernel); q, do, lse, di once
  // and k, v per visible pair (query kernel). Writes dq, dk, dv and di.
  const double row = bh * S;
  EXPECT_DOUBLE_EQ(bw.bytes_read, 2 * row * E * 2 + (2 * row * E * 2 + bh * 20 * 256 * (2 * E * 2 + 8)) +
                                      (row * (2 * E * 2 + 8) + bh * 20 * 2 * 128 * E * 2));
  EXPECT_DOUBLE_EQ(bw.bytes_written, 3 * row * E * 2 + row * 4);
  // Fused backward, same blocks: five GEMMs per visible pair (scores and dP once); the query kernel's reads go,
  // dq's partials (8 key blocks of 128, bf16) are written and read back by their sum; one exp per score and 7
  // simple operations (5, the mask's 2) plus the dk, dv accumulators' 2 E / 256, di's multiply-add and the sum's
  // add per partial element.
  OpAttrs::Blocks fb = blocks(128, 128, 256, 128);
  fb.fused_bwd = true;
  OpCost fused = cost_of(1024, true, fb, true);
  EXPECT_DOUBLE_EQ(fused.flops, 5 * 2.0 * 256 * 128 * E * 20 * bh);
  EXPECT_DOUBLE_EQ(fused.model_flops, bw.model_flops);
  const double partials = 8 * row * E * 2;
  EXPECT_DOUBLE_EQ(fused.bytes_read, 2 * row * E * 2 + (2 * row * E * 2 + bh * 20 * 256 * (2 * E * 2 + 8)) + partials);
  EXPECT_DOUBLE_EQ(fused.bytes_written, 3 * row * E * 2 + row * 4 + partials);
  const double scores = bh * 20 * 256 * 128;
  EXPECT_DOUBLE_EQ(fused.vector.elements, scores);
  EXPECT_DOUBLE_EQ(fused.vector.transcendental, 1);
  EXPECT_DOUBLE_EQ(fused.vector.simple, 7 + 2 * E / 256 + (2 * row * E + 8 * row * E) / scores);
  // Larger blocks waste more of the diagonal: blocks of 512, 2 x 2 pairs, 3 visible (the einsum path's 4 / 4).
  EXPECT_DOUBLE_EQ(cost_of(1024, true, blocks(512, 512, 512, 512), false).flops, 2 * 2.0 * 512 * 512 * E * 3 * bh);
}

TEST(FlashAttentionTest, SoftmaxScaleOutsideTheKernelCostsNoVectorWork) {
  // The same shapes as above (E 128, causal, forward blocks 128 x 128, backward 256 x 128). Queries scaled outside
  // the kernel (the default: MaxText folds 1/sqrt(head_dim) into the query projection, splash attention has no
  // scale): per score forward the subtraction of the running max and the cast of p, the mask's compare and select,
  // and the accumulator's rescale and add, 2 E / 128; backward per kernel the subtraction of lse, dp - di, the
  // product with p and the cast of ds, the masks' 2, the key/value kernel's cast of p, and the accumulators' 2 E / 256
  // (dk, dv) and E / 128 (dq).
  const double E = 128, row = 8 * 1024.0, scores = 8 * 20 * 256 * 128.0;
  const double di = 2 * row * E / scores;  // di's multiply-add per element of o, spread over the scores
  EXPECT_DOUBLE_EQ(cost_of(1024, true, blocks(128, 128, 256, 128), false).vector.simple, 2 + 2 + 2 * E / 128);
  EXPECT_DOUBLE_EQ(cost_of(1024, true, blocks(128, 128, 256, 128), true).vector.simple,
                   2 * (4 + 2) + 1 + 2 * E / 256 + E / 128 + di);
  // The Pallas flash kernel called with an sm_scale: one multiply more per score forward, two per kernel backward
  // (the scores and ds).
  OpAttrs::Blocks in_kernel = blocks(128, 128, 256, 128);
  in_kernel.scale_in_kernel = true;
  EXPECT_DOUBLE_EQ(cost_of(1024, true, in_kernel, false).vector.simple, 3 + 2 + 2 * E / 128);
  EXPECT_DOUBLE_EQ(cost_of(1024, true, in_kernel, true).vector.simple, 2 * (6 + 2) + 1 + 2 * E / 256 + E / 128 + di);
  in_kernel.fused_bwd = true;
  const double partial_adds = 8 * row * E / scores;
  EXPECT_DOUBLE_EQ(cost_of(1024, true, in_kernel, true).vector.simple, 6 + 2 + 1 + 2 * E / 256 + di + partial_adds);
}

TEST(FlashAttentionTest, SplitQueriesCostTheLastDevice) {
  // 1024 keys, this device's 256 queries: the program is every device's, so its cost is the device with the most
  // visible blocks, the last (queries 768..1023: 7 + 8 key blocks of 128).
  ModelGraph g("attn");
  GraphBuilder b(g, DType::BF16);
  Op op;
  op.name = "local";
  op.kind = OpKind::FlashAttention;
  op.inputs = {b.param("q", {1, 256, 1, 128}), b.param("k", {1, 1024, 1, 128}), b.param("v", {1, 1024, 1, 128})};
  op.outputs = {g.add_tensor({"o", {1, 256, 1, 128}, DType::BF16, TensorRole::Activation}),
                g.add_tensor({"lse", {1, 1, 256}, DType::F32, TensorRole::Activation})};
  op.attrs.causal = true;
  op.attrs.axes = {"seq"};
  g.add_op(op);
  EXPECT_DOUBLE_EQ(op_cost(g, g.op(0)).flops, 2 * 2.0 * 128 * 128 * 128 * 15);
}

namespace {

OpSharding rule(const ModelGraph& g, OpId id, const Mesh& m, std::vector<std::string> specs) {
  OpShardingQuery q{g, g.op(id), m, {}, {}};
  for (const std::string& s : specs) q.in.push_back(ShardSpec::parse(s));
  return partition_rule(g.op(id).kind)(q);
}

Mesh mesh3() {
  return Mesh::layout({"data", "seq", "model"}, {2, 2, 2}, Torus({2, 2, 2}, {true, true, true}), {});
}

}  // namespace

TEST(FlashAttentionTest, PartitionRuleSplitsHeadsBatchAndOptionallyQueries) {
  ModelGraph g("attn");
  GraphBuilder b(g, DType::F32);
  TensorId q = b.param("q", {4, 8, 4, 16}), k = b.param("k", {4, 8, 4, 16}), v = b.param("v", {4, 8, 4, 16});
  TensorId o = b.flash_attention(q, k, v, 0.25, true, {}, "a");
  TensorId dy = g.add_tensor({"dy", {4, 8, 4, 16}, DType::F32, TensorRole::Input});
  const Op fwd = g.op(g.producer(o));
  find_op_kind(OpKind::FlashAttention)->grad(b, fwd, {dy, -1});
  const Mesh m = mesh3();
  // Heads over model, batch over data: keys and values alike, the statistics [B, H, S] split so.
  OpSharding f = rule(g, 0, m, {"[data, -, model, -]", "[data, -, model, -]", "[data, -, model, -]"});
  EXPECT_EQ(f.in[1].text(), "[data, -, model, -]");
  EXPECT_EQ(f.out[0].text(), "[data, -, model, -]");
  EXPECT_EQ(f.out[1].text(), "[data, model, -]");
  EXPECT_TRUE(f.attrs.axes.empty());
  // Queries split along the sequence (context parallelism): keys and values whole along it (gathered), the mask
  // offset by the device's index along seq.
  f = rule(g, 0, m, {"[data, seq, model, -]", "[data, seq, model, -]", "[data, seq, model, -]"});
  EXPECT_EQ(f.in[0].text(), "[data, seq, model, -]");
  EXPECT_EQ(f.in[1].text(), "[data, -, model, -]");
  EXPECT_EQ(f.out[1].text(), "[data, model, seq]");
  EXPECT_EQ(f.attrs.axes, std::vector<std::string>{"seq"});
  // Backward: dk and dv are partial sums over the query split.
  OpSharding bw = rule(g, 1, m, {"[data, seq, model, -]", "[data, -, model, -]", "[data, -, model, -]",
                                 "[data, seq, model, -]", "[data, model, seq]", "[data, seq, model, -]"});
  EXPECT_EQ(bw.out[0].text(), "[data, seq, model, -]");
  EXPECT_EQ(bw.out[1].text(), "[data, -, model, -] partial(seq)");
  // The head width never splits.
  f = rule(g, 0, m, {"[-, -, -, model]", "[-, -, -, -]", "[-, -, -, -]"});
  EXPECT_EQ(f.in[0].text(), "[-, -, -, -]");
}

TEST(FlashAttentionTest, GroupedQueriesSplitTheirGroupAndSumKeyGradients) {
  ModelGraph g("attn");
  GraphBuilder b(g, DType::F32);
  TensorId q = b.param("q", {2, 8, 1, 4, 16}), k = b.param("k", {2, 8, 1, 16}), v = b.param("v", {2, 8, 1, 16});
  TensorId o = b.flash_attention(q, k, v, 0.25, true, {}, "a");
  TensorId dy = g.add_tensor({"dy", {2, 8, 1, 4, 16}, DType::F32, TensorRole::Input});
  const Op fwd = g.op(g.producer(o));
  find_op_kind(OpKind::FlashAttention)->grad(b, fwd, {dy, -1});
  const Mesh m = mesh3();
  // One key/value head (multi-query), the query heads over model: keys and values on every model device.
  OpSharding f = rule(g, 0, m, {"[-, -, -, model, -]", "[-, -, -, -]", "[-, -, -, -]"});
  EXPECT_EQ(f.in[1].text(), "[-, -, -, -]");
  EXPECT_EQ(f.out[1].text(), "[-, -, model, -]");
  OpSharding bw = rule(g, 1, m, {"[-, -, -, model, -]", "[-, -, -, -]", "[-, -, -, -]", "[-, -, -, model, -]",
                                 "[-, -, model, -]", "[-, -, -, model, -]"});
  EXPECT_EQ(bw.out[1].text(), "[-, -, -, -] partial(model)");
}

TEST(FlashAttentionTest, LowersToOneUnfusedKernelOfItsGemms) {
  // On a TPU v4 (2 TensorCores of 4 MXUs): the forward's 8 x 36 products of each GEMM shape split over the cores,
  // one fold each (K and N of 128); nothing fuses into the kernel, not even the elementwise rope gradient after it.
  Experiment e = load_experiment_text("hardware: {preset: tpu-v4}\nworkload: {model: matmul, m: 8, k: 8, n: 8}\n", "h.yaml");
  ModelGraph g("attn");
  GraphBuilder b(g, DType::BF16);
  TensorId q = b.param("q", {2, 1024, 4, 128}), k = b.param("k", {2, 1024, 4, 128}), v = b.param("v", {2, 1024, 4, 128});
  TensorId o = b.flash_attention(q, k, v, 0.1, true, {}, "a");
  TensorId dy = g.add_tensor({"dy", {2, 1024, 4, 128}, DType::BF16, TensorRole::Input});
  const Op fwd = g.op(g.producer(o));
  std::vector<TensorId> d = find_op_kind(OpKind::FlashAttention)->grad(b, fwd, {dy, -1});
  b.rope(d[0], "dq.rope");
  std::vector<OpId> order;
  for (size_t i = 0; i < g.num_ops(); ++i) order.push_back(static_cast<OpId>(i));
  const ExecProgram ep = lower(g, order, e.hardware.chip);
  ASSERT_EQ(ep.ops.size(), 3u);
  const ExecOp& f = ep.ops[0];
  EXPECT_EQ(f.unit, Unit::Mxu);
  EXPECT_EQ(f.cores, 2);
  ASSERT_EQ(f.gemm.passes.size(), 2u);
  EXPECT_EQ(f.gemm.passes[0].core_folds, 8 * 36 / 2);
  EXPECT_EQ(f.gemm.passes[1].core_folds, 8 * 36 / 2);
  EXPECT_EQ(f.gemm.passes[0].rows_per_fold, 128);
  EXPECT_EQ(f.gemm.core_folds, 8 * 36);
  EXPECT_DOUBLE_EQ(f.core_hbm_read * 2, op_cost(g, g.op(0)).bytes_read);
  EXPECT_EQ(ep.ops[1].gemm.passes.size(), 3u);
  EXPECT_EQ(ep.ops[1].members.size(), 1u);
  EXPECT_EQ(ep.ops[2].kind, OpKind::Rope);
}
