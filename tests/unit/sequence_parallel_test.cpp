// The figures of Megatron-LM's vocabulary-parallel head and sequence parallelism (Korthikanti et al. 2022), against
// hand counts written here from the model's dimensions (tests/unit/plan_figures.h): each collective per layer and
// around the layers (kind, tensor, mesh axes, bytes per chip), and the activation memory the sequence split divides.
// Bytes are per chip, as in plan_figures_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"

#include "tests/unit/plan_figures.h"

using namespace podsim;
using namespace podsim::plan_steps;
using namespace podsim::plan_models;

namespace {

std::string transformer_vocab(int64_t vocab, bool tied) {
  std::string w = transformer(1, 2, "sgd");
  w.replace(w.find("vocab: " + std::to_string(V)), 7 + std::to_string(V).size(), "vocab: " + std::to_string(vocab));
  if (tied) w.replace(w.find("optimizer:"), 10, "tie_embeddings: true, optimizer:");
  return w;
}

}  // namespace

// Megatron over 4 chips with a vocabulary split over `model` (the default), a vocabulary of 24 (4 divides it) and
// of 26 (padded to 28: 7 classes per chip, the last chip's last 1 padding), separate and tied embeddings. Each chip
// holds ceil(V / 4) rows of the table and columns of the unembedding; its logits are [b, S, ceil(V / 4)] and are
// never gathered (no all-gather in the step); the cross-entropy's collectives are three all-reduces over `model`
// of one float per row (b x S): the max (by maximum), the sum of exponentials and the label's logit (by sum).
TEST(PlanFiguresTest, VocabularyParallelHeadMovesOneFloatPerRow) {
  for (int64_t vocab : {24, 26})
    for (bool tied : {false, true}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (tied ? " tied" : ""));
      const Step s = plan_step(hardware("[4, 1]") + transformer_vocab(vocab, tied) + "strategy: {name: spmd}\n");
      const Program& p = s.plan.programs[0];
      const int64_t local_v = (vocab + 3) / 4, batch = 2;
      const double rows = batch * S * F32;
      std::vector<std::string> head;
      for (const std::string& l : collectives(p))
        if (l.rfind("all_reduce loss.", 0) == 0) head.push_back(l);
      EXPECT_EQ(head, sorted({ar("loss.max", "model", rows), ar("loss.sumexp", "model", rows),
                              ar("loss.target", "model", rows)}));
      for (OpId id : p.order) {
        const Op& op = p.graph.op(id);
        EXPECT_NE(op.kind, OpKind::AllGather) << op.name;
        if (op.kind == OpKind::AllReduce) {
          EXPECT_EQ(op.attrs.reduce_max, op.name.rfind("loss.max/", 0) == 0) << op.name;
        }
      }
      ASSERT_NE(local_tensor(p, "logits"), nullptr);
      EXPECT_EQ(local_tensor(p, "logits")->shape, (std::vector<int64_t>{batch, S, local_v}));
      EXPECT_EQ(local_tensor(p, "embedding")->bytes(), local_v * D * F32);
      if (!tied) {
        EXPECT_EQ(local_tensor(p, "unembed")->bytes(), D * local_v * F32);
      }
      EXPECT_EQ(local_tensor(p, "unembed") == nullptr, tied);
      expect_reproduces_the_step(s);
      // Every chip's reduced max is each row's max over all the (real) classes: a max, not a sum of the chips'
      // maxima (which would still give the right loss, the shift cancelling).
      TensorStore inputs;
      init_step_inputs(s.graph, inputs, 5);
      TensorStore ref = inputs;
      run_reference(s.graph, ref);
      const Tensor& logits = ref.get(s.graph.find_tensor("logits"));
      const std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 5);
      TensorId global_max = -1;
      for (size_t t = 0; t < p.graph.num_tensors(); ++t)
        if (p.graph.tensor(static_cast<TensorId>(t)).name == "loss.max.global") global_max = static_cast<TensorId>(t);
      ASSERT_GE(global_max, 0);
      // (The chips' logits are the reference's within rounding: the residual stream was summed in another order.)
      for (const TensorStore& chip : chips) {
        const Tensor& m = chip.get(global_max);
        ASSERT_EQ(m.elements(), batch * S);
        for (int64_t r = 0; r < batch * S; ++r) {
          const float want = *std::max_element(logits.data.begin() + r * vocab, logits.data.begin() + (r + 1) * vocab);
          EXPECT_NEAR(m.data[r], want, 1e-5 * std::fabs(want)) << "row " << r;
        }
      }
    }
}

// The same step with strategy.vocab_parallel: false keeps the table and the unembedding whole and gathers nothing
// either (the logits are computed whole on every chip): no collective of the cross-entropy.
TEST(PlanFiguresTest, VocabularyParallelOffKeepsTheHeadWhole) {
  const Step s = plan_step(hardware("[4, 1]") + transformer(1, 2, "sgd") +
                           "strategy: {name: spmd, vocab_parallel: false}\n");
  const Program& p = s.plan.programs[0];
  EXPECT_EQ(local_tensor(p, "embedding")->bytes(), V * D * F32);
  EXPECT_EQ(local_tensor(p, "unembed")->bytes(), D * V * F32);
  EXPECT_EQ(local_tensor(p, "logits")->shape, (std::vector<int64_t>{2, S, V}));
  for (const std::string& l : collectives(p)) EXPECT_EQ(l.find("loss"), std::string::npos) << l;
}

// Sequence parallelism (Korthikanti et al. 2022) over 4 chips, 2 layers, batch 2: per layer, forward, the attention
// output and the FFN output are reduce-scattered into the sequence split (batch x S x D in, a quarter out) and the
// two layer norms' outputs all-gathered along S before q/k/v and the FFN's up projection (a quarter in, whole out):
// 2 reduce-scatters and 2 all-gathers instead of Megatron's 2 all-reduces. Backward, the row-parallel matmuls'
// output gradients (the residual gradients) are all-gathered and the layer norms' output gradients
// reduce-scattered: again 2 + 2 instead of 2 all-reduces. Around the layers: the lookup is reduce-scattered into S
// and its gradient gathered back; the final norm's output is gathered before the unembedding and the unembedding's
// input gradient reduce-scattered; the cross-entropy's three values per row as without. The layer norms' gamma and
// beta and the FFN's b2 now sum their gradients over the sequence shards: an all-reduce of D floats each.
TEST(PlanFiguresTest, SequenceParallelTurnsEachAllReduceIntoReduceScatterAndAllGather) {
  const int64_t batch = 2;
  const Step s = plan_step(hardware("[4, 1]") + transformer(2, batch, "sgd") +
                           "strategy: {name: spmd, sequence_parallel: true}\n");
  const double act = batch * S * D * F32, rows = batch * S * F32;
  std::vector<std::string> want = {
      rs("embed", "model", 1, act, act / 4),      ag("embed.grad.sum1", "model", 1, act / 4, act),
      ag("final_ln", "model", 1, act / 4, act),   rs("logits.dA", "model", 1, act, act / 4),
      ag("final_ln.dx", "model", 1, act / 4, act),  // layer 1's FFN output gradient
      ar("loss.max", "model", rows),              ar("loss.sumexp", "model", rows),
      ar("loss.target", "model", rows),           ar("final_ln.gamma.grad", "model", D * F32),
      ar("final_ln.beta.grad", "model", D * F32)};
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* t : {".ln1", ".ln2"}) want.push_back(ag(n + t, "model", 1, act / 4, act));
    for (const char* t : {".attn.o", ".ffn.down", ".ffn.up.dA", ".ln1.grad.sum2"})
      want.push_back(rs(n + t, "model", 1, act, act / 4));
    want.push_back(ag(n + ".attn.residual.grad.sum1", "model", 1, act / 4, act));  // the attention output's gradient
    for (const char* t : {".ln1.gamma", ".ln1.beta", ".ln2.gamma", ".ln2.beta", ".ffn.b2"})
      want.push_back(ar(n + t + ".grad", "model", D * F32));
  }
  want.push_back(ag("layer0.ffn.residual.grad.sum1", "model", 1, act / 4, act));  // layer 0's FFN output gradient
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// Mixed precision (fp32 master weights read through bf16 copies) changes what the matmuls read, not how sequence
// parallelism splits them: the same collectives (bf16 activations: half the bytes), and q, k, v, the FFN's up
// projection and the attention scores split over the heads and hidden units as without it.
TEST(PlanFiguresTest, SequenceParallelWithMixedPrecisionSplitsAsWithout) {
  const int64_t batch = 2;
  std::string mixed = transformer(2, batch, "sgd");
  mixed.replace(mixed.find("dtype: fp32"), 11, "dtype: bf16, weight_dtype: fp32");
  const std::string sp = "strategy: {name: spmd, sequence_parallel: true}\n";
  const Step a = plan_step(hardware("[4, 1]") + transformer(2, batch, "sgd") + sp);
  const Step b = plan_step(hardware("[4, 1]") + mixed + sp);
  for (const char* n : {"layer0.attn.q", "layer0.attn.k", "layer0.attn.v", "layer0.attn.scores", "layer1.ffn.up"}) {
    SCOPED_TRACE(n);
    ASSERT_TRUE(local_tensor(a.plan.programs[0], n) && local_tensor(b.plan.programs[0], n));
    EXPECT_EQ(local_tensor(b.plan.programs[0], n)->shape, local_tensor(a.plan.programs[0], n)->shape);
  }
  EXPECT_EQ(local_tensor(b.plan.programs[0], "layer0.attn.scores")->shape,
            (std::vector<int64_t>{batch, NH / 4, S, S}));
  // The same collectives, named after the same values (the embedding's gradient is named for its cast, not its sum).
  auto collectives_of = [](const Program& p) {
    std::vector<std::string> k;
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      if (!is_communication(op.kind)) continue;
      std::string name = op.name.substr(0, op.name.rfind('/'));
      if (name == "embed.grad.sum1") name = "embed.grad";
      k.push_back(std::string(op_kind_name(op.kind)) + " " + name);
    }
    std::sort(k.begin(), k.end());
    return k;
  };
  EXPECT_EQ(collectives_of(b.plan.programs[0]), collectives_of(a.plan.programs[0]));
}

// Activation memory of the sequence-parallel regions: the lookup, every layer norm's input (the residual sums) and
// output, the FFN's output bias and the final norm, each batch x S x D whole on every chip under Megatron, and a
// quarter of it with sequence parallelism over 4 chips; the norms' statistics (batch x S) likewise. The gathered
// copies of the norms' outputs that q/k/v and the FFN read stay whole (kept for the weight gradients).
TEST(PlanFiguresTest, SequenceParallelDividesTheResidualStreamByTheAxis) {
  const int64_t batch = 2;
  const std::string w = transformer(2, batch, "sgd");
  const Step plain = plan_step(hardware("[4, 1]") + w + "strategy: {name: spmd}\n");
  const Step sp = plan_step(hardware("[4, 1]") + w + "strategy: {name: spmd, sequence_parallel: true}\n");
  std::vector<std::string> names = {"final_ln"};
  for (int l = 0; l < 2; ++l)
    for (const char* t : {".ln1", ".ln2", ".attn.residual", ".ffn.residual", ".ffn.down.bias"})
      names.push_back("layer" + std::to_string(l) + t);
  double whole = 0, split = 0;
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    const TensorInfo* a = local_tensor(plain.plan.programs[0], n);
    const TensorInfo* b = local_tensor(sp.plan.programs[0], n);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->bytes(), batch * S * D * F32);
    EXPECT_EQ(b->bytes(), batch * S * D * F32 / 4);
    whole += a->bytes();
    split += b->bytes();
  }
  EXPECT_EQ(split, whole / 4);
  // embed: the lookup's reduce-scattered version.
  EXPECT_NE(local_tensor(sp.plan.programs[0], "embed@[-, model, -]"), nullptr);
  EXPECT_EQ(local_tensor(sp.plan.programs[0], "embed@[-, model, -]")->bytes(), batch * S * D * F32 / 4);
  for (const char* stat : {"layer0.ln1.mean", "layer0.ln1.rstd"}) {
    SCOPED_TRACE(stat);
    ASSERT_NE(local_tensor(sp.plan.programs[0], stat), nullptr);
    EXPECT_EQ(local_tensor(sp.plan.programs[0], stat)->bytes(), batch * S * F32 / 4);
    EXPECT_EQ(local_tensor(plain.plan.programs[0], stat)->bytes(), batch * S * F32);
  }
}

// Sequence parallelism under data x model (2 x 2): the values it splits along S keep the replica's rows (b = TB / 2),
// so nothing gathers the batch over `data`; per layer the same reduce-scatters and all-gathers over `model` as
// alone, of b x S x D; the layer norms' and b2's gradients, partial over both axes, are all-reduced over both at
// once.
TEST(PlanFiguresTest, SequenceParallelKeepsTheDataSplit) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(1, TB, "sgd") +
                           "strategy: {name: [data_parallel, spmd], sequence_parallel: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n");
  const double act = TB / 2 * S * D * F32;
  std::vector<std::string> model, data;
  for (const std::string& l : collectives(s.plan.programs[0])) {
    if (l.find(" [model]") != std::string::npos) model.push_back(l);
    else if (l.find(" [data]") != std::string::npos) data.push_back(l);
  }
  std::vector<std::string> want = {
      rs("embed", "model", 1, act, act / 2),          ag("embed.grad.sum1", "model", 1, act / 2, act),
      ag("final_ln", "model", 1, act / 2, act),       rs("logits.dA", "model", 1, act, act / 2),
      ag("final_ln.dx", "model", 1, act / 2, act),    ag("layer0.attn.residual.grad.sum1", "model", 1, act / 2, act),
      ag("layer0.ln1", "model", 1, act / 2, act),     ag("layer0.ln2", "model", 1, act / 2, act),
      rs("layer0.attn.o", "model", 1, act, act / 2),  rs("layer0.ffn.down", "model", 1, act, act / 2),
      rs("layer0.ffn.up.dA", "model", 1, act, act / 2), rs("layer0.ln1.grad.sum2", "model", 1, act, act / 2),
      ar("loss.max", "model", TB / 2 * S * F32),      ar("loss.sumexp", "model", TB / 2 * S * F32),
      ar("loss.target", "model", TB / 2 * S * F32)};
  EXPECT_EQ(model, sorted(want));
  for (const std::string& l : data) EXPECT_EQ(l.rfind("all_reduce ", 0), 0u) << l;  // gradients and the loss only
  expect_reproduces_the_step(s);
}

// Sequence parallelism needs the megatron scheme and a Transformer; the error names the key and what would do.
TEST(PlanFiguresTest, SequenceParallelOnlyWithMegatronOnATransformer) {
  try {
    plan_step(hardware("[2, 2]") + transformer(1, TB, "sgd") +
              "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1], sequence_parallel: true}\n"
              "mesh: {axes: [s0, s1], shape: [2, 2]}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("strategy.scheme is 2d; use scheme: megatron"), std::string::npos) << e.message();
    EXPECT_EQ(e.where().str().rfind("plan.yaml:", 0), 0u) << e.where().str();
  }
  try {
    plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: spmd, sequence_parallel: true}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("the mlp workload has none"), std::string::npos) << e.message();
  }
  try {
    plan_step(hardware("[4, 1]") + transformer(1, TB, "sgd") +
              "strategy: {name: [data_parallel, spmd], sequence_parallel: true}\nmesh: {axes: [data, model], shape: [4, 1]}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("which has 1 chip"), std::string::npos) << e.message();
  }
}
