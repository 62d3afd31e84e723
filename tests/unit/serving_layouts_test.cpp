// The inference layouts of Pope et al. 2023 ("Efficiently Scaling Transformer Inference", section 3) as the strategies
// and the one partitioner make them, each pinned by a hand count of the collectives a decode (or prefill) step issues
// per chip and of the KV cache each chip holds (docs/serving.md, "Layouts"); every plan also runs in memory on every
// device against the single-device step. The Transformer of tests/unit/plan_figures.h (d_model D 16, d_ff F 32, NH 4
// heads of E 4, vocabulary V 24, fp32, layer norm, GELU FFN), 2 layers; a decode of B 4 sequences of 8 cached tokens
// (the caches hold C 9 places each, the new token's too), one new token each.
#include <gtest/gtest.h>

#include "tests/unit/plan_figures.h"

using namespace podsim;
using namespace podsim::plan_steps;
using namespace podsim::plan_models;

namespace {

constexpr int64_t NS = 4, CAP = 9, L = 2;  // sequences, cache places, layers

std::string decode(const std::string& extra = "") {
  return "workload: {model: transformer, layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, seq_len: 8, "
         "batch: 4, dtype: fp32, step: decode, context: 8" + extra + "}\nrun: {fusion: none}\n";
}

// The memory plan's KV cache category on role 0.
double kv_cache(const Step& s) { return memory(s, 0).at_peak.kv_cache; }

// The sampling's pooled candidates over a vocabulary split `n` ways: each shard's best (value, index) pair per
// sequence, all-gathered (greedy: K = 1).
std::string candidates(const std::string& axes, int64_t n) {
  return ag("next_tokens.candidates", axes, 0, NS * 2 * F32, n * NS * 2 * F32);
}

}  // namespace

// 1-D weight-stationary (Megatron over 4 chips): heads and the FFN's hidden units split, each layer's attention
// output and FFN output partial sums all-reduced (B x D each), the vocabulary-parallel embedding's lookup too; the
// cache split by heads, a quarter of it on each chip; the next token from each vocabulary shard's best.
TEST(ServingLayoutsTest, WeightStationary1DAllReducesTwicePerLayer) {
  const Step s = plan_step(hardware("[4, 1]") + decode() + "strategy: {name: spmd}\n");
  const double act = NS * D * F32;
  std::vector<std::string> want = {ar("embed.partial", "model", act), candidates("model", 4)};
  for (int l = 0; l < L; ++l)
    for (const char* t : {".attn.o", ".ffn.down"}) want.push_back(ar("layer" + std::to_string(l) + t, "model", act));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  EXPECT_EQ(kv_cache(s), L * 2 * NS * CAP * (NH / 4) * E * F32);
  expect_reproduces_the_step(s);
}

// Multi-query attention (one key/value head) under Megatron: the head cannot split, so every chip holds the whole
// cache (Pope's Table 1: the cache replicated). Split over the batch instead (strategy.kv_sharding: batch), each chip
// holds its quarter of the sequences, and the queries come to the chips of their sequences by an all-to-all (split
// by query heads -> by sequence: B x E per chip moved) and the attention's output goes back by another before the
// output projection; the one head's keys and values, whole on every chip, are cut locally.
TEST(ServingLayoutsTest, MultiQueryCacheSplitOverTheBatch) {
  const Step heads = plan_step(hardware("[4, 1]") + decode(", kv_heads: 1") + "strategy: {name: spmd}\n");
  EXPECT_EQ(kv_cache(heads), L * 2 * NS * CAP * 1 * E * F32);
  const Step batch =
      plan_step(hardware("[4, 1]") + decode(", kv_heads: 1") + "strategy: {name: spmd, kv_sharding: batch}\n");
  EXPECT_EQ(kv_cache(batch), L * 2 * (NS / 4) * CAP * 1 * E * F32);
  const double act = NS * D * F32, q = NS * 1 * E * F32;  // a chip's queries: B sequences x its one query head
  std::vector<std::string> want = {ar("embed.partial", "model", act), candidates("model", 4)};
  for (int l = 0; l < L; ++l) {
    const std::string n = "layer" + std::to_string(l);
    want.push_back(ar(n + ".attn.o", "model", act));
    want.push_back(ar(n + ".ffn.down", "model", act));
    want.push_back(a2a(n + ".attn.q", "model", 0, q));
    want.push_back(a2a(n + ".attn.context", "model", 3, q));
  }
  EXPECT_EQ(collectives(batch.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(batch);
}

// Multi-head attention (as many key/value heads as heads, Llama 2 7B's) under Megatron with the cache split over the
// batch: each chip holds every head of its quarter of the sequences, while the q, k and v projections leave each
// chip its heads of every sequence. So the fresh keys and values go to the chips of their sequences by an all-to-all
// each (heads -> sequences, B x E per chip: what the chip holds of them), as the queries do, and the attention's
// output comes back by a fourth before the output projection: 4 all-to-alls a layer, and no gather of the cache
// (whose rows never move) nor of the whole activations (n times the bytes of an all-to-all).
TEST(ServingLayoutsTest, MultiHeadCacheSplitOverTheBatchExchangesQueriesKeysAndValues) {
  const Step s = plan_step(hardware("[4, 1]") + decode() + "strategy: {name: spmd, kv_sharding: batch}\n");
  EXPECT_EQ(kv_cache(s), L * 2 * (NS / 4) * CAP * NH * E * F32);
  const double act = NS * D * F32, heads = NS * (NH / 4) * E * F32;  // a chip's: B sequences x its one head
  std::vector<std::string> want = {ar("embed.partial", "model", act), candidates("model", 4)};
  for (int l = 0; l < L; ++l) {
    const std::string n = "layer" + std::to_string(l);
    want.push_back(ar(n + ".attn.o", "model", act));
    want.push_back(ar(n + ".ffn.down", "model", act));
    for (const char* t : {".attn.q", ".attn.k", ".attn.v"}) want.push_back(a2a(n + t, "model", 0, heads));
    want.push_back(a2a(n + ".attn.context", "model", 2, heads));
  }
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// 2-D weight-stationary over 2 x 2 chips (s0 = A, s1 = B): the weights split along d_model over s0 and heads or
// hidden units over s1, the residual stream's d_model over both. Per layer each norm gathers its row (B x D / 4 in,
// whole out); the projections' partial sums over s0 are reduce-scattered into the heads or hidden units split over
// both axes (q, k, v: B x NH / 2 x E in; the FFN's up: B x F / 2 in); the context and the GELU's output are
// all-gathered over s0 for the output projections, whose partial sums over s1 are reduce-scattered into the residual
// stream's split (B x D / 2 in). The cache split by heads over both axes.
TEST(ServingLayoutsTest, WeightStationary2DGathersAndScattersAroundEachMatmul) {
  const Step s = plan_step(hardware("[2, 2]") + decode() +
                           "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\n"
                           "mesh: {axes: [s0, s1], shape: [2, 2]}\n");
  const double quarter = NS * D / 4 * F32, half = NS * D / 2 * F32, row = NS * D * F32;
  std::vector<std::string> want = {ar("embed", "s1", row), candidates("s1", 2)};
  for (int l = 0; l < L; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* t : {".attn.q", ".attn.k", ".attn.v"})
      want.push_back(rs(n + t, "s0", 2, NS * NH / 2 * E * F32, NS * NH / 4 * E * F32));
    want.push_back(ag(n + ".attn.context", "s0", 2, NS * NH / 4 * E * F32, NS * NH / 2 * E * F32));
    want.push_back(rs(n + ".attn.o", "s1", 2, half, quarter));
    want.push_back(ag(n + ".attn.residual", "s0,s1", 2, quarter, row));
    want.push_back(rs(n + ".ffn.up", "s0", 2, NS * F / 2 * F32, NS * F / 4 * F32));
    want.push_back(ag(n + ".ffn.gelu", "s0", 2, NS * F / 4 * F32, NS * F / 2 * F32));
    want.push_back(rs(n + ".ffn.down", "s1", 2, half, quarter));
    if (l == 0) want.push_back(ag(n + ".ffn.residual", "s0,s1", 2, quarter, row));
  }
  want.push_back(ag("layer1.ffn.residual", "s0,s1", 2, quarter, row));  // the final norm's
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  EXPECT_EQ(kv_cache(s), L * 2 * NS * CAP * (NH / 4) * E * F32);
  expect_reproduces_the_step(s);
}

// Weight-gathered (fsdp over 4 chips) for a prefill of 4 prompts of 8: the batch split, one prompt a chip, and every
// weight stored split and all-gathered whole once for its use (no backward pass gathers it again); each chip holds
// its prompt's cache and a quarter of the weights between uses.
TEST(ServingLayoutsTest, WeightGatheredPrefillGathersEveryWeightOnce) {
  const Step s = plan_step(hardware("[4, 1]") +
                           "workload: {model: transformer, layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, "
                           "seq_len: 8, batch: 4, dtype: fp32, step: prefill}\nrun: {fusion: none}\n"
                           "strategy: {name: fsdp}\n");
  const std::vector<std::string> got = collectives(s.plan.programs[0]);
  // One all-gather per parameter, over fsdp, of a quarter of it into the whole.
  int gathers = 0;
  for (const std::string& c : got) {
    EXPECT_EQ(c.rfind("all_gather ", 0), 0u) << c;
    gathers += c.rfind("all_gather ", 0) == 0;
  }
  EXPECT_EQ(gathers, static_cast<int>(transformer_params(2, 1).size()));
  for (const TParam& p : transformer_params(2, 1)) {
    bool found = false;
    for (const std::string& c : got)
      found = found || (c.find("all_gather " + p.name + " [fsdp]") == 0 &&
                           c.find(": " + std::to_string(p.elements / 4 * 4) + " -> " + std::to_string(p.elements * 4) +
                                  " B") != std::string::npos);
    EXPECT_TRUE(found) << p.name;
  }
  EXPECT_EQ(kv_cache(s), L * 2 * (NS / 4) * 8 * NH * E * F32);
  expect_reproduces_the_step(s);
}

// Data-parallel replicas of a serving slice: each chip serves its own sequences with the whole model; nothing moves.
TEST(ServingLayoutsTest, DataParallelReplicasMoveNothing) {
  const Step s = plan_step(hardware("[4, 1]") + decode() + "strategy: {name: data_parallel}\n");
  EXPECT_TRUE(collectives(s.plan.programs[0]).empty());
  EXPECT_EQ(kv_cache(s), L * 2 * (NS / 4) * CAP * NH * E * F32);
  expect_reproduces_the_step(s);
}

// Expert parallelism for an MoE decode (4 experts, one a chip, over `expert`): the MoE layer (the second) sends each
// group's dispatched tokens to their experts and back, an all-to-all each way of the chip's [E, G, capacity, D]
// (one group a sequence, one token: capacity 1); the sequences split over the axis as the batch is, with their caches.
// The gating's load-balancing term, which the gating op always yields and an inference step writes as a result, is
// summed over the chips' groups (one float).
TEST(ServingLayoutsTest, ExpertParallelDecodeAllToAllsTwicePerMoeLayer) {
  const Step s = plan_step(hardware("[4, 1]") + decode(", moe: {experts: 4}") + "strategy: {name: moe}\n");
  const double moved = 4 * 1 * 1 * D * F32;  // [E 4, G 1 (the chip's sequence), C 1, D]
  EXPECT_EQ(collectives(s.plan.programs[0]),
            sorted({a2a("layer1.moe.dispatched", "expert", 0, moved), a2a("layer1.moe.expert_out", "expert", 0, moved),
                    ar("layer1.moe.gating.aux_loss", "expert", F32)}));
  EXPECT_EQ(kv_cache(s), L * 2 * (NS / 4) * CAP * NH * E * F32);
  expect_reproduces_the_step(s);
}
