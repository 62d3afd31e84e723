// Mixed precision (workload.weight_dtype: fp32 with workload.dtype: bf16; docs/model.md): what the step stores in
// which type, where the casts are, and what they cost.
#include <gtest/gtest.h>

#include <set>

#include "sim/config/loader.h"
#include "workloads/i_workload.h"
#include "workloads/ops/op_kind.h"
#include "workloads/reference.h"

using namespace podsim;

namespace {

ModelGraph build(const std::string& workload) {
  const Experiment e = load_experiment_text("hardware:\n  preset: tpu-v4\nworkload:\n" + workload, "exp.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

const std::string kTiny = "  preset: llm-tiny\n  batch: 2\n  dtype: bf16\n";

}  // namespace

TEST(MixedPrecisionTest, Fp32MasterWeightsAreReadThroughBf16Copies) {
  const ModelGraph g = build(kTiny + "  weight_dtype: fp32\n");
  int params = 0, copies = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorId t = static_cast<TensorId>(i);
    const TensorInfo& info = g.tensor(t);
    if (info.role == TensorRole::Parameter) {
      ++params;
      EXPECT_EQ(info.dtype, DType::F32) << info.name;
      // Read only by its casts (forward) and its update; the embedding table by its lookup, whose rows are cast.
      for (OpId c : g.consumers(t)) {
        const Op& op = g.op(c);
        EXPECT_TRUE(op.kind == OpKind::Convert || op.phase == Phase::Optimizer ||
                    (op.kind == OpKind::Embedding && info.name == "embedding"))
            << info.name << " read by " << op.name;
      }
    }
    if (info.role == TensorRole::WeightCopy) {
      ++copies;
      EXPECT_EQ(info.dtype, DType::BF16) << info.name;
      const Op& cast = g.op(g.producer(t));
      EXPECT_EQ(cast.kind, OpKind::Convert);
      EXPECT_EQ(g.tensor(cast.inputs[0]).role, TensorRole::Parameter);
      EXPECT_EQ(info.name, g.tensor(cast.inputs[0]).name + ".bf16");
    }
    if (info.role == TensorRole::OptimizerState) {
      EXPECT_EQ(info.dtype, DType::F32) << info.name;
    }
  }
  // llm-tiny: per layer ln1, q, k, v, o, ln2, w1, w3, w2 (9); embedding, final norm, unembedding: 21 parameters,
  // each read in one layer, so one copy each, but for the embedding: its lookup reads the fp32 table and casts the
  // B x S rows it read (not the V x D table).
  EXPECT_EQ(params, 21);
  EXPECT_EQ(copies, 20);
  const Op& cast_rows = g.op(g.producer(g.find_tensor("embed")));
  EXPECT_EQ(cast_rows.kind, OpKind::Convert);
  EXPECT_EQ(g.tensor(cast_rows.outputs[0]).dtype, DType::BF16);
  EXPECT_EQ(g.tensor(cast_rows.inputs[0]).name, "embed.fp32");
  EXPECT_EQ(g.tensor(cast_rows.inputs[0]).dtype, DType::F32);
  EXPECT_EQ(g.op(g.producer(cast_rows.inputs[0])).kind, OpKind::Embedding);
  // Each update takes an fp32 gradient, cast back from the copy's bf16 gradient (the embedding's: scattered from the
  // rows' gradient, cast back to fp32, into the fp32 table).
  int updates = 0;
  for (const Op& op : g.ops()) {
    if (op.phase != Phase::Optimizer) continue;
    ++updates;
    EXPECT_EQ(op.kind, OpKind::AdamUpdate);
    const TensorId grad = op.inputs[1];
    EXPECT_EQ(g.tensor(grad).dtype, DType::F32) << op.name;
    const Op& from = g.op(g.producer(grad));
    if (op.inputs[0] == g.find_tensor("embedding")) {
      EXPECT_EQ(from.kind, OpKind::EmbeddingGrad) << op.name;
      continue;
    }
    EXPECT_EQ(from.kind, OpKind::Convert) << op.name;
    EXPECT_EQ(g.tensor(from.inputs[0]).dtype, DType::BF16) << op.name;
  }
  EXPECT_EQ(updates, 21);
}

TEST(MixedPrecisionTest, ByDefaultWeightsTakeTheComputeTypeAndNothingIsCast) {
  const ModelGraph g = build(kTiny);
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) {
      EXPECT_EQ(t.dtype, DType::BF16) << t.name;
    }
  for (const Op& op : g.ops()) EXPECT_NE(op.kind, OpKind::Convert) << op.name;
  // weight_dtype equal to dtype: the same.
  const ModelGraph same = build(kTiny + "  weight_dtype: bf16\n");
  EXPECT_EQ(same.num_ops(), g.num_ops());
}

TEST(MixedPrecisionTest, ATiedEmbeddingHasOneCopyPerLayerThatReadsItsWhole) {
  const ModelGraph g = build(kTiny + "  weight_dtype: fp32\n  tie_embeddings: true\n");
  std::vector<std::string> copies;
  for (const Op& op : g.ops())
    if (op.kind == OpKind::Convert && op.phase == Phase::Forward && g.tensor(op.inputs[0]).name == "embedding")
      copies.push_back(g.tensor(op.outputs[0]).name + "@" + std::to_string(op.cell));
  // The logits' (cell layers + 1 = 3); the lookup (cell 0) reads the fp32 table and casts its rows.
  EXPECT_EQ(copies, (std::vector<std::string>{"embedding.bf16@3"}));
  // Their gradients are summed in fp32 for the one update.
  const TensorId emb = g.find_tensor("embedding");
  for (const Op& op : g.ops())
    if (op.phase == Phase::Optimizer && op.inputs[0] == emb) {
      EXPECT_EQ(g.tensor(op.inputs[1]).dtype, DType::F32);
    }
}

TEST(MixedPrecisionTest, MlpToo) {
  const ModelGraph g = build("  model: mlp\n  batch: 8\n  input: 16\n  hidden: 32\n  layers: 2\n  classes: 4\n"
                             "  dtype: bf16\n  weight_dtype: fp32\n");
  int copies = 0;
  for (const TensorInfo& t : g.tensors()) {
    if (t.role == TensorRole::Parameter) {
      EXPECT_EQ(t.dtype, DType::F32) << t.name;
    }
    copies += t.role == TensorRole::WeightCopy;
  }
  EXPECT_EQ(copies, 6);  // 2 hidden layers and the output layer, weight and bias each
}

TEST(MixedPrecisionTest, TheCastRoundsToBf16AndCostsOneVpuOperationPerElement) {
  ModelGraph g("cast");
  GraphBuilder b(g, DType::BF16, DType::F32);
  const TensorId w = b.param("w", {2, 3});
  const TensorId x = b.input("x", {4, 2}, DType::BF16);
  const TensorId y = b.matmul(x, w, "mm");
  const Op& mm = g.op(g.producer(y));
  const Op& cast = g.op(g.producer(mm.inputs[1]));
  ASSERT_EQ(cast.kind, OpKind::Convert);
  const OpCost c = op_cost(g, cast);
  EXPECT_EQ(c.unit, Unit::Vpu);
  EXPECT_EQ(c.vector.elements, 6);
  EXPECT_EQ(c.vector.simple, 1);
  EXPECT_EQ(c.bytes_read, 6 * 4);     // fp32 master
  EXPECT_EQ(c.bytes_written, 6 * 2);  // bf16 copy
  EXPECT_TRUE(c.fusible);
  TensorStore s(g.num_tensors());
  Tensor wv({2, 3});
  // bf16 spacing at 1 is 2^-7: 1 + 2^-9 (a quarter of it) rounds down to 1, 1 + 3 * 2^-9 up to 1 + 2^-7.
  wv.data = {1.0f + 1.0f / 512, 1.0f + 3.0f / 512, -2.0f, 0.5f, 3.0f, 1e-3f};
  s.put(w, wv);
  run_op(g, cast, s);
  const Tensor& out = s.get(cast.outputs[0]);
  EXPECT_EQ(out.data[0], 1.0f);
  EXPECT_EQ(out.data[1], 1.0f + 1.0f / 128);
  EXPECT_EQ(out.data[2], -2.0f);
  EXPECT_EQ(out.data[5], round_bf16(1e-3f));
  EXPECT_EQ(s.get(w).data[0], 1.0f + 1.0f / 512);  // the master keeps its fp32 value
}
