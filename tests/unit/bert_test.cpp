// BERT pre-training (workloads/models/bert.cpp): the encoder's structure as MLPerf's modeling.py has it (post-LN,
// bidirectional attention with biases, the embeddings' sum), the heads (masked positions gathered, the decoder tied
// to the word table, the pooled first token), what LAMB excludes, the located errors of bad shapes, and under
// Megatron the collectives of a layer counted by hand, with each partitioned step reproducing the single-device one.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tests/unit/plan_steps.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// 2 layers, d_model 16, 4 heads, FFN 32, vocabulary 40, sequences of 8 of a 10-row position table, 3 masked
// positions, 4 sequences.
std::string bert(const std::string& extra = "", int positions = 10, int predictions = 3) {
  return "workload: {model: bert, layers: 2, d_model: 16, heads: 4, d_ff: 32, vocab: 40, seq_len: 8, max_positions: " +
         std::to_string(positions) + ", max_predictions: " + std::to_string(predictions) +
         ", batch: 4, dtype: fp32, weight_decay: 0.01, eps: 1e-6" + extra + "}\nrun: {fusion: none}\n";
}

// The key projection's bias has a zero gradient in exact arithmetic: it adds q . b to every score of a query, which
// the softmax cancels. Its gradient, Adam moments and update are rounding noise in any run, so the comparisons leave
// them out, and check that they are noise: the reference's key-bias gradient is below 1e-4 of the query bias's.
bool key_bias(const std::string& name) { return name.find(".attn.k.b") != std::string::npos; }

void expect_same_step(const Step& s) {
  expect_reproduces_the_step(s, key_bias);
  TensorStore st;
  init_step_inputs(s.graph, st, 5);
  run_reference(s.graph, st);
  auto norm = [&](const std::string& t) {
    double n = 0;
    for (float x : st.get(s.graph.find_tensor(t)).data) n += static_cast<double>(x) * x;
    return std::sqrt(n);
  };
  EXPECT_LT(norm("layer0.attn.k.b.grad"), 1e-4 * norm("layer0.attn.q.b.grad"));
}

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "bert.yaml"); }

// Post-LN: each sublayer's output joins the residual, then the layer norm (epsilon 1e-12); attention is
// bidirectional; the projections have biases ([H, E] for q, k, v).
TEST(BertTest, PostLayerNormEncoder) {
  const ModelGraph g = build(bert());
  const Op& ln1 = producer(g, "layer0.ln1");
  EXPECT_EQ(ln1.kind, OpKind::LayerNorm);
  EXPECT_EQ(ln1.attrs.eps, 1e-12);
  EXPECT_EQ(input_name(g, ln1, 0), "layer0.attn.residual");
  const Op& res = producer(g, "layer0.attn.residual");
  EXPECT_EQ(input_name(g, res, 0), "embed.ln");
  EXPECT_EQ(input_name(g, res, 1), "layer0.attn.o.bias");
  EXPECT_EQ(input_name(g, producer(g, "layer0.ln2"), 0), "layer0.ffn.residual");
  EXPECT_EQ(input_name(g, producer(g, "layer0.ffn.residual"), 0), "layer0.ln1");
  EXPECT_EQ(input_name(g, producer(g, "layer0.ffn.up"), 0), "layer0.ln1");
  EXPECT_FALSE(producer(g, "layer0.attn.softmax").attrs.causal);
  EXPECT_EQ(g.tensor(g.find_tensor("layer0.attn.q.b")).shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(input_name(g, producer(g, "layer1.attn.q"), 0), "layer0.ln2");
}

// The embeddings: word and token-type lookups summed, the position table's first seq_len rows added to every
// sequence, then a layer norm; the heads: the masked positions gathered, transformed (dense, GELU, layer norm) and
// decoded by the word table itself; the first token pooled (dense, tanh) into the next-sentence classifier.
TEST(BertTest, EmbeddingsAndHeads) {
  const ModelGraph g = build(bert());
  const Op& crop = producer(g, "embed.positions");
  EXPECT_EQ(crop.kind, OpKind::Slice);
  EXPECT_EQ(input_name(g, crop, 0), "position_embedding");
  EXPECT_EQ(g.tensor(crop.outputs[0]).shape, (std::vector<int64_t>{8, 16}));
  const Op& add = producer(g, "embed");
  EXPECT_EQ(add.kind, OpKind::BiasAdd);
  EXPECT_EQ(input_name(g, add, 0), "embed.sum");
  EXPECT_EQ(input_name(g, producer(g, "embed.ln"), 0), "embed");
  const Op& gather = producer(g, "mlm.gather");
  EXPECT_EQ(gather.kind, OpKind::GatherPositions);
  EXPECT_EQ(input_name(g, gather, 0), "layer1.ln2");
  EXPECT_EQ(input_name(g, gather, 1), "mlm_positions");
  const Op& logits = producer(g, "mlm.logits");
  EXPECT_EQ(input_name(g, logits, 0), "mlm.ln");
  EXPECT_EQ(input_name(g, logits, 1), "embedding");  // tied
  EXPECT_EQ(g.tensor(logits.outputs[0]).shape, (std::vector<int64_t>{4, 3, 40}));
  EXPECT_EQ(producer(g, "pooler.tanh").kind, OpKind::Tanh);
  EXPECT_EQ(input_name(g, producer(g, "pooler.first"), 0), "layer1.ln2");
  const Op& loss = producer(g, "loss");
  EXPECT_EQ(loss.phase, Phase::Loss);
  EXPECT_EQ(input_name(g, loss, 0), "loss.mlm");
  EXPECT_EQ(input_name(g, loss, 1), "loss.nsp");
  // At seq_len = max_positions the whole table is added, with no crop.
  const ModelGraph whole = build(bert("", 8));
  EXPECT_LT(whole.find_tensor("embed.positions"), 0);
  EXPECT_EQ(input_name(whole, producer(whole, "embed"), 1), "position_embedding");
}

// LAMB's exclusions by MLPerf's names: "bias" (every dense layer's bias, the masked-LM output bias, the classifier's)
// and "LayerNorm" (every layer norm's gamma and beta) take Adam's update; the three embedding tables, the
// projections, the pooler, transform and classifier weights take LAMB's.
TEST(BertTest, LambExclusions) {
  const ModelGraph g = build(bert());
  std::map<std::string, OpKind> kind;
  for (const Op& op : g.ops())
    if (op.phase == Phase::Optimizer && op.name.size() > 7 && op.name.substr(op.name.size() - 7) == ".update")
      kind[g.tensor(op.inputs.front()).name] = op.kind;
  for (const char* w : {"embedding", "position_embedding", "token_type_embedding", "layer0.attn.q.w", "layer1.ffn.w2",
                        "mlm.transform.w", "pooler.w", "nsp.w"})
    EXPECT_EQ(kind[w], OpKind::LambUpdate) << w;
  for (const char* x : {"layer0.attn.q.b", "layer0.attn.o.b", "layer0.ffn.b1", "mlm.bias", "mlm.transform.b", "pooler.b",
                        "nsp.b", "embed.ln.gamma", "layer1.ln2.beta", "mlm.ln.gamma"})
    EXPECT_EQ(kind[x], OpKind::AdamUpdate) << x;
}

void expect_error(const std::string& yaml, const std::string& key, const std::string& words) {
  try {
    build(yaml);
    FAIL() << "accepted: " << key;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(Err::OutOfRange).id) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "bert.yaml") << e.what();
    EXPECT_EQ(e.where().line, 2) << e.what();
  }
}

TEST(BertTest, BadShapesAreLocatedErrors) {
  expect_error(bert("", 10, 9), "workload.max_predictions", "do not fit in a sequence of workload.seq_len = 8");
  expect_error(bert("", 6), "workload.seq_len", "longer than the position table");
}

// Megatron over 4 chips: per layer the heads and the FFN's hidden units split, so the attention output and the FFN
// output are all-reduced forward (2 x B S D fp32), their input gradients backward (2 more, plus the first layer's
// input gradient... every column-parallel matmul's input gradient); the q, k, v biases split with their heads
// (no gradient reduction for them), the word table over the vocabulary (the lookup's partial sum all-reduced, the
// masked-LM logits left split into a parallel cross-entropy).
TEST(BertTest, MegatronLayerCollectivesAndTheStep) {
  const Step s = plan_step(hardware("[4, 1]") + bert() + "strategy: {name: spmd}\n");
  const Program& p = s.plan.programs[0];
  std::map<std::string, int> per_kind;
  for (const std::string& c : collectives(p)) ++per_kind[c.substr(0, c.find(' '))];
  const std::vector<std::string> all = collectives(p);
  const double act = 4 * 8 * 16 * 4.0;  // B S D fp32
  for (const char* t : {"layer0.attn.o", "layer0.ffn.down", "layer1.attn.o", "layer1.ffn.down"})
    EXPECT_NE(std::find(all.begin(), all.end(), ar(t, "model", act)), all.end()) << t;
  // The biases of q, k, v are [H / 4, E] on each chip.
  EXPECT_EQ(local_tensor(p, "layer0.attn.q.b")->shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(local_tensor(p, "embedding")->shape, (std::vector<int64_t>{10, 16}));
  EXPECT_EQ(local_tensor(p, "mlm.logits")->shape, (std::vector<int64_t>{4, 3, 10}));
  for (const std::string& c : all) EXPECT_EQ(c.find("layer0.attn.q.b.grad"), std::string::npos) << c;
  expect_same_step(s);
}

// Data parallel (alone and with weight-update sharding), fsdp, data x model and a pipeline of 2 stages reproduce the single-device step (with
// global-norm clipping, whose factor spans every stage's gradients).
TEST(BertTest, StrategiesReproduceTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: data_parallel}\n"),
        std::string("strategy: {name: data_parallel, weight_update_sharding: true}\n"),
        std::string("strategy: {name: fsdp}\n"),
        std::string("strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    expect_same_step(plan_step(hardware("[4, 1]") + bert(", clip_norm: 1.0") + strategy));
  }
}

}  // namespace
