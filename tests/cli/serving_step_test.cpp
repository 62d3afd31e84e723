// The inference steps under every layout, end to end as a user runs them (docs/serving.md, "The inference step"):
// `podsim run` in numeric mode of a greedy generate (a prefill and decodes chained, each decode on the cache the
// steps before it wrote), of a decode of ragged contexts and of a mixed iteration, partitioned and on one chip, and
// `podsim compare` of every tensor both wrote: the generated tokens, every step's logits, the updated caches (fp32
// within 1e-5). The single-chip step equals recomputing each sequence without a cache
// (tests/unit/inference_numerics_test.cpp), so every layout does too. A run with another seed must fail.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// llm-tiny (grouped-query attention, RoPE, SwiGLU, RMSNorm) in fp32, blocks of 3 keys in the decode kernel.
const std::string kBase = "workload:\n  preset: llm-tiny\n  dtype: fp32\n  kv_block: 3\n";
const std::string kGenerate = kBase + "  step: generate\n  batch: 4\n  seq_len: 5\n  generate: 4\n";
const std::string kDecode = kBase + "  step: decode\n  batch: 4\n  context_lengths: [3, 9, 1, 6]\n";
const std::string kMixed = kBase + "  step: mixed\n  batch: 4\n  chunks: [\"1+3\", \"4+6\", \"2+2\", \"1+7\"]\n";

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v5e\n  pod: {dims: " + dims + "}\n"; }

// Runs `workload` under `rest` on `dims` and on one chip; compares every tensor. Returns `podsim compare`'s result.
CliResult compare(const std::string& workload, const std::string& dims, const std::string& rest, int seed = 1,
                  const std::string& name = "run") {
  const std::string ref = write_file(name + "_ref.yaml", hw("[1, 1]") + workload + "run: {numeric: true}\n");
  const std::string exp = write_file(name + ".yaml", hw(dims) + workload + rest + "run: {numeric: true, seed: " +
                                                        std::to_string(seed) + "}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/" + name + "_ref", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/" + name, "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return run_podsim({"compare", test_dir() + "/" + name + "_ref", test_dir() + "/" + name});
}

struct Layout {
  std::string name, dims, rest;
};
void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }
const Layout kLayouts[] = {
    {"WeightStationary1D", "[4, 1]", "strategy: {name: spmd}\n"},
    {"KvSplitOverTheBatch", "[4, 1]", "strategy: {name: spmd, kv_sharding: batch}\n"},
    {"WeightStationary2D", "[2, 2]",
     "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n"},
    {"WeightGathered", "[4, 1]", "strategy: {name: fsdp}\n"},
    {"Replicas", "[4, 1]", "strategy: {name: data_parallel}\n"},
    {"ReplicasOf1D", "[4, 1]", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
};

enum class Step { Generate, Decode, Mixed };
class ServingStepTest : public ::testing::TestWithParam<std::tuple<Layout, Step>> {};

TEST_P(ServingStepTest, ReproducesTheSingleChipStep) {
  const auto& [l, step] = GetParam();
  // A packed mixed iteration cannot split its sequences (one row holds them all): the layouts that split the batch
  // refuse it, at the strategy (and kv_sharding: batch at its key).
  if (step == Step::Mixed && (l.name == "KvSplitOverTheBatch" || l.name.rfind("Replicas", 0) == 0 ||
                              l.name == "WeightGathered")) {
    const std::string exp = write_file("exp.yaml", hw(l.dims) + kMixed + l.rest);
    const CliResult r = run_podsim({"run", exp, "-q"});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(l.name == "KvSplitOverTheBatch" ? "PODSIM-INF-004" : "PODSIM-PLN-001"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("packs its 4 sequences"), std::string::npos) << r.err;
    return;
  }
  const std::string w = step == Step::Generate ? kGenerate : step == Step::Decode ? kDecode : kMixed;
  const CliResult c = compare(w, l.dims, l.rest);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // Every logits tensor and the sampled tokens are among those compared.
  for (const char* t : {"logits", "next_tokens", "layer1.attn.v_cache.new"}) EXPECT_NE(c.out.find(t), std::string::npos) << t;
  if (step != Step::Generate) return;
  for (const char* t : {"gen3.logits", "generated"}) EXPECT_NE(c.out.find(t), std::string::npos) << c.out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ServingStepTest,
                         ::testing::Combine(::testing::ValuesIn(kLayouts),
                                            ::testing::Values(Step::Generate, Step::Decode, Step::Mixed)),
                         [](const auto& info) {
                           const Step s = std::get<1>(info.param);
                           return std::get<0>(info.param).name +
                                  (s == Step::Generate ? "Generate" : s == Step::Decode ? "Decode" : "Mixed");
                         });

}  // namespace

// Multi-query attention with its cache split over the batch, and expert parallelism for an MoE model's decodes.
TEST(ServingStepTest, MultiQueryAndExpertParallelReproduceTheSingleChipStep) {
  CliResult c = compare(kGenerate + "  kv_heads: 1\n", "[4, 1]", "strategy: {name: spmd, kv_sharding: batch}\n", 1,
                        "mqa");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  c = compare(kGenerate + "  ffn: gelu\n  moe: {experts: 4}\n", "[4, 1]", "strategy: {name: moe}\n", 1, "moe");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
}

// Multi-head attention (as many key/value heads as heads: the projections split the keys' and values' heads over the
// 4 chips) with its cache split over the batch: the fresh keys and values move to their sequences' chips before they
// are written, a generate's and a ragged decode's caches and tokens as on one chip.
TEST(ServingStepTest, MultiHeadCacheSplitOverTheBatchReproducesTheSingleChipStep) {
  for (const std::string& w : {kGenerate, kDecode}) {
    const CliResult c = compare(w + "  kv_heads: 4\n", "[4, 1]", "strategy: {name: spmd, kv_sharding: batch}\n", 1,
                                w == kGenerate ? "mha_generate" : "mha_decode");
    EXPECT_EQ(c.code, 0) << c.out << c.err;
    EXPECT_NE(c.out.find("layer1.attn.k_cache.new"), std::string::npos) << c.out;
  }
}

// The comparison can fail: another seed draws other weights, prompts and caches.
TEST(ServingStepTest, AnotherSeedDiffers) {
  const CliResult c = compare(kGenerate, "[4, 1]", "strategy: {name: spmd}\n", 2);
  EXPECT_NE(c.code, 0) << c.out;
}

// Sampling over a vocabulary split by the model axis: top-k from each shard's best candidates, top-p from the
// gathered logits, the same draws as on one chip; and a draw that is not the argmax (top-k's tokens differ from
// greedy's, so the comparison of the tokens can fail).
TEST(ServingStepTest, SamplingOverASplitVocabularyReproducesTheSingleChipStep) {
  for (const std::string& s : {std::string("  sampling: top_k\n  top_k: 5\n"), std::string("  sampling: top_p\n  top_p: 0.9\n")}) {
    const CliResult c = compare(kGenerate + s, "[4, 1]", "strategy: {name: spmd}\n", 1, s.substr(12, 5));
    EXPECT_EQ(c.code, 0) << s << c.out << c.err;
  }
  compare(kGenerate, "[1, 1]", "", 1, "greedy");
  const CliResult d = run_podsim({"compare", test_dir() + "/greedy", test_dir() + "/top_k"});
  EXPECT_NE(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("generated"), std::string::npos) << d.out;
}
