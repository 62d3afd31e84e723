// The strategies' contract, end to end as a user runs it: a step partitioned by any strategy or composition
// reproduces the single-device step. Each case runs `podsim run` twice in numeric mode (the strategy on its pod,
// and single_device on one chip, same workload and seed, default settings with the trace on) and `podsim compare`s
// every tensor both wrote (the loss, every parameter gradient, every updated parameter and optimizer state): each
// must agree within its own bound (fp32: a relative norm error of 1e-5, sums over shards and micro-batches adding in
// another order; an Adam update against the size of its step).
// Comparing with a perturbed run (another seed) must fail, so the comparison can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kTransformer =
    "workload:\n  model: transformer\n  layers: 3\n  d_model: 32\n  d_ff: 48\n  heads: 4\n  vocab: 50\n"
    "  seq_len: 8\n  batch: 8\n  dtype: fp32\n  optimizer: adam\n";
const std::string kMlp = "workload:\n  model: mlp\n  batch: 16\n  input: 24\n  hidden: 40\n  layers: 3\n  classes: 10\n"
                         "  dtype: fp32\n  optimizer: adam\n";

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }

nlohmann::json summary(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/summary.json")); }

// Runs `rest` (strategy, mesh, ...) on `dims` and the single-device reference; returns the strategy run's folder.
std::string expect_equivalent(const std::string& workload, const std::string& dims, const std::string& rest,
                              int min_tensors = 20) {
  const std::string ref = write_file("ref.yaml", hw("[1, 1]") + workload + "run: {numeric: true}\n");
  const std::string exp = write_file("exp.yaml", hw(dims) + workload + rest + "run: {numeric: true}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/ref", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/exp", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  // Each tensor by its own bound (docs/strategies.md, Tolerances): fp32's 1e-5 relative norm error for the loss,
  // every gradient and optimizer state; parameters updated by Adam against the size of the step, where an element
  // whose gradient is within rounding of 0 may step differently (a uniform 1e-5 on those fails by chance).
  CliResult c = run_podsim({"compare", test_dir() + "/ref", test_dir() + "/exp"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // "equal: N tensors within their bounds (closest to its bound: NAME, E of B)"
  const size_t at = c.out.find("  equal: ");
  EXPECT_NE(at, std::string::npos) << c.out;
  if (at != std::string::npos) {
    EXPECT_GE(std::stoi(c.out.substr(at + 9)), min_tensors) << c.out;
    std::printf("%s", c.out.substr(at).c_str());  // the verdict, with the tensor closest to its bound
  }
  return test_dir() + "/exp";
}

}  // namespace

// Every strategy and composition, on 2, 4 and 8 chips, for the MLP and the Transformer.
struct Case {
  std::string name, dims, rest;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " on " << c.dims; }
const Case kCases[] = {
    {"DataParallel2", "[2, 1]", "strategy: {name: data_parallel}\n"},
    {"WeightUpdateSharding4", "[4, 1]", "strategy: {name: data_parallel, weight_update_sharding: true}\n"},
    {"Megatron8", "[8, 1]", "strategy: {name: spmd}\n"},
    {"TwoDimensional4", "[2, 2]",
     "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n"},
    // On an 8-chip ring, model takes 4 neighbouring chips (a line: no wrap-around link) and data every 4th chip (a
    // strided ring of 2).
    {"DataTimesModelLineAndStridedRing8", "[8, 1]",
     "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\nmesh: {axes: [data, model], shape: [2, 4]}\n"},
    // data over x and half of y; model over the other half of y.
    {"DataAcrossTwoTorusDimensions8", "[2, 4]",
     "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [4, 2], placement: [\"x,y:2\", \"y:2\"]}\n"},
    {"Pipeline4", "[4, 1]", "strategy: {name: pipeline, micro_batches: 4}\n"},
    {"PipelineRemat1F1B2", "[2, 1]", "strategy: {name: pipeline, micro_batches: 4, remat: true, schedule: 1f1b}\n"},
    {"PipelineDataModel8", "[2, 4]",
     "strategy: {name: [pipeline, data_parallel, spmd], micro_batches: 2, weight_update_sharding: true}\n"
     "mesh: {axes: [pipe, data, model], shape: [2, 2, 2]}\n"},
    // Fully sharded data parallelism (ZeRO-3): alone, padded (3 chips divide neither the batch nor most weights),
    // with Megatron, hybrid with data_parallel, and inside pipeline stages (1F1B with re-materialization).
    {"Fsdp4", "[4, 1]", "strategy: {name: fsdp}\n"},
    {"FsdpPadded3", "[3, 1]", "strategy: {name: fsdp}\n"},
    {"FsdpKeepGathered4", "[4, 1]", "strategy: {name: fsdp, fsdp_keep_gathered: true}\n"},
    {"FsdpTimesModel8", "[4, 2]", "strategy: {name: [fsdp, spmd]}\nmesh: {axes: [fsdp, model], shape: [4, 2]}\n"},
    {"DataFsdpModel8", "[2, 4]",
     "strategy: {name: [data_parallel, fsdp, spmd]}\nmesh: {axes: [data, fsdp, model], shape: [2, 2, 2]}\n"},
    {"PipelineFsdpModel8", "[2, 4]",
     "strategy: {name: [pipeline, fsdp, spmd], micro_batches: 2}\nmesh: {axes: [pipe, fsdp, model], shape: [2, 2, 2]}\n"},
    {"PipelineFsdpRemat1F1B4", "[4, 1]",
     "strategy: {name: [pipeline, fsdp], micro_batches: 2, remat: true, schedule: 1f1b}\n"
     "mesh: {axes: [pipe, fsdp], shape: [2, 2]}\n"},
};

class EquivalenceTest : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(EquivalenceTest, ReproducesTheSingleDeviceStep) {
  const auto& [c, transformer] = GetParam();
  expect_equivalent(transformer ? kTransformer : kMlp, c.dims, c.rest, transformer ? 100 : 30);
}

INSTANTIATE_TEST_SUITE_P(Strategies, EquivalenceTest, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "Transformer" : "Mlp");
                         });

// The Transformer's variants (docs/model.md) under Megatron, data x model and the 2-D scheme on 4 chips: each
// variant's keys are added to the tiny Transformer above.
struct Variant {
  std::string name, keys;
  int heads = 4;
  std::string megatron_note = "";  // a note the Megatron run must give (how it split the variant's tensors)
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }
const Variant kVariants[] = {
    {"HeadDim", "  head_dim: 6\n"},  // 4 heads of 6 on d_model 32
    // 4 key/value heads split over model (4 or 2 chips), 2 query heads each.
    {"GroupedQuery", "  kv_heads: 4\n", 8},
    // 1 key/value head: replicated on every model chip, the 4 query heads split.
    {"MultiQuery", "  kv_heads: 1\n"},
    // 2 key/value heads on 4 model chips: replicated, the 3 query heads of each group padded to 4.
    {"GroupedQueryPadded", "  kv_heads: 2\n  head_dim: 4\n", 6,
     "'layer0.attn.q.w' dimension 2: 3 over 4 devices, padded to 4"},
    {"Swiglu", "  ffn: swiglu\n"},
    {"Relu", "  ffn: relu\n"},
    {"RmsNorm", "  norm: rmsnorm\n"},
    {"ParallelBlock", "  parallel_block: true\n"},
    {"TiedEmbeddings", "  tie_embeddings: true\n"},
    {"Rope", "  rope: true\n"},
    {"RopeMultiQuery", "  rope: true\n  kv_heads: 1\n"},
};
const Case kVariantCases[] = {
    {"Megatron4", "[4, 1]", "strategy: {name: spmd}\n"},
    {"DataTimesModel4", "[4, 1]", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
    {"TwoDimensional4", "[2, 2]",
     "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n"},
    {"FsdpTimesModel4", "[4, 1]", "strategy: {name: [fsdp, spmd]}\nmesh: {axes: [fsdp, model], shape: [2, 2]}\n"},
    // Sequence parallelism (docs/strategies.md): the residual stream split along S over model.
    {"SequenceParallel4", "[4, 1]", "strategy: {name: spmd, sequence_parallel: true}\n"},
    {"DataTimesModelSequenceParallel4", "[4, 1]",
     "strategy: {name: [data_parallel, spmd], sequence_parallel: true}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
};

class VariantEquivalenceTest : public ::testing::TestWithParam<std::tuple<Variant, Case>> {};

TEST_P(VariantEquivalenceTest, ReproducesTheSingleDeviceStep) {
  const auto& [v, c] = GetParam();
  std::string w = kTransformer;
  w.replace(w.find("heads: 4"), 8, "heads: " + std::to_string(v.heads));
  const std::string d = expect_equivalent(w + v.keys, c.dims, c.rest, 100);
  if (c.name != "Megatron4" || v.megatron_note.empty()) return;
  const std::string notes = summary(d)["notes"].dump();
  EXPECT_NE(notes.find(v.megatron_note), std::string::npos) << notes;
}

INSTANTIATE_TEST_SUITE_P(Strategies, VariantEquivalenceTest,
                         ::testing::Combine(::testing::ValuesIn(kVariants), ::testing::ValuesIn(kVariantCases)),
                         [](const auto& info) { return std::get<0>(info.param).name + std::get<1>(info.param).name; });

TEST(StrategiesTest, DimensionsThatDoNotDivideArePadded) {
  // 2 heads and a vocabulary of 50 over 4 model shards: padded shards, and the run notes each.
  std::string w = kTransformer;
  w.replace(w.find("heads: 4"), 8, "heads: 2");
  std::string d = expect_equivalent(w, "[4, 1]", "strategy: {name: spmd}\n");
  bool noted = false;
  const nlohmann::json s = summary(d);
  for (const auto& n : s["notes"]) noted = noted || n.get<std::string>().find("padded to 4") != std::string::npos;
  EXPECT_TRUE(noted) << s["notes"].dump();
}

// Sequence parallelism on 4 chips (vocabulary 50 padded to 52 over 4 model chips) and on 8 under pipeline x data
// x model with weight-update sharding.
TEST(StrategiesTest, SequenceParallel) {
  expect_equivalent(kTransformer, "[4, 1]", "strategy: {name: spmd, sequence_parallel: true}\n", 100);
}

TEST(StrategiesTest, SequenceParallelPipelineDataModel) {
  expect_equivalent(kTransformer, "[2, 4]",
                    "strategy: {name: [pipeline, data_parallel, spmd], micro_batches: 2, weight_update_sharding: true, "
                    "sequence_parallel: true}\nmesh: {axes: [pipe, data, model], shape: [2, 2, 2]}\n",
                    100);
}

// The head kept whole (vocab_parallel: false) reproduces the step as the vocabulary-parallel one does (the
// default, above and in the variants' TiedEmbeddings cases).
TEST(StrategiesTest, VocabularyParallelOff) {
  expect_equivalent(kTransformer, "[4, 1]", "strategy: {name: spmd, vocab_parallel: false}\n", 100);
}

TEST(StrategiesTest, PipelineGpipe) {
  std::string d = expect_equivalent(kTransformer, "[4, 1]", "strategy: {name: pipeline, micro_batches: 4}\n");
  nlohmann::json s = summary(d);
  EXPECT_EQ(s["pipeline"]["stages"], 4);
  EXPECT_EQ(s["roles"].size(), 4u);
  // The report shows each stage's times and the bubble beside GPipe's.
  CliResult r = run_podsim({"report", d});
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* want : {"stage0", "stage3", "exposed communication:", "pipeline: 4 stages x 4 micro-batches", "bubble"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(StrategiesTest, ComparisonFailsOnAnotherStep) {
  const std::string a = write_file("a.yaml", hw("[1, 1]") + kMlp + "run: {numeric: true}\n");
  const std::string b = write_file("b.yaml", hw("[2, 1]") + kMlp + "strategy: {name: data_parallel}\nrun: {numeric: true, seed: 2}\n");
  ASSERT_EQ(run_podsim({"run", a, "--out", test_dir() + "/a", "-q"}).code, 0);
  ASSERT_EQ(run_podsim({"run", b, "--out", test_dir() + "/b", "-q"}).code, 0);
  CliResult c = run_podsim({"compare", test_dir() + "/a", test_dir() + "/b", "--tolerance", "1e-5"});
  EXPECT_EQ(c.code, 1) << c.out << c.err;
}

namespace {

nlohmann::json timing_run(const std::string& name, const std::string& text) {
  const std::string f = write_file(name + ".yaml", text);
  CliResult r = run_podsim({"run", f, "--out", test_dir() + "/" + name, "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return summary(test_dir() + "/" + name);
}

// GPipe's balanced case: four Transformer stages of one equal layer each, with links fast enough that transfers are
// nearly free. The embedding and the head ride on the first and last stage; with d_model 4096 and a vocabulary of
// 128 they are small beside a layer (most of the head is its layer norm, which grows with d_model while a layer's
// matmuls grow with its square): per micro-batch the outer stages do 1.5 % more than the middle ones in the forward
// pass and within 0.5 % in the backward. (With d_model 1024 it is 4 to 5 % and 2 %: every micro-batch waits for the
// slowest stage, which adds 1 to 1.5 points to the bubble from M = 16 on.)
const std::string kBalancedTransformer =
    "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n  ici: {link_bandwidth: 100TB/s}\n"
    "workload:\n  model: transformer\n  layers: 4\n  d_model: 4096\n  d_ff: 16384\n  heads: 16\n  vocab: 128\n"
    "  seq_len: 512\n  batch: 64\nrun: {trace: {format: \"off\"}}\n";

}  // namespace

TEST(StrategiesTest, PipelineBubbleFollowsGpipe) {
  // GPipe's bubble for K balanced stages, M micro-batches and free communication is (K - 1) / (M + K - 1): 0.75,
  // 0.43, 0.16 and 0.086 for K = 4 and M = 1, 4, 16, 32; within a point here, and never below it.
  for (int m : {1, 4, 16, 32}) {
    nlohmann::json s = timing_run("m" + std::to_string(m), kBalancedTransformer +
                                                              "strategy: {name: pipeline, micro_batches: " +
                                                              std::to_string(m) + "}\n");
    const double ideal = 3.0 / (m + 3.0);
    EXPECT_DOUBLE_EQ(s["pipeline"]["ideal_bubble_fraction"].get<double>(), std::round(ideal * 1e6) / 1e6);
    EXPECT_NEAR(s["pipeline"]["bubble_fraction"].get<double>(), ideal, 0.01) << "M = " << m;
    EXPECT_GE(s["pipeline"]["bubble_fraction"].get<double>(), ideal - 0.002) << "M = " << m;  // never better
    EXPECT_EQ(s["pipeline"]["stage_cells"], nlohmann::json::parse("[[0, 1], [2], [3], [4, 5]]"));
  }
}

TEST(StrategiesTest, RematerializationLowersPeakMemory) {
  const std::string base = hw("[2, 1]") +
                           "workload:\n  model: transformer\n  layers: 8\n  d_model: 512\n  d_ff: 2048\n  heads: 8\n"
                           "  vocab: 1024\n  seq_len: 512\n  batch: 16\n";
  nlohmann::json plain = timing_run("plain", base + "strategy: {name: pipeline, micro_batches: 8}\n");
  nlohmann::json remat = timing_run("remat", base + "strategy: {name: pipeline, micro_batches: 8, remat: true}\n");
  // Without remat a stage keeps every micro-batch's activations until its backward; with it, only the values it
  // received (and one micro-batch's recomputed activations at a time).
  for (int k = 0; k < 2; ++k) {
    const double a = plain["roles"][k]["peak_memory_bytes"].get<double>();
    const double b = remat["roles"][k]["peak_memory_bytes"].get<double>();
    EXPECT_LT(b, 0.6 * a) << "stage " << k << ": " << b << " with remat, " << a << " without";
  }
  // Recomputing the forward costs time: more compute per stage.
  EXPECT_GT(remat["roles"][0]["compute_s"].get<double>(), plain["roles"][0]["compute_s"].get<double>());
}

TEST(StrategiesTest, WeightUpdateShardingDividesOptimizerMemory) {
  // 4 data replicas; every parameter of this MLP divides by 4 along its first dimension, so each chip holds exactly a
  // quarter of Adam's m and v.
  const std::string w = "workload:\n  model: mlp\n  batch: 64\n  input: 256\n  hidden: 512\n  layers: 2\n  classes: 16\n"
                        "  optimizer: adam\n";
  nlohmann::json plain = timing_run("plain", hw("[4, 1]") + w + "strategy: {name: data_parallel}\n");
  nlohmann::json wus = timing_run("wus", hw("[4, 1]") + w + "strategy: {name: data_parallel, weight_update_sharding: true}\n");
  // Adam state of the logical step, counted by hand: m and v of every parameter, fp32.
  const double params = 256.0 * 512 + 512 + 512.0 * 512 + 512 + 512.0 * 16 + 16;
  EXPECT_DOUBLE_EQ(plain["roles"][0]["memory_at_peak"]["optimizer_state"].get<double>(), 2 * 4 * params);
  EXPECT_DOUBLE_EQ(wus["roles"][0]["memory_at_peak"]["optimizer_state"].get<double>(), 2 * 4 * params / 4);
}

TEST(StrategiesTest, ShippedExampleAgainstItsSingleDeviceReference) {
  // The recipe docs/strategies.md gives users: the example as shipped, then its own reference with --single-device.
  const std::string ex = source_dir() + "/configs/examples/data_parallel.yaml";
  CliResult r = run_podsim({"run", ex, "--out", test_dir() + "/dp", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", ex, "--single-device", "--out", test_dir() + "/one"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(single_device)"), std::string::npos) << r.out;
  CliResult c = run_podsim({"compare", test_dir() + "/one", test_dir() + "/dp"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // A deliberately perturbed run (another learning rate) fails the comparison.
  r = run_podsim({"run", ex, "--single-device", "--out", test_dir() + "/lr", "-q", "--set",
                  "workload.learning_rate=0.0011"});
  ASSERT_EQ(r.code, 0) << r.err;
  c = run_podsim({"compare", test_dir() + "/dp", test_dir() + "/lr"});
  EXPECT_EQ(c.code, 1) << c.out << c.err;
}

TEST(StrategiesTest, RematerializationChangesNoNumber) {
  // Recomputed activations are the same values: with and without remat every tensor is bit for bit the same.
  const std::string w = hw("[2, 1]") + kTransformer;
  for (const char* remat : {"false", "true"}) {
    const std::string f = write_file(std::string("r") + remat + ".yaml",
                                     w + "strategy: {name: pipeline, micro_batches: 4, remat: " + remat +
                                         "}\nrun: {numeric: true}\n");
    ASSERT_EQ(run_podsim({"run", f, "--out", test_dir() + "/" + remat, "-q"}).code, 0);
  }
  CliResult c = run_podsim({"compare", test_dir() + "/false", test_dir() + "/true", "--tolerance", "0"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("worst"), std::string::npos) << c.out;
}

TEST(StrategiesTest, MemoryFitsOnlyWhenEveryStageFits) {
  // Stage 0 holds only the embedding, stage 1 the rest: the result chip (stage 0) peaks lower.
  const std::string rest = kTransformer + "strategy: {name: pipeline, micro_batches: 2, stage_boundaries: [1]}\n";
  nlohmann::json a = timing_run("a", hw("[2, 1]") + rest);
  const double p0 = a["roles"][0]["peak_memory_bytes"].get<double>(), p1 = a["roles"][1]["peak_memory_bytes"].get<double>();
  ASSERT_LT(p0, p1);
  EXPECT_TRUE(a["memory"]["fits"].get<bool>());
  // A capacity between the two stages' peaks: one stage fits, the other does not, so the step does not fit, whichever
  // chip memory.* describes.
  const long long cap = static_cast<long long>(std::floor((p0 + p1) / 2));
  nlohmann::json b = timing_run("b", "hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 1]}\n  chip: {hbm: {capacity: " +
                                         std::to_string(cap) + "B}}\n" + rest + "run: {allow_oom: true}\n");
  EXPECT_FALSE(b["memory"]["fits"].get<bool>());
  EXPECT_NE(b["roles"][0]["fits"].get<bool>(), b["roles"][1]["fits"].get<bool>());
}

TEST(StrategiesTest, ParallelBlocksAllReduceOncePerLayerEachWay) {
  // Megatron's serial layer all-reduces the attention's and the FFN's partial outputs apart, forward and backward;
  // a parallel block (PaLM) sums the two partial outputs first and all-reduces once each way. (SwiGLU: no FFN
  // bias, which would have to be added after the reduction.)
  auto w = [](const std::string& parallel) {
    return hw("[4, 1]") + "workload:\n  model: transformer\n  layers: 2\n  d_model: 32\n  d_ff: 48\n  heads: 4\n"
           "  vocab: 50\n  seq_len: 8\n  batch: 8\n  ffn: swiglu\n  parallel_block: " + parallel +
           "\nstrategy: {name: spmd}\nrun: {trace: {format: \"off\"}}\n";
  };
  auto all_reduces = [](const nlohmann::json& s) {
    int n = 0;
    for (const auto& c : s["collectives"]) n += c["kind"] == "all_reduce";
    return n;
  };
  // Both also all-reduce the vocabulary-parallel head's: the lookup, the unembedding's input gradient and the
  // cross-entropy's three values per row.
  const int head = 5;
  EXPECT_EQ(all_reduces(timing_run("serial", w("false"))), 2 * 2 * 2 + head);  // layers x {attention, FFN} x {fwd, bwd}
  EXPECT_EQ(all_reduces(timing_run("parallel", w("true"))), 2 * 2 + head);
}

TEST(StrategiesTest, TiedEmbeddingsAcrossPipelineStages) {
  // The tied table is read by the first stage (the lookup) and the last (the logits); its gradient sums both.
  expect_equivalent(kTransformer + "  tie_embeddings: true\n", "[2, 1]", "strategy: {name: pipeline, micro_batches: 2}\n");
}

// Spatial partitioning's halos are collective-permutes on the simulated ICI, in summary.json's collectives: in
// configs/examples/spatial.yaml (ResNet-18 at 128 pixels, 2 images per replica, fp32, split 4 ways) every chip sends,
// by hand:
//   the stem (7x7/2 pad 3 over 32 of 128 rows): 3 rows [2, 3, 128, 3] (9216 B) down and 2 rows (6144 B) up, forward
//     and for the filter gradient: 30720 B;
//   the max pool (3x3/2 pad 1, 64 x 64 x 64): one row (32768 B) forward, for the gradient's window and back: 98304 B;
//   every 3x3 convolution one row of 2 images x W x C = 16384 B (32 x 64, 16 x 128, 8 x 256, 4 x 512): 6 permutes
//     for each of the 13 of stride 1 (forward, input gradient, filter gradient, a row each way), 3 for each of the
//     3 of stride 2 (one row from above): 87 x 16384 B;
// 94 collective-permutes and 1554432 bytes per chip, each to a neighbour on the spatial ring.
TEST(StrategiesTest, SpatialHalosAreCollectivePermutesOnTheIci) {
  CliResult r = run_podsim({"run", source_dir() + "/configs/examples/spatial.yaml", "--out", test_dir() + "/sp",
                            "--set", "run.numeric=false", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  int permutes = 0;
  double bytes = 0;
  const nlohmann::json s = summary(test_dir() + "/sp");
  for (const auto& c : s["collectives"]) {
    if (c["kind"] != "collective_permute") continue;
    ++permutes;
    bytes += c["bytes_per_chip"].get<double>();
    EXPECT_EQ(c["axes"], nlohmann::json::array({"spatial"}));
    EXPECT_EQ(c["algorithm"], "direct");
    EXPECT_GT(c["time_s"].get<double>(), 0);
    if (c["tensor"] == "stem.conv.halo.last") {
      EXPECT_EQ(c["bytes_per_chip"].get<double>(), 9216);
    }
    if (c["tensor"] == "stem.conv.halo.first") {
      EXPECT_EQ(c["bytes_per_chip"].get<double>(), 6144);
    }
  }
  EXPECT_EQ(permutes, 94);
  EXPECT_EQ(bytes, 30720 + 98304 + 87 * 16384);
}
