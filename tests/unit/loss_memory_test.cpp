// The loss at a large vocabulary held as XLA holds it (docs/model.md, "Memory capacity"): bf16 logits, the
// log-softmax fused with its reductions (each row's log-sum-exp kept for the backward as its max and sum of
// exponentials, two fp32 values, no [T, V] probabilities), the logits' gradient written once, over the logits'
// buffer. The head's peak bytes by hand.
#include <gtest/gtest.h>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// A head alone, bf16: hidden rows x [T, D] (an input), the unembedding W [D, V], logits = x W, the mean
// cross-entropy against labels [T] (int32), its backward and SGD. Every op its own kernel (no fusion). By hand:
//   live all step: x 64*8*2 = 1024, labels 64*4 = 256, W 8*1024*2 = 16384: 17664;
//   the logits matmul: + logits 64*1024*2 = 131072 -> 148736;
//   the cross-entropy: + the loss 4 and the rows' max and sum 2*64*4 = 512 -> 149252;
//   its gradient: dlogits (131072) over the logits' buffer (they die with it), the max and sum die after -> 148740;
//   W's gradient dlogits^T x: + dW 8*1024*2 = 16384 -> 165124, the peak; then dlogits dies and SGD updates W in
//   place.
// Holding the fp32 probabilities [T, V] (262144 bytes) from the loss to its gradient, as a step that stores the
// softmax does, would have peaked at 17664 + 4 + 262144 + 131072 = 410884.
TEST(LossMemoryTest, TheHeadsPeakByHand) {
  constexpr int64_t T = 64, D = 8, V = 1024;
  ModelGraph g("head");
  GraphBuilder b(g, DType::BF16);
  const TensorId x = b.input("x", {T, D}, DType::BF16);
  const TensorId labels = b.label("labels", {T});
  const TensorId w = b.param("unembed", {D, V});
  const TensorId logits = b.einsum(x, w, "td,dv->tv", "logits");
  const TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
  b.backward(loss);
  b.optimizer(OptimizerConfig{});
  // The cross-entropy keeps two fp32 values per row, and its gradient reads the logits and them.
  const Op& ce = g.op(g.producer(loss));
  ASSERT_EQ(ce.outputs.size(), 3u);
  for (int i : {1, 2}) {
    EXPECT_EQ(g.tensor(ce.outputs[i]).shape, (std::vector<int64_t>{T}));
    EXPECT_EQ(g.tensor(ce.outputs[i]).dtype, DType::F32);
  }
  const TensorId dlogits = g.find_tensor("loss.dlogits");
  ASSERT_GE(dlogits, 0);
  const Op& grad = g.op(g.producer(dlogits));
  EXPECT_EQ(grad.inputs, (std::vector<TensorId>{logits, ce.outputs[1], ce.outputs[2], labels}));
  EXPECT_EQ(g.tensor(dlogits).dtype, DType::BF16);

  const Step s = plan_step("hardware: {preset: tpu-v6e, pod: {dims: [1, 1]}}\nworkload: {model: mlp, batch: 8, input: "
                           "8, hidden: 8, layers: 1, classes: 4}\nstrategy: {name: single_device}\n");
  LowerOptions opt;
  opt.fusion.enabled = false;
  const ExecProgram ep = lower(g, g.topological_order(), s.exp.hardware.chip, opt);
  const MemoryPlan m = plan_memory(g, ep);
  EXPECT_EQ(m.peak_bytes, 165124);
  ASSERT_GE(m.peak_op, 0);
  ASSERT_EQ(ep.ops.at(m.peak_op).members.size(), 1u);
  EXPECT_EQ(g.op(ep.ops.at(m.peak_op).members[0]).name, "logits.dB");
  // After each op, by hand.
  auto after = [&](const std::string& name) {
    for (size_t i = 0; i < ep.ops.size(); ++i)
      for (OpId id : ep.ops[i].members)
        if (g.op(id).name == name) return m.live_after_op.at(i);
    ADD_FAILURE() << name;
    return -1.0;
  };
  EXPECT_EQ(after("logits"), 148736);
  EXPECT_EQ(after("loss"), 149252);
  EXPECT_EQ(after("loss.dlogits"), 148740);
}

}  // namespace
