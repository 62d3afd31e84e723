// workload.remat end to end: the numbers are bit for bit those of the step without recomputation under every
// strategy (podsim compare --tolerance 0), summary.json counts the recomputation (hardware FLOPs by hand,
// recompute_s), the recomputed ops run during the backward pass in the simulated schedule, the console and the
// report show them, and misuse of the options is refused with the key's location.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }

const std::string kTransformer =
    "workload:\n  model: transformer\n  layers: 3\n  d_model: 32\n  d_ff: 48\n  heads: 4\n  vocab: 50\n"
    "  seq_len: 8\n  batch: 8\n  dtype: fp32\n  optimizer: adam\n";
// batch 16, input 8, hidden 32, 2 layers, 4 classes, fp32, SGD.
const std::string kMlp = "workload:\n  model: mlp\n  batch: 16\n  input: 8\n  hidden: 32\n  layers: 2\n  classes: 4\n"
                         "  dtype: fp32\n";

nlohmann::json summary(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/summary.json")); }

CliResult run(const std::string& name, const std::string& text) {
  const std::string f = write_file(name + ".yaml", text);
  CliResult r = run_podsim({"run", f, "--out", test_dir() + "/" + name});
  EXPECT_EQ(r.code, 0) << r.err;
  return r;
}

// Runs `head` + workload + `rest` with remat: none and with `policy` in numeric mode; every tensor must match
// exactly.
void expect_bit_identical(const std::string& name, const std::string& head, const std::string& workload,
                          const std::string& policy, const std::string& rest) {
  SCOPED_TRACE(name + " " + policy);
  run(name + "_none", head + workload + "  remat: none\n" + rest + "run: {numeric: true}\n");
  run(name + "_remat", head + workload + "  remat: " + policy + "\n" + rest + "run: {numeric: true}\n");
  CliResult c = run_podsim({"compare", test_dir() + "/" + name + "_none", test_dir() + "/" + name + "_remat",
                            "--tolerance", "0"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("equal within 0: "), std::string::npos) << c.out;
  // Something was recomputed (dots recomputes no matmul: time, not MXU FLOPs).
  EXPECT_GT(summary(test_dir() + "/" + name + "_remat")["recompute_s"].get<double>(), 0);
}

}  // namespace

TEST(RematCliTest, BitIdenticalUnderEveryStrategy) {
  expect_bit_identical("single", hw("[1, 1]"), kTransformer, "full", "");
  expect_bit_identical("dp", hw("[2, 1]"), kTransformer, "dots", "strategy: {name: data_parallel}\n");
  expect_bit_identical("megatron", hw("[4, 1]"), kTransformer, "full", "strategy: {name: spmd}\n");
  expect_bit_identical("twod", hw("[2, 2]"), kTransformer, "dots",
                       "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n");
  expect_bit_identical("pipeline", hw("[2, 1]"), kTransformer, "full",
                       "strategy: {name: pipeline, micro_batches: 2, schedule: 1f1b}\n");
  // The stages run each micro-batch's recomputed layers as a unit of their own before its backward.
  const nlohmann::json pl = summary(test_dir() + "/pipeline_remat")["pipeline"];
  EXPECT_TRUE(pl["remat"].get<bool>());
  EXPECT_EQ(pl["stage_units"][0].size(), 2u * 3);  // stage 0: M micro-batches x forward, recompute, backward
  expect_bit_identical("data_model", hw("[2, 2]"), kMlp, "names\n  remat_keep: ['fc1*']",
                       "strategy: {name: [data_parallel, spmd], weight_update_sharding: "
                       "true}\nmesh: {axes: [data, model], shape: [2, 2]}\n");
  // A mixture of experts recomputes its gating with the same random second-expert routing.
  expect_bit_identical("moe", hw("[4, 1]"),
                       kTransformer + "  moe: {experts: 4, groups: 8, second_expert: random}\n", "full",
                       "strategy: {name: [moe, data_parallel]}\nmesh: {axes: [data, expert], shape: [2, 2]}\n");
}

// Hardware FLOPs by hand: the MLP's recomputed matmuls are both hidden layers' forward products,
// 2 B I H + 2 B H H = 8192 + 32768; the model FLOPs do not change. Each hidden layer recomputes three ops: its
// matmul, bias add and ReLU (the ReLU's gradient reads its output). The recomputation's time is part of the step, and
// every recomputed op starts after the loss, once the backward pass reached its layer.
TEST(RematCliTest, SummaryCountsTheRecomputation) {
  // Without fusion, so that every op keeps its name in the op table.
  CliResult none = run("none", hw("[1, 1]") + kMlp + "  remat: none\nrun: {fusion: none}\n");
  CliResult full = run("full", hw("[1, 1]") + kMlp + "  remat: full\nrun: {fusion: none}\n");
  const nlohmann::json a = summary(test_dir() + "/none"), b = summary(test_dir() + "/full");
  EXPECT_EQ(a["recompute_flops"].get<double>(), 0);
  EXPECT_EQ(a["recompute_s"].get<double>(), 0);
  EXPECT_EQ(b["model_flops"].get<double>(), a["model_flops"].get<double>());
  EXPECT_EQ(b["recompute_flops"].get<double>(), 8192.0 + 32768.0);
  EXPECT_EQ(b["hardware_flops"].get<double>(), a["hardware_flops"].get<double>() + 8192.0 + 32768.0);
  EXPECT_GT(b["hfu"].get<double>(), b["mfu"].get<double>());
  EXPECT_GT(b["recompute_s"].get<double>(), 0);
  EXPECT_LT(b["recompute_s"].get<double>(), b["step_time_s"].get<double>());
  EXPECT_GT(b["step_time_s"].get<double>(), a["step_time_s"].get<double>());
  double loss_end = -1, gate_end = -1;
  int recomputed = 0;
  for (const auto& op : b["ops"]) {
    if (op["name"] == "loss") loss_end = op["end_ns"].get<double>();
    if (op["name"] == "out.dB") gate_end = op["end_ns"].get<double>();
  }
  ASSERT_GT(loss_end, 0);
  ASSERT_GT(gate_end, 0);
  for (const auto& op : b["ops"]) {
    const std::string name = op["name"];
    if (name.size() < 6 || name.substr(name.size() - 6) != "/remat") continue;
    ++recomputed;
    EXPECT_GE(op["start_ns"].get<double>(), gate_end) << name;
    EXPECT_GE(op["start_ns"].get<double>(), loss_end) << name;
  }
  EXPECT_EQ(recomputed, 6);
  // The console and the report show it; without recomputation neither does.
  EXPECT_NE(full.out.find("recompute     "), std::string::npos) << full.out;
  EXPECT_EQ(none.out.find("recompute     "), std::string::npos) << none.out;
  CliResult r = run_podsim({"report", test_dir() + "/full"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("recompute"), std::string::npos) << r.out;
}

// Peak memory drops with full recomputation under tensor parallelism too (the layers' activations are gone, their
// inputs kept).
TEST(RematCliTest, PeakActivationsDropUnderMegatron) {
  const std::string w = "workload:\n  model: transformer\n  layers: 4\n  d_model: 256\n  d_ff: 1024\n  heads: 8\n"
                        "  vocab: 512\n  seq_len: 256\n  batch: 8\n";
  run("mnone", hw("[4, 1]") + w + "  remat: none\nstrategy: {name: spmd}\n");
  run("mdots", hw("[4, 1]") + w + "  remat: dots\nstrategy: {name: spmd}\n");
  run("mfull", hw("[4, 1]") + w + "  remat: full\nstrategy: {name: spmd}\n");
  const double n = summary(test_dir() + "/mnone")["memory"]["at_peak"]["activations"].get<double>();
  const double d = summary(test_dir() + "/mdots")["memory"]["at_peak"]["activations"].get<double>();
  const double f = summary(test_dir() + "/mfull")["memory"]["at_peak"]["activations"].get<double>();
  EXPECT_LT(d, n);
  EXPECT_LT(f, d);
}

TEST(RematCliTest, MisuseIsRefusedWithTheKeysLocation) {
  const std::string f1 = write_file("keep.yaml", hw("[1, 1]") + kMlp + "  remat: full\n  remat_keep: ['fc0']\n");
  CliResult r = run_podsim({"validate", f1});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(f1 + ":13:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PODSIM-CFG-009"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("remat: names"), std::string::npos) << r.err;
  const std::string f2 = write_file("names.yaml", hw("[1, 1]") + kMlp + "  remat: names\n");
  r = run_podsim({"validate", f2});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(f2 + ":12:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("remat_keep"), std::string::npos) << r.err;
  const std::string f3 = write_file("both.yaml", hw("[2, 1]") + kMlp +
                                                     "  remat: dots\nstrategy: {name: pipeline, remat: true}\n");
  r = run_podsim({"validate", f3});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(f3 + ":13:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Set one of them"), std::string::npos) << r.err;
}

// MaxText's custom policy: a name podsim's layers do not tag (MaxText's fused qkv_proj), a place that is not one of
// device, offload, remat, and a place given without remat: custom are each refused at the key, with its id and
// what would be valid; exit 2.
TEST(RematCliTest, CustomPolicyMisuseIsRefusedWithTheKeysLocation) {
  const std::string head = hw("[1, 1]") + kTransformer;
  const std::string custom = "  remat: custom\n  remat_custom:\n";
  const std::string f1 = write_file("custom_name.yaml", head + custom + "    qkv_proj: offload\n");
  CliResult r = run_podsim({"validate", f1});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(f1 + ":17:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PODSIM-CFG-002"), std::string::npos) << r.err;
  const std::string f2 = write_file("custom_place.yaml", head + custom + "    context: host\n");
  r = run_podsim({"validate", f2});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(f2 + ":17:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PODSIM-CFG-009"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("offload"), std::string::npos) << r.err;
  const std::string f3 =
      write_file("custom_without.yaml", head + "  remat: full\n  remat_custom:\n    context: device\n");
  r = run_podsim({"validate", f3});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(f3 + ":17:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PODSIM-CFG-009"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("remat: custom"), std::string::npos) << r.err;
}
