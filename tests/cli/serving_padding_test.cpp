// Batch padding end to end (docs/serving.md, "Batch padding"): an inference step with empty sequences counts only
// its real ones' model FLOPs, and split over the batch computes what one chip does; a continuous run whose cache is split over the batch decodes every slot and runs
// (it failed with PODSIM-INF-004 before, and still does with serving.engine.batch_padding: none); the decodes'
// model FLOPs are the real tokens' whatever the padding; with none, a stream's figures are those of the engine
// before batch padding existed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kModel =
    "workload: {preset: llm-tiny, layers: 2, d_model: 1024, heads: 8, kv_heads: 2, d_ff: 4096, vocab: 2048, "
    "max_context: 2048";

std::string serving(const std::string& strategy, const std::string& stream, const std::string& engine) {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n" + kModel + "}\nstrategy: " + strategy +
         "\nserving:\n  requests: " + stream + "\n  engine: " + engine + "\n";
}

nlohmann::json run(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {},
                   int expect = 0, std::string* err = nullptr) {
  const std::string path = write_file(name + ".yaml", yaml);
  std::vector<std::string> args = {"run", path, "--out", test_dir() + "/" + name, "-q"};
  for (const auto& s : sets) args.push_back("--set"), args.push_back(s);
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, expect) << r.err;
  if (err) *err = r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

const std::string kPoisson =
    "{count: 10, input_tokens: [20, 300], output_tokens: [8, 40], arrival: poisson, rate: 400, seed: 3}";

TEST(ServingPaddingRun, AStepsEmptySequencesAreComputedButNotModelFlops) {
  const std::string step = "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n" + kModel +
                           ", step: decode, batch: 3, context_lengths: [100, 200, 300]}\nstrategy: {name: spmd}\n";
  const auto bare = run("bare", step);
  // One empty slot beside the three: four rows, which a cache split over the batch of 4 chips takes.
  const auto padded =
      run("padded", step, {"workload.pad_sequences=1", "workload.pad_tokens=1", "strategy.kv_sharding=batch"});
  ASSERT_FALSE(bare.is_null());
  ASSERT_FALSE(padded.is_null());
  EXPECT_EQ(padded["inference"]["sequences"], 3);
  EXPECT_EQ(padded["inference"]["padding_sequences"], 1);
  EXPECT_EQ(padded["inference"]["padding_tokens"], 1);
  EXPECT_EQ(padded["inference"]["new_tokens"], 3);
  EXPECT_EQ(padded["inference"]["computed_tokens"], 4);
  EXPECT_EQ(padded["inference"]["context_tokens"], bare["inference"]["context_tokens"]);  // the empty slot reads none
  // Model FLOPs: the three sequences', whatever the layout; the chips computed the fourth row too.
  EXPECT_NEAR(padded["model_flops"].get<double>(), bare["model_flops"].get<double>(),
              1e-9 * bare["model_flops"].get<double>());
  EXPECT_GT(padded["hardware_flops"].get<double>(), bare["hardware_flops"].get<double>());
  // Without the padding the split fails: 3 sequences over 4 chips.
  std::string err;
  run("unpadded", step, {"strategy.kv_sharding=batch"}, 2, &err);
  EXPECT_NE(err.find("PODSIM-INF-004"), std::string::npos) << err;
}

TEST(ServingPaddingRun, APaddedDecodeSplitOverTheBatchReproducesTheSingleChipStep) {
  // Three multi-query decodes of ragged contexts and an empty slot, the cache split over the batch of 4 chips,
  // against the same step on one chip: every tensor (caches, logits, tokens) within fp32's bound.
  const std::string workload =
      "workload: {preset: llm-tiny, dtype: fp32, kv_heads: 1, kv_block: 3, step: decode, batch: 3, "
      "context_lengths: [3, 9, 6], pad_sequences: 1, pad_tokens: 1}\n";
  const std::string ref = write_file(
      "step1.yaml", "hardware: {preset: tpu-v5e, pod: {dims: [1, 1]}}\n" + workload + "run: {numeric: true}\n");
  const std::string exp = write_file("step4.yaml", "hardware: {preset: tpu-v5e, pod: {dims: [4, 1]}}\n" + workload +
                                                       "strategy: {name: spmd, kv_sharding: batch}\n"
                                                       "run: {numeric: true}\n");
  ASSERT_EQ(run_podsim({"run", ref, "--out", test_dir() + "/step1", "-q"}).code, 0);
  ASSERT_EQ(run_podsim({"run", exp, "--out", test_dir() + "/step4", "-q"}).code, 0);
  const CliResult c = run_podsim({"compare", test_dir() + "/step1", test_dir() + "/step4"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("equal:"), std::string::npos) << c.out;
}

TEST(ServingPaddingRun, AContinuousRunWithTheCacheSplitOverTheBatchDecodesEverySlot) {
  const std::string yaml = serving("{name: spmd, kv_sharding: batch}", kPoisson, "{policy: continuous, slots: 4}") +
                           "  prefill: {strategy: {name: spmd, kv_sharding: heads}}\n";
  const auto j = run("kv_batch", yaml);
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["serving"]["batch"]["padding"], "engine");
  EXPECT_EQ(j["serving"]["batch"]["max_computed_sequences"], 4);
  EXPECT_TRUE(j["serving"]["phases"]["decode"]["collectives"].contains("all_to_all"));
  // Every decode computes the 4 slots: its sequences and the empty ones.
  std::istringstream csv(read_file(test_dir() + "/kv_batch/iterations.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "start_s,duration_s,kind,sequences,new_tokens,running,kv_tokens,kv_pages,pad_sequences,pad_tokens");
  int decodes = 0, padded = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) f.push_back(c);
    ASSERT_EQ(f.size(), 10u);
    if (f[2] != "decode") {
      EXPECT_EQ(f[8], "0");
      continue;
    }
    ++decodes;
    EXPECT_EQ(std::stoi(f[3]) + std::stoi(f[8]), 4) << line;
    EXPECT_EQ(f[8], f[9]) << line;  // an empty slot is a sequence and a token
    padded += f[8] != "0";
  }
  EXPECT_GT(decodes, 0);
  EXPECT_GT(padded, 0);  // the stream's lengths vary: some decodes have empty slots
  // The same run decoding the occupied slots only fails where they are no multiple of the 4 chips.
  std::string err;
  run("kv_batch_none", yaml, {"serving.engine.batch_padding=none"}, 2, &err);
  EXPECT_NE(err.find("PODSIM-INF-004"), std::string::npos) << err;
}

TEST(ServingPaddingRun, DecodeMfuCountsTheRealTokens) {
  // Sent at once, continuous batching's schedule does not depend on the iteration times: both runs decode the same
  // sequences, one of them over every slot.
  const std::string yaml =
      serving("{name: spmd}", "{count: 10, input_tokens: [20, 300], output_tokens: [8, 40], arrival: all_at_once, "
                              "seed: 3}",
              "{policy: continuous, slots: 4}");
  const auto a = run("mfu_engine", yaml);
  const auto b = run("mfu_none", yaml, {"serving.engine.batch_padding=none"});
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(b.is_null());
  const auto& da = a["serving"]["iterations"]["decode"];
  const auto& db = b["serving"]["iterations"]["decode"];
  EXPECT_EQ(da["count"], db["count"]);
  EXPECT_EQ(da["tokens"], db["tokens"]);
  // MFU x time is the model FLOPs over the slice's peak: the same real tokens' FLOPs in both.
  const double fa = da["mfu"].get<double>() * da["time_s"].get<double>();
  const double fb = db["mfu"].get<double>() * db["time_s"].get<double>();
  EXPECT_NEAR(fa, fb, 1e-5 * fb);
  EXPECT_GE(da["time_s"].get<double>(), db["time_s"].get<double>());  // the empty slots' rows cost something
}

TEST(ServingPaddingRun, WithoutPaddingTheFiguresAreTheEngineBeforeIt) {
  // The figures this stream gave before batch padding existed (the same experiment on the engine without it:
  // continuous batching into 4 slots, then chunked prefill over a paged cache), the prefill's attention kernel
  // charged the softmax scale per score as it was then (workload.flash.scale_in_kernel).
  const auto c = run("none_continuous", serving("{name: spmd}", kPoisson, "{policy: continuous, slots: 4}"),
                     {"serving.engine.batch_padding=none", "workload.flash.scale_in_kernel=true"});
  ASSERT_FALSE(c.is_null());
  const auto& s = c["serving"];
  EXPECT_NEAR(s["duration_s"].get<double>(), 0.022598423, 2e-9);
  EXPECT_NEAR(s["tpot_s"]["mean"].get<double>(), 0.000216525, 2e-9);
  EXPECT_NEAR(s["ttft_s"]["mean"].get<double>(), 0.000416684, 2e-9);
  EXPECT_EQ(s["iterations"]["decode"]["count"], 102);
  EXPECT_NEAR(s["iterations"]["decode"]["mfu"].get<double>(), 0.000815697, 2e-9);
  EXPECT_NEAR(s["iterations"]["decode"]["mbu"].get<double>(), 0.122325291, 2e-9);
  EXPECT_EQ(s["shapes_simulated"], 24);
  const auto k = run("none_chunked",
                     serving("{name: spmd}", kPoisson,
                             "{policy: chunked, slots: 4, max_batched_tokens: 128, kv: paged, page_tokens: 16, "
                             "pages: 48}"),
                     {"serving.engine.batch_padding=none", "workload.flash.scale_in_kernel=true"});
  ASSERT_FALSE(k.is_null());
  EXPECT_NEAR(k["serving"]["duration_s"].get<double>(), 0.023439016, 2e-9);
  EXPECT_NEAR(k["serving"]["tpot_s"]["mean"].get<double>(), 0.000270694, 2e-9);
  EXPECT_NEAR(k["serving"]["iterations"]["mixed"]["mfu"].get<double>(), 0.036286492, 2e-9);
  EXPECT_EQ(k["serving"]["shapes_simulated"], 113);
}

}  // namespace
