// Per-phase layouts of a serving run (docs/serving.md, "Per-phase layouts"): serving.prefill's layout for the
// prefill iterations, the experiment's for the decodes; the KV cache re-laid out between them and counted by hand;
// each phase's iterations with its own layout's collectives; the weights stored once where both layouts split them
// alike; bad combinations refused with PODSIM-SRV-005, located, exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// A small grouped-query model (8 heads, 4 key/value heads of 128, 2 layers, bf16) on 2 x 2 v5e chips, Megatron over
// the 4; continuous batching into 4 slots; the decodes' cache split over the batch (one sequence a chip).
std::string experiment(const std::string& prefill, const std::string& engine = "policy: continuous, slots: 4") {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
         "workload: {preset: llm-tiny, layers: 2, d_model: 1024, heads: 8, kv_heads: 4, d_ff: 4096, vocab: 2048, "
         "max_context: 2048}\n"
         "strategy: {name: spmd, kv_sharding: batch}\n"
         "serving:\n"
         "  requests: {count: 8, input_tokens: 64, output_tokens: 8, arrival: all_at_once}\n"
         "  engine: {" + engine + ", slot_tokens: 128}\n" + prefill;
}

const std::string kHeads = "  prefill:\n    strategy: {name: spmd, kv_sharding: heads}\n";

CliResult run(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  const std::string path = write_file(name + ".yaml", yaml);
  std::vector<std::string> args = {"run", path, "--out", test_dir() + "/" + name, "-q"};
  for (const auto& s : sets) args.push_back("--set"), args.push_back(s);
  return run_podsim(args);
}

nlohmann::json summary(const std::string& name) {
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

}  // namespace

TEST(ServingPhases, ABatchSplitDecodeCacheNeedsItsPrefillsUnderAnotherLayout) {
  // One prompt prefilled alone cannot be split over the 4 chips' batch.
  const CliResult one = run("one_layout", experiment(""));
  EXPECT_EQ(one.code, 2) << one.err;
  EXPECT_NE(one.err.find("PODSIM-INF-004"), std::string::npos) << one.err;
  // Prefilled by heads, each prompt's cache then moves to the chip of its decode slot.
  const CliResult r = run("heads_then_batch", experiment(kHeads));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = summary("heads_then_batch")["serving"];
  EXPECT_EQ(s["iterations"]["prefill"]["count"], 8);
  const auto& ph = s["phases"];
  // Hand count: a prompt of 64 tokens; its row's chip holds 1 of the 4 key/value heads under the prefill layout and
  // needs all 4 under the decode's: 3 heads x 64 tokens x 128 x 2 B, for the keys and the values of 2 layers.
  const double per_prompt = 3.0 * 64 * 128 * 2 * 2 * 2;
  EXPECT_DOUBLE_EQ(ph["relayout"]["max_bytes_per_chip"].get<double>(), per_prompt);
  EXPECT_EQ(ph["relayout"]["max_chips_receiving"], 1);
  EXPECT_EQ(ph["relayout"]["iterations"], 8);
  EXPECT_DOUBLE_EQ(ph["relayout"]["bytes"].get<double>(), 8 * per_prompt);
  // Timed over the chip's ICI links (2 x 2: one link along each dimension, 45 GB/s each on v5e) after a hop.
  EXPECT_DOUBLE_EQ(ph["relayout"]["chip_bandwidth_bytes_per_s"].get<double>(), 2 * 45e9);
  EXPECT_GT(ph["relayout"]["seconds"].get<double>(), 8 * per_prompt / 90e9);
  // Same mesh, same Megatron split of every weight: one copy.
  EXPECT_EQ(ph["weights"]["stored_twice"], 0);
  EXPECT_GT(ph["weights"]["stored_alike"].get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(ph["decode"]["other_layout_weight_bytes_per_chip"].get<double>(), 0);
  // Each phase's iterations with its layout's collectives: the decodes' batch-split attention exchanges its queries,
  // its fresh keys and values (their 4 heads split over the 4 chips by the projections) and its output by
  // all-to-all, 4 per layer; the prefills split by heads have none. Hand count of a chip's part of one layer's: 4
  // slots x (2 query heads + 1 key head + 1 value head + 2 output heads) x 128 x 2 B.
  EXPECT_FALSE(ph["prefill"]["collectives"].contains("all_to_all")) << ph["prefill"]["collectives"].dump();
  EXPECT_EQ(ph["decode"]["collectives"]["all_to_all"]["count"], 8) << ph["decode"]["collectives"].dump();
  EXPECT_DOUBLE_EQ(ph["decode"]["collectives"]["all_to_all"]["bytes_per_chip"].get<double>(), 2 * 4 * 6 * 128 * 2.0);
  EXPECT_EQ(ph["decode"]["collectives"]["all_gather"]["count"], 1)  // the sampling's candidates, no cache gathered
      << ph["decode"]["collectives"].dump();
  EXPECT_TRUE(ph["prefill"]["collectives"].contains("all_reduce"));
  // The resolved experiment keeps the prefill layout and loads back to the same run.
  const std::string resolved = read_file(test_dir() + "/heads_then_batch/config.resolved.yaml");
  EXPECT_NE(resolved.find("  prefill:\n    strategy:\n"), std::string::npos) << resolved;
  const CliResult again = run_podsim({"run", test_dir() + "/heads_then_batch/config.resolved.yaml", "--out",
                                      test_dir() + "/again", "-q"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(summary("again")["serving"]["phases"], ph);
  EXPECT_EQ(summary("again")["serving"]["duration_s"], s["duration_s"]);
}

TEST(ServingPhases, OverridesReachThePrefillLayout) {
  // --set serving.prefill.strategy.kv_sharding=batch gives the prefills the decode's layout back, and its error.
  const CliResult r = run("override", experiment(kHeads), {"serving.prefill.strategy.kv_sharding=batch"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("PODSIM-INF-004"), std::string::npos) << r.err;
}

TEST(ServingPhases, BadCombinationsAreRefusedAtTheirKeys) {
  auto expect_error = [](const std::string& name, const std::string& yaml, const std::string& id,
                         const std::string& where) {
    const CliResult r = run(name, yaml);
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find(id), std::string::npos) << name << ": " << r.err;
    EXPECT_NE(r.err.find(where), std::string::npos) << name << ": " << r.err;
    EXPECT_FALSE(exists(test_dir() + "/" + name + "/summary.json")) << name;
  };
  // Chunked iterations mix prefill chunks and decodes: one step, one layout.
  expect_error("chunked", experiment(kHeads, "policy: chunked, slots: 4"), "PODSIM-SRV-005", "chunked.yaml:6");
  // A prefill layout needs its strategy.
  expect_error("no_strategy", experiment("  prefill:\n    mesh: {axes: [model], shape: [4]}\n"), "PODSIM-SRV-005",
               "no_strategy.yaml:8");
  expect_error("unknown_key", experiment("  prefill:\n    strategy: {name: spmd}\n    batch: 4\n"), "PODSIM-CFG",
               "unknown_key.yaml:9");
  // The rest of the file keeps its places beside a prefill section.
  std::string typo = experiment(kHeads);
  typo.replace(typo.find("max_context"), 11, "max_contxt");
  expect_error("typo_elsewhere", typo, "PODSIM-CFG-002", "typo_elsewhere.yaml:2");
  // A prefill strategy's own keys are checked where they are written.
  expect_error("bad_value", experiment("  prefill:\n    strategy: {name: spmd, kv_sharding: rows}\n"), "serving.prefill",
               "bad_value.yaml:8");
}
