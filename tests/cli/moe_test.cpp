// The MoE example end to end: `podsim run` (SystemC, numeric) of configs/examples/moe.yaml against its single-device
// reference made by the documented recipe (strategy section replaced by `name: single_device`, mesh dropped),
// compared with `podsim compare`; the routing reports of both runs must be the same. And the errors an MoE
// experiment can hit.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// Smaller widths than shipped, so that two numeric runs take seconds; the structure (8 chips, data x expert, 8
// experts, random routing, capacity factor 1.25) is the example's.
const std::vector<std::string> kSmaller = {"--set", "workload.d_model=64", "--set", "workload.d_ff=128",
                                           "--set", "workload.vocab=128",  "--set", "workload.seq_len=32",
                                           "--set", "run.numeric=true",
                                           // Forward activations too: the dispatch masks and routes get compared.
                                           "--set", "run.dump_activations=true"};

CliResult run_with(const std::string& file, const std::string& out) {
  std::vector<std::string> args = {"run", file, "--out", out};
  args.insert(args.end(), kSmaller.begin(), kSmaller.end());
  return run_podsim(args);
}

}  // namespace

TEST(MoeCliTest, ExampleMatchesItsSingleDeviceReference) {
  const std::string example = source_dir() + "/configs/examples/moe.yaml";
  // The recipe: drop the strategy and mesh sections, run on one chip of the same pod.
  std::string text = read_file(example);
  text = std::regex_replace(text, std::regex("\nstrategy:\n(  .*\n)+"), "\n");
  text = std::regex_replace(text, std::regex("\nmesh:\n(  .*\n)+"), "\n");
  ASSERT_EQ(text.find("\nstrategy:"), std::string::npos);
  ASSERT_EQ(text.find("\nmesh:"), std::string::npos);
  const std::string single = write_file("single.yaml", text + "strategy:\n  name: single_device\n");

  CliResult a = run_with(example, test_dir() + "/moe");
  ASSERT_EQ(a.code, 0) << a.err;
  CliResult b = run_with(single, test_dir() + "/single");
  ASSERT_EQ(b.code, 0) << b.err;
  // Each layer's weighted aux-loss term is a pending sum over the chips in the partitioned run (added straight into
  // the loss, which is compared), so that run has no assembled value to dump; drop it from the reference.
  for (const char* l : {"layer1", "layer3"})
    std::filesystem::remove(test_dir() + "/single/tensors/" + l + ".moe.gating.aux_loss.npy");
  CliResult c = run_podsim({"compare", test_dir() + "/single", test_dir() + "/moe"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
  for (const char* t : {"layer1.moe.gating.dispatch", "layer3.moe.gating.routes", "layer3.moe.wi.grad", "loss"})
    EXPECT_NE(c.out.find(t), std::string::npos) << t << " not compared:\n" << c.out;

  auto sa = nlohmann::json::parse(read_file(test_dir() + "/moe/summary.json"));
  auto sb = nlohmann::json::parse(read_file(test_dir() + "/single/summary.json"));
  EXPECT_EQ(sa["active_chips"], 8);
  EXPECT_EQ(sb["active_chips"], 1);
  ASSERT_TRUE(sa.contains("moe"));
  EXPECT_EQ(sa["moe"], sb["moe"]);  // same tokens routed to the same experts, same drops
  const auto& layers = sb["moe"]["layers"];
  ASSERT_EQ(layers.size(), 2u);  // layers 1 and 3 of 4
  for (const auto& l : layers) {
    // 16 x 32 tokens in 16 groups of 32; capacity ceil(2 x 32 / 8 x 1.25) = 10.
    EXPECT_EQ(l["tokens"], 512);
    EXPECT_EQ(l["capacity"], 10);
    int64_t per_expert = 0;
    for (const auto& n : l["tokens_per_expert"]) per_expert += n.get<int64_t>();
    EXPECT_EQ(per_expert, l["assignments_routed"].get<int64_t>());
    EXPECT_EQ(l["assignments_requested"].get<int64_t>(), 2 * 512 - l["second_not_sampled"].get<int64_t>());
    EXPECT_EQ(l["assignments_dropped"].get<int64_t>(),
              l["assignments_requested"].get<int64_t>() - l["assignments_routed"].get<int64_t>());
  }
  // The all-to-alls of dispatch and combine, over `expert`.
  int all_to_all = 0;
  for (const auto& op : sa["collectives"])
    if (op["kind"] == "all_to_all") {
      ++all_to_all;
      EXPECT_EQ(op["axes"], nlohmann::json::array({"expert"}));
    }
  EXPECT_EQ(all_to_all, 8);  // 2 MoE layers x (dispatch, combine) x (forward, backward)
}

// moe x data x model on 8 chips: the example with a `model` axis added for spmd (Megatron for the dense layers,
// each expert's hidden units split by annotation), run by `podsim run` and compared with the same single-device
// reference as above.
TEST(MoeCliTest, MoeTimesDataTimesModelMatchesItsSingleDeviceReference) {
  std::string text = read_file(source_dir() + "/configs/examples/moe.yaml");
  text = std::regex_replace(text, std::regex("\nstrategy:\n(  .*\n)+"), "\n");
  text = std::regex_replace(text, std::regex("\nmesh:\n(  .*\n)+"), "\n");
  ASSERT_EQ(text.find("\nstrategy:"), std::string::npos);
  const std::string composed = write_file(
      "composed.yaml", text +
                           "strategy:\n"
                           "  name: [moe, data_parallel, spmd]\n"
                           "  shard: [\"layer*.moe.wi = [-, -, model]\", \"layer*.moe.wo = [-, model, -]\"]\n"
                           "mesh:\n  axes: [data, expert, model]\n  shape: [2, 2, 2]\n");
  const std::string single = write_file("single.yaml", text + "strategy:\n  name: single_device\n");

  CliResult a = run_with(composed, test_dir() + "/composed");
  ASSERT_EQ(a.code, 0) << a.err;
  CliResult b = run_with(single, test_dir() + "/single");
  ASSERT_EQ(b.code, 0) << b.err;
  for (const char* l : {"layer1", "layer3"})
    std::filesystem::remove(test_dir() + "/single/tensors/" + l + ".moe.gating.aux_loss.npy");
  CliResult c = run_podsim({"compare", test_dir() + "/single", test_dir() + "/composed"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
  for (const char* t : {"layer1.moe.gating.dispatch", "layer3.moe.gating.routes", "layer3.moe.wi.grad",
                        "layer0.ffn.w1.grad", "loss"})
    EXPECT_NE(c.out.find(t), std::string::npos) << t << " not compared:\n" << c.out;

  auto sa = nlohmann::json::parse(read_file(test_dir() + "/composed/summary.json"));
  auto sb = nlohmann::json::parse(read_file(test_dir() + "/single/summary.json"));
  EXPECT_EQ(sa["active_chips"], 8);
  EXPECT_EQ(sa["moe"], sb["moe"]);
  // Each axis does its own traffic: dispatch and combine over `expert` only; spmd's partial sums over `model`.
  int all_to_all = 0, over_model = 0;
  for (const auto& op : sa["collectives"]) {
    if (op["kind"] == "all_to_all") {
      ++all_to_all;
      EXPECT_EQ(op["axes"], nlohmann::json::array({"expert"}));
    }
    if (op["axes"] == nlohmann::json::array({"model"})) ++over_model;
  }
  EXPECT_EQ(all_to_all, 8);
  EXPECT_GT(over_model, 0);
}

// moe x fsdp x model on 8 chips: the experts split over `expert` and each expert's hidden units over `model` (as
// above), every weight (the experts' among them) also sharded over `fsdp`, gathered per pass and its gradient
// reduce-scattered; the tokens split over fsdp and expert. Compared with the same single-device reference.
TEST(MoeCliTest, MoeTimesFsdpTimesModelMatchesItsSingleDeviceReference) {
  std::string text = read_file(source_dir() + "/configs/examples/moe.yaml");
  text = std::regex_replace(text, std::regex("\nstrategy:\n(  .*\n)+"), "\n");
  text = std::regex_replace(text, std::regex("\nmesh:\n(  .*\n)+"), "\n");
  const std::string composed = write_file(
      "composed.yaml", text +
                           "strategy:\n"
                           "  name: [moe, fsdp, spmd]\n"
                           "  shard: [\"layer*.moe.wi = [-, -, model]\", \"layer*.moe.wo = [-, model, -]\"]\n"
                           "mesh:\n  axes: [fsdp, expert, model]\n  shape: [2, 2, 2]\n");
  const std::string single = write_file("single.yaml", text + "strategy:\n  name: single_device\n");
  CliResult a = run_with(composed, test_dir() + "/composed");
  ASSERT_EQ(a.code, 0) << a.err;
  CliResult b = run_with(single, test_dir() + "/single");
  ASSERT_EQ(b.code, 0) << b.err;
  for (const char* l : {"layer1", "layer3"})
    std::filesystem::remove(test_dir() + "/single/tensors/" + l + ".moe.gating.aux_loss.npy");
  CliResult c = run_podsim({"compare", test_dir() + "/single", test_dir() + "/composed"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
  for (const char* t : {"layer1.moe.wi.grad", "layer3.moe.wo.new", "layer0.ffn.w1.new", "loss"})
    EXPECT_NE(c.out.find(t), std::string::npos) << t << " not compared:\n" << c.out;
  auto sa = nlohmann::json::parse(read_file(test_dir() + "/composed/summary.json"));
  auto sb = nlohmann::json::parse(read_file(test_dir() + "/single/summary.json"));
  EXPECT_EQ(sa["moe"], sb["moe"]);
  // Dispatch and combine over `expert` only; every gather and reduce-scatter of a weight over `fsdp` only.
  int all_to_all = 0, gathers = 0;
  for (const auto& op : sa["collectives"]) {
    if (op["kind"] == "all_to_all") {
      ++all_to_all;
      EXPECT_EQ(op["axes"], nlohmann::json::array({"expert"}));
    }
    if (op["kind"] == "all_gather") {
      ++gathers;
      EXPECT_EQ(op["axes"], nlohmann::json::array({"fsdp"})) << op.dump();
    }
  }
  EXPECT_EQ(all_to_all, 8);
  EXPECT_GT(gathers, 0);
}

namespace {

const std::string kExp =
    "hardware: {preset: tpu-v3, pod: {dims: [2, 2]}}\n"
    "workload:\n  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 24\n  heads: 4\n  vocab: 20\n"
    "  seq_len: 8\n  batch: 4\n";

CliResult expect_error(const std::string& yaml, const std::string& id, const std::string& key_line,
                       const std::string& words, bool run = false) {
  const std::string file = write_file("exp.yaml", yaml);
  std::vector<std::string> args = {run ? "run" : "validate", file};
  if (run) args.insert(args.end(), {"--out", test_dir() + "/out"});
  CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("error " + id + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(file + ":" + key_line + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  return r;
}

}  // namespace

TEST(MoeCliTest, BadMoeSettingsAreErrorsAtTheirKeys) {
  expect_error(kExp + "  moe: {experts: 1}\n", "PODSIM-CFG-006", "11", "top-2 gating needs at least 2 experts");
  expect_error(kExp + "  moe: {experts: 4, groups: 3}\n", "PODSIM-CFG-016", "11",
               "does not divide the step's 32 tokens");
  std::string one_layer = std::regex_replace(kExp, std::regex("layers: 2"), "layers: 1");
  expect_error(one_layer + "  moe: {experts: 4}\n", "PODSIM-CFG-006", "4", "has no MoE layer");
}

TEST(MoeCliTest, ListedWithItsDescription) {
  CliResult r = run_podsim({"list", "strategies"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("moe            Mixture of experts (GShard): experts split over mesh axis 'expert'"),
            std::string::npos)
      << r.out;
}

TEST(MoeCliTest, MoeStrategyNeedsMoeLayersAndAnAllToAllAlgorithm) {
  expect_error(kExp + "strategy: {name: moe}\n", "PODSIM-PLN-001", "11", "has none (set workload.moe.experts", true);
  expect_error(kExp + "  moe: {experts: 4}\nstrategy: {name: moe, all_to_all_algorithm: ring}\n", "PODSIM-CFG-013",
               "12", "not an algorithm for all_to_all (valid: direct");
}
