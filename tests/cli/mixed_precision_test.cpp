// Mixed precision end to end (workload.weight_dtype; docs/model.md): partitioned steps reproduce the single-device
// step, and the memory figures count the fp32 master weights, the bf16 copies and Adam's fp32 moments by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }

nlohmann::json summary(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/summary.json")); }

// llm-tiny (grouped-query attention, SwiGLU, RMSNorm, RoPE) with the given types.
std::string tiny(const std::string& dtype, const std::string& weight_dtype) {
  return "workload:\n  preset: llm-tiny\n  batch: 8\n  dtype: " + dtype + "\n  weight_dtype: " + weight_dtype + "\n";
}

// Runs `rest` on `dims` and the single-device reference in numeric mode and compares every tensor both wrote
// (`tolerance` empty: podsim compare's own bound for each tensor, by the precision it was computed in).
void expect_equivalent(const std::string& workload, const std::string& dims, const std::string& rest,
                       const std::string& tolerance) {
  const std::string ref = write_file("ref.yaml", hw("[1, 1]") + workload + "run: {numeric: true}\n");
  const std::string exp = write_file("exp.yaml", hw(dims) + workload + rest + "run: {numeric: true}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/ref", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/exp", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> args = {"compare", test_dir() + "/ref", test_dir() + "/exp"};
  if (!tolerance.empty()) args.insert(args.end(), {"--tolerance", tolerance});
  CliResult c = run_podsim(args);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // "equal: N tensors within their bounds (...)": each tensor within the bound of the precision it was computed in.
  const size_t at = c.out.find("  equal: ");
  ASSERT_NE(at, std::string::npos) << c.out;
  std::printf("%s", c.out.substr(at).c_str());
  // The masters, their gradients, updates and Adam moments (21 parameters) are among the tensors compared.
  EXPECT_GE(std::stoi(c.out.substr(at + 9)), 100) << c.out;
}

struct Case {
  std::string name, dims, rest;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
const Case kCases[] = {
    {"DataParallel2", "[2, 1]", "strategy: {name: data_parallel}\n"},
    {"WeightUpdateSharding2", "[2, 1]", "strategy: {name: data_parallel, weight_update_sharding: true}\n"},
    {"Megatron2", "[2, 1]", "strategy: {name: spmd}\n"},
    {"DataTimesModel4", "[4, 1]", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
    {"Pipeline2", "[2, 1]", "strategy: {name: pipeline, micro_batches: 2}\n"},
    {"TwoDimensional4", "[2, 2]",
     "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n"},
};

class MixedPrecisionEquivalenceTest : public ::testing::TestWithParam<Case> {};

// fp32 master weights, bf16 compute: each tensor within podsim compare's bound for its precision (a partitioned
// step rounds its bf16 partial sums at other points than one chip; docs/model.md); the fp32 masters, which no
// strategy changes before the update, exactly.
TEST_P(MixedPrecisionEquivalenceTest, Fp32MastersBf16Compute) {
  expect_equivalent(tiny("bf16", "fp32"), GetParam().dims, GetParam().rest, "");
}

// A tied embedding read in the first and the last stage: each stage casts its own copy, and the two gradients meet
// in fp32 for the one update.
TEST(MixedPrecisionEquivalenceTiedTest, PipelineStagesCastTheirOwnCopies) {
  expect_equivalent(tiny("bf16", "fp32") + "  tie_embeddings: true\n", "[2, 1]",
                    "strategy: {name: pipeline, micro_batches: 2}\n", "");
}

// The mixture-of-experts layers' expert weights too, under expert x data parallelism.
TEST(MixedPrecisionEquivalenceMoeTest, ExpertAndDataParallel) {
  expect_equivalent("workload:\n  model: transformer\n  layers: 2\n  d_model: 32\n  d_ff: 64\n  heads: 4\n"
                    "  vocab: 64\n  seq_len: 8\n  batch: 8\n  dtype: bf16\n  weight_dtype: fp32\n"
                    "  moe: {experts: 4, groups: 8, capacity_factor: 2}\n",
                    "[4, 1]", "strategy: {name: [moe, data_parallel]}\nmesh: {axes: [data, expert], shape: [2, 2]}\n",
                    "");
}

// Bytes at the peak of llm-tiny's single-device step (106816 parameters, of which the embedding 256 x 64 = 16384),
// counted by hand. The peak is at the unembedding's weight gradient, where the logits' gradient (written over the
// logits) and the unembedding's gradient are live at once. Without producer duplication the bf16 weight copies are
// stored; with it (the default), each matmul converts its fp32 weight in its own prologue, as XLA fuses the convert
// into the dot.
TEST(MixedPrecisionMemoryTest, MastersCopiesAndAdamMomentsByHand) {
  const double P = 106816, embedding = 256 * 64, d = 64, tokens = 8 * 16, vocab = 256;
  const std::string pod = "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\n";
  auto memory = [&](const std::string& name, const std::string& workload) {
    const std::string f = write_file(name + ".yaml", pod + workload);
    CliResult r = run_podsim({"run", f, "--memory-only", "--out", test_dir() + "/" + name, "-q"});
    EXPECT_EQ(r.code, 0) << r.err;
    return summary(test_dir() + "/" + name)["memory"]["at_peak"];
  };
  const nlohmann::json stored = memory("stored", tiny("bf16", "fp32") + "run: {fusion_duplicate: false}\n");
  EXPECT_EQ(stored["weights"].get<double>(), 4 * P);              // fp32 masters
  EXPECT_EQ(stored["optimizer_state"].get<double>(), 2 * 4 * P);  // Adam's m and v, fp32
  // The bf16 copies, 2 bytes per parameter: every one is still live (the matmuls and norms read theirs again in the
  // backward pass) but the embedding's, whose only reader is the lookup (its gradient, a scatter-add, does not read
  // the table), and the unembedding's (256 x 64), whose last reader, the logits' input gradient, has run.
  EXPECT_EQ(stored["weight_copies"].get<double>(), 2 * (P - 2 * embedding));
  // The logits' gradient (8 x 16 tokens x 256, bf16), the final norm's output gradient (8 x 16 x 64, bf16) and the
  // unembedding's fp32 gradient, as below.
  EXPECT_EQ(stored["gradients"].get<double>(), tokens * vocab * 2 + tokens * d * 2 + vocab * d * 4);
  const nlohmann::json mixed = memory("mixed", tiny("bf16", "fp32"));
  EXPECT_EQ(mixed["weights"].get<double>(), 4 * P);
  EXPECT_EQ(mixed["optimizer_state"].get<double>(), 2 * 4 * P);
  // Only the five norms' gamma copies (64 each) are stored: each is converted inside its norm's fusion, which
  // writes it for the backward pass; the matmuls' weights are converted where they are read.
  EXPECT_EQ(mixed["weight_copies"].get<double>(), 5 * d * 2);
  // The logits' gradient, the final norm's output gradient (8 x 16 x 64, bf16) and the unembedding's fp32 gradient
  // (its bf16 gradient converted in the same fusion).
  EXPECT_EQ(mixed["gradients"].get<double>(), tokens * vocab * 2 + tokens * d * 2 + vocab * d * 4);
  // Without weight_dtype: bf16 weights, no copies; Adam's moments stay fp32.
  const nlohmann::json plain = memory("plain", "workload:\n  preset: llm-tiny\n  batch: 8\n  dtype: bf16\n");
  EXPECT_EQ(plain["weights"].get<double>(), 2 * P);
  EXPECT_EQ(plain["optimizer_state"].get<double>(), 2 * 4 * P);
  EXPECT_EQ(plain["weight_copies"].get<double>(), 0);
}

// Data parallelism reduces the fp32 gradients of the masters (Megatron-LM's accumulate_allreduce_grads_in_fp32), one
// all-reduce per parameter: 4 bytes per parameter; with bf16 weights, 2.
TEST(MixedPrecisionMemoryTest, DataParallelReducesFp32Gradients) {
  const double P = 106816;
  auto reduced = [&](const std::string& name, const std::string& workload) {
    const std::string f = write_file(name + ".yaml", hw("[2, 1]") + workload + "strategy: {name: data_parallel}\n");
    CliResult r = run_podsim({"run", f, "--out", test_dir() + "/" + name, "-q"});
    EXPECT_EQ(r.code, 0) << r.err;
    double bytes = 0;
    int count = 0;
    const nlohmann::json s = summary(test_dir() + "/" + name);
    for (const auto& c : s["collectives"]) {
      EXPECT_EQ(c["kind"], "all_reduce") << c.dump();
      if (c["tensor"] == "loss") continue;  // the loss's mean over the replicas: one fp32 number
      bytes += c["bytes_per_chip"].get<double>();
      count += c.contains("tensors") ? static_cast<int>(c["tensors"].size()) : 1;  // a bucket carries several
    }
    EXPECT_EQ(count, 21) << name;  // one reduction per parameter (some combined into buckets)
    return bytes;
  };
  EXPECT_EQ(reduced("mixed", tiny("bf16", "fp32")), 4 * P);
  EXPECT_EQ(reduced("plain", tiny("bf16", "bf16")), 2 * P);
}

INSTANTIATE_TEST_SUITE_P(Strategies, MixedPrecisionEquivalenceTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

}  // namespace
