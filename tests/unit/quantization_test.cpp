// Quantized serving (docs/model.md, "Quantized serving"; AQT as MaxText and JetStream run it): the numbers
// (workloads/quantization.h), the weights' per-channel quantization, the numerics of a weight-only int8 step against
// the fp32 step on its dequantized weights, weights and activations int8 against weight-only, and the bytes and MXU
// rate each quantization gives a decode, by hand count.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/plan_figures.h"
#include "workloads/quantization.h"

using namespace podsim;
using namespace podsim::plan_steps;
using namespace podsim::plan_models;

namespace {

// llm-tiny in fp32, a decode of 3 sequences of ragged contexts, with `extra` keys.
std::string tiny(const std::string& extra) {
  return "hardware: {preset: tpu-v5e}\nworkload: {preset: llm-tiny, dtype: fp32, step: decode, batch: 3, "
         "context_lengths: [4, 9, 2]" + extra + "}\n";
}

struct Ran {
  ModelGraph g{"step"};
  TensorStore st;
};
Ran build(const std::string& text) {
  Ran r;
  const Experiment e = load_experiment_text(text, "exp.yaml");
  r.g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  init_step_inputs(r.g, r.st, 1);
  return r;
}

double rel(const Tensor& a, const Tensor& b) { return compare_tensors(a, b).rel_norm; }

}  // namespace

TEST(QuantizationTest, NumbersOnTheirGrids) {
  EXPECT_FLOAT_EQ(quant_scale(254, DType::I8), 2);
  EXPECT_EQ(quantize(5, 2, DType::I8), 2);    // 2.5 rounds half to even
  EXPECT_EQ(quantize(7, 2, DType::I8), 4);    // 3.5 -> 4
  EXPECT_EQ(quantize(1000, 2, DType::I8), 127);  // clipped
  EXPECT_EQ(quantize(-1000, 2, DType::I8), -127);
  EXPECT_EQ(quantize(3, 0, DType::I8), 0);    // an all-zero channel
  // fp8 e4m3: 3 mantissa bits; 1.0625 lies between 1 and 1.125 (ties to even: 1), saturating at 448, subnormals
  // in steps of 2^-9 below 2^-6.
  EXPECT_EQ(round_fp8(1.0625f), 1.0f);
  EXPECT_EQ(round_fp8(1.1f), 1.125f);
  EXPECT_EQ(round_fp8(300.0f), 288.0f);
  EXPECT_EQ(round_fp8(1e6f), 448.0f);
  EXPECT_EQ(round_fp8(-0.0029f), -0.001953125f);  // 1.48 steps of 2^-9 -> 1
  EXPECT_EQ(round_fp8(-0.0031f), -0.00390625f);   // 1.59 steps -> 2
  EXPECT_FLOAT_EQ(quant_scale(448, DType::F8), 1);
}

// Each int8 weight holds its float draw on the grid of its output channel's scale (absmax / 127 over the contracted
// dimension): every channel reaches 127 and the dequantized weight is within half a step of the float one.
TEST(QuantizationTest, WeightsQuantizePerOutputChannel) {
  const Ran q = build(tiny(", weight_dtype: int8"));
  const Ran f = build(tiny(""));
  const TensorId w = q.g.find_tensor("layer0.ffn.w1"), s = q.g.find_tensor("layer0.ffn.w1.scale");
  ASSERT_GE(w, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(q.g.tensor(w).dtype, DType::I8);
  EXPECT_EQ(q.g.tensor(s).shape, (std::vector<int64_t>{1, 128}));  // [d_model -> 1, d_ff]
  const Tensor& qw = q.st.get(w);
  const Tensor& sc = q.st.get(s);
  const Tensor& fw = f.st.get(f.g.find_tensor("layer0.ffn.w1"));  // the same draw (by name), unquantized
  for (int64_t c = 0; c < 128; ++c) {
    float most = 0;
    for (int64_t d = 0; d < 64; ++d) {
      const float v = qw.data[d * 128 + c];
      EXPECT_EQ(v, std::nearbyint(v));
      most = std::max(most, std::fabs(v));
      EXPECT_LE(std::fabs(v * sc.data[c] - fw.data[d * 128 + c]), sc.data[c] / 2 * 1.0001f);
    }
    EXPECT_EQ(most, 127);
  }
}

// Weight-only int8: the step equals the fp32 step whose weights are the dequantized ones (q * scale), since the
// per-channel scale factors out of each product: (x . q) * s = x . (q * s) up to fp32 rounding.
TEST(QuantizationTest, WeightOnlyEqualsTheStepOnDequantizedWeights) {
  Ran q = build(tiny(", weight_dtype: int8"));
  Ran f = build(tiny(""));
  int replaced = 0;
  for (size_t t = 0; t < q.g.num_tensors(); ++t) {
    const TensorInfo& info = q.g.tensor(static_cast<TensorId>(t));
    if (info.role != TensorRole::Parameter || info.dtype != DType::I8) continue;
    const Tensor& qw = q.st.get(static_cast<TensorId>(t));
    const Tensor& sc = q.st.get(q.g.find_tensor(info.name + ".scale"));
    Tensor& fw = f.st.get_mut(f.g.find_tensor(info.name));
    // The scale's index of element i: its coordinates on the dimensions the scale keeps.
    for (int64_t i = 0; i < qw.elements(); ++i) {
      int64_t rem = i, at = 0, stride = 1, sstride = 1;
      for (size_t d = qw.shape.size(); d-- > 0;) {
        const int64_t idx = (rem / stride) % qw.shape[d];
        if (sc.shape[d] > 1) at += idx * sstride;
        sstride *= sc.shape[d];
        stride *= qw.shape[d];
      }
      fw.data[i] = qw.data[i] * sc.data[at];
    }
    ++replaced;
  }
  EXPECT_EQ(replaced, 2 * 7);  // q, k, v, o, w1, w2, w3 of both layers; the embeddings and norms stay fp32
  run_reference(q.g, q.st);
  run_reference(f.g, f.st);
  EXPECT_LE(rel(q.st.get(q.g.find_tensor("logits")), f.st.get(f.g.find_tensor("logits"))), 1e-5);
}

// Weights and activations int8 (each matmul's input quantized per row by its absmax) against weight-only: within
// the activations' quantization error (a few 1/127 steps), not equal.
TEST(QuantizationTest, WeightsAndActivationsStayNearWeightOnly) {
  Ran wa = build(tiny(", weight_dtype: int8, activation_dtype: int8"));
  Ran w = build(tiny(", weight_dtype: int8"));
  run_reference(wa.g, wa.st);
  run_reference(w.g, w.st);
  const double e = rel(wa.st.get(wa.g.find_tensor("logits")), w.st.get(w.g.find_tensor("logits")));
  EXPECT_GT(e, 1e-6);
  EXPECT_LT(e, 0.05);
  // An int8 KV cache likewise, against the fp32 cache.
  Ran kv = build(tiny(", kv_dtype: int8"));
  Ran ref = build(tiny(""));
  run_reference(kv.g, kv.st);
  run_reference(ref.g, ref.st);
  const double k = rel(kv.st.get(kv.g.find_tensor("logits")), ref.st.get(ref.g.find_tensor("logits")));
  EXPECT_GT(k, 1e-6);
  EXPECT_LT(k, 0.05);
}

// The bytes a decode streams, by hand count (v5e, one chip, unfused plan so that every tensor is in HBM): the
// weights in memory (int8: one byte a weight, and one fp32 scale per output channel; the embeddings and norms stay
// bf16), and the cache (int8: E bytes and one fp32 scale per cached token and head).
TEST(QuantizationTest, BytesByHandCount) {
  auto step = [](const std::string& q) {
    return plan_step("hardware: {preset: tpu-v5e}\n" + std::string("workload: {preset: llm-tiny, step: decode, batch: 2, "
                     "context: 7") + q + "}\nrun: {fusion: none}\n");
  };
  // llm-tiny: per layer q [64, 2, 2, 16] (= 64 x 64), k, v [64, 2, 16], o [2, 2, 16, 64], w1, w3 [64, 128], w2
  // [128, 64]: 36864 matmul weights; scales: q 64, k 32, v 32, o 64, w1 128, w3 128, w2 64 = 512 channels.
  const double matmul = 2 * 36864, channels = 2 * 512, other = 106816 - matmul;  // embeddings and norms
  EXPECT_EQ(memory(step(""), 0).at_peak.weights, (matmul + other) * 2);
  EXPECT_EQ(memory(step(", weight_dtype: int8"), 0).at_peak.weights, matmul * 1 + channels * 4 + other * 2);
  // The cache: 2 layers x (k, v) x 2 sequences x 8 places x 2 heads x 16.
  const double cached = 2 * 2 * 2 * 8 * 2;
  EXPECT_EQ(memory(step(""), 0).at_peak.kv_cache, cached * 16 * 2);
  EXPECT_EQ(memory(step(", kv_dtype: int8"), 0).at_peak.kv_cache, cached * (16 * 1 + 4));
}

// Weights and activations int8 run at the MXU's int8 rate: on v5e (int8_rate 2) a fold holds 2 x 128 rows of the
// contraction, half the folds of bf16 (or of weight-only, which multiplies in bf16); on v4 (int8_rate 1) the same
// folds as bf16.
TEST(QuantizationTest, Int8ProductsFoldTheContractionAtTheChipsRate) {
  auto folds = [](const std::string& preset, const std::string& q) {
    const Step s = plan_step("hardware: {preset: " + preset + "}\nworkload: {preset: llama2-7b, layers: 1, step: "
                             "decode, batch: 8, context: 16" + q + "}\n");
    const Program& p = s.plan.programs[0];
    const ExecProgram ep = lower(p.graph, p.order, s.exp.hardware.chip, lower_options(s.exp.run));
    for (const ExecOp& e : ep.ops)
      for (OpId m : e.members)
        if (p.graph.op(m).name == "layer0.ffn.up.acc" || p.graph.op(m).name == "layer0.ffn.up")
          if (p.graph.op(m).kind == OpKind::MatMul) return std::make_pair(e.gemm.k_pack, e.gemm.core_folds);
    return std::make_pair(int64_t(0), int64_t(0));
  };
  // [8, 4096] . [4096, 11008]: 4096 / 128 = 32 K folds by 11008 / 128 = 86 N folds.
  EXPECT_EQ(folds("tpu-v5e", ""), std::make_pair(int64_t(1), int64_t(32 * 86)));
  EXPECT_EQ(folds("tpu-v5e", ", weight_dtype: int8"), std::make_pair(int64_t(1), int64_t(32 * 86)));
  EXPECT_EQ(folds("tpu-v5e", ", weight_dtype: int8, activation_dtype: int8"), std::make_pair(int64_t(2), int64_t(16 * 86)));
  EXPECT_EQ(folds("tpu-v4", ", weight_dtype: int8, activation_dtype: int8").second, 32 * 86 / 2);  // 2 cores split N
}
