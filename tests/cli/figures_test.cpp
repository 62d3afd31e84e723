// summary.json's headline figures end to end, each against a value the simulator did not produce: model FLOPs
// against a hand count of the model's matmuls, whatever the mesh, strategy or recomputation; hardware FLOPs
// against the same count plus what a plan repeats; throughput against the run's own batch and step time; and
// each op's busy and waiting time against its span, with a pipeline's waiting receive ranked below the compute.
// Timing mode, tiny models, no trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "tests/cli/cli_util.h"
#include "tests/cli/sweep_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

// docs/model.md's Transformer: layers 2, d_model 64, d_ff 128, heads 8, vocab 256, 16 sequences of 16 tokens.
const std::string kTransformer =
    "workload:\n  model: transformer\n  layers: 2\n  d_model: 64\n  d_ff: 128\n  heads: 8\n  vocab: 256\n"
    "  seq_len: 16\n  batch: 16\n";
// docs/model.md's MLP: 16 examples of 24 features, 3 hidden layers of 40, 10 classes.
const std::string kMlp = "workload:\n  model: mlp\n  batch: 16\n  input: 24\n  hidden: 40\n  layers: 3\n  classes: 10\n";

// The Transformer's matmuls, by hand. Forward, per layer: the Q, K, V and output projections, 2·T·D·D each
// (T = B·S tokens); the scores Q·K^T and the context P·U, 2·B·S·S·D each (the whole S x S: the causal mask is not
// halved away, as PaLM counts); the FFN, 2·T·D·F up and 2·T·F·D down. Then the unembedding, 2·T·D·V. Backward
// computes two products as large as each forward one (both operands take a gradient): twice the forward.
double transformer_model_flops() {
  const double L = 2, D = 64, F = 128, V = 256, S = 16, B = 16, T = B * S;
  const double forward = L * (4 * 2 * T * D * D + 2 * 2 * B * S * S * D + 2 * 2 * T * D * F) + 2 * T * D * V;
  return 3 * forward;
}

// The MLP's forward matmuls (2·B·I·H, 2·B·H·H twice, 2·B·H·C) and the model FLOPs: the forward, a weight gradient
// of each layer (as large), and an input gradient of each layer but the first (its input is the batch).
double mlp_forward_flops() {
  const double B = 16, I = 24, H = 40, C = 10;
  return 2 * B * I * H + 2 * (2 * B * H * H) + 2 * B * H * C;
}
double mlp_model_flops() {
  const double B = 16, I = 24, H = 40;
  return mlp_forward_flops() + mlp_forward_flops() + (mlp_forward_flops() - 2 * B * I * H);
}

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }
const std::string kTimingNoTrace = "run: {numeric: false, trace: {format: \"off\"}}\n";

json summary(const std::string& dir) { return json::parse(read_file(dir + "/summary.json")); }

// Runs an experiment (YAML text) into test_dir()/name; returns the folder and the console output.
std::string run(const std::string& name, const std::string& yaml, std::string* console = nullptr) {
  const std::string file = write_file(name + ".yaml", yaml);
  const std::string dir = test_dir() + "/" + name;
  CliResult r = run_podsim({"run", file, "--out", dir});
  EXPECT_EQ(r.code, 0) << r.err;
  if (console) *console = r.out;
  return dir;
}

double wall_s(const json& op) { return (op["end_ns"].get<double>() - op["start_ns"].get<double>()) * 1e-9; }

// mfu and hfu as summary.json defines them, rounded as it rounds them (6 decimals).
void expect_utilization(const json& s) {
  const double pod_peak = s["peak_flops_per_chip"].get<double>() * s["chips"].get<double>() * s["step_time_s"].get<double>();
  EXPECT_NEAR(s["mfu"].get<double>(), s["model_flops"].get<double>() / pod_peak, 5e-7);
  EXPECT_NEAR(s["hfu"].get<double>(), s["hardware_flops"].get<double>() / pod_peak, 5e-7);
  EXPECT_GE(s["hardware_flops"].get<double>(), s["model_flops"].get<double>());
  EXPECT_GE(s["hfu"].get<double>(), s["mfu"].get<double>());
}

}  // namespace

// One Transformer on a 4 x 4 slice as data 16, data 4 x model 4, data 2 x model 8 and model 16: the model's FLOPs
// are the hand count every time. The hardware's grow with what the plan repeats: nothing under data parallelism
// (each chip takes a sixteenth of the batch), padded heads (8 over 16 shards) and replicated work under model 16.
TEST(FiguresTest, ModelFlopsAreTheSameUnderEveryMesh) {
  const struct {
    const char* name;
    std::string strategy;
  } meshes[] = {
      {"data16", "strategy: {name: data_parallel}\n"},
      {"data4_model4", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [4, 4]}\n"},
      {"data2_model8", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 8]}\n"},
      {"model16", "strategy: {name: spmd}\n"},
  };
  std::vector<double> hardware;
  for (const auto& m : meshes) {
    SCOPED_TRACE(m.name);
    const json s = summary(run(m.name, hw("[4, 4]") + kTransformer + m.strategy + kTimingNoTrace));
    EXPECT_EQ(s["active_chips"], 16);
    EXPECT_DOUBLE_EQ(s["model_flops"].get<double>(), transformer_model_flops());
    expect_utilization(s);
    hardware.push_back(s["hardware_flops"].get<double>());
  }
  EXPECT_DOUBLE_EQ(hardware[0], transformer_model_flops());
  EXPECT_GT(hardware[3], hardware[0]);
}

// GPipe's re-materialization recomputes the forward pass before the backward: the MXUs execute more (HFU), the
// model does not (model FLOPs). Two MLP stages: without remat every matmul runs once on one chip, so the hardware
// FLOPs are the model's; with it every forward matmul runs twice (each one's output, or the activation computed
// from it, is read by the backward pass).
TEST(FiguresTest, PipelineRematMovesHardwareFlopsNotModelFlops) {
  const std::string base = hw("[2, 1]") + kMlp + kTimingNoTrace + "strategy: {name: pipeline, micro_batches: 2, remat: ";
  const json plain = summary(run("plain", base + "false}\n"));
  const json remat = summary(run("remat", base + "true}\n"));
  EXPECT_DOUBLE_EQ(plain["model_flops"].get<double>(), mlp_model_flops());
  EXPECT_DOUBLE_EQ(remat["model_flops"].get<double>(), mlp_model_flops());
  EXPECT_DOUBLE_EQ(plain["hardware_flops"].get<double>(), mlp_model_flops());
  EXPECT_DOUBLE_EQ(remat["hardware_flops"].get<double>(), mlp_model_flops() + mlp_forward_flops());
  EXPECT_EQ(plain["hfu"], plain["mfu"]);
  EXPECT_GT(remat["hfu"].get<double>(), remat["mfu"].get<double>());
  expect_utilization(plain);
  expect_utilization(remat);
}

// samples_per_s = global batch / step time, from the run's own batch (16) and step time.
TEST(FiguresTest, SamplesPerSecond) {
  std::string console;
  const std::string dir = run("mlp", hw("[2, 1]") + kMlp + "strategy: {name: data_parallel}\n" + kTimingNoTrace, &console);
  const json s = summary(dir);
  const double T = s["step_time_s"];
  ASSERT_GT(T, 0);
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 16 / T);
  EXPECT_FALSE(s.contains("tokens_per_s")) << "an MLP has no sequence";
  EXPECT_NE(console.find("throughput    " + podsim::format_count(16 / T) + " samples/s\n"), std::string::npos) << console;
  CliResult r = run_podsim({"report", dir, "--no-plots"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(podsim::format_count(16 / T) + " samples/s\n"), std::string::npos) << r.out;
}

// tokens_per_s = global batch x sequence length / step time: 16 sequences of 16 tokens.
TEST(FiguresTest, TokensPerSecond) {
  std::string console;
  const std::string dir = run("transformer", hw("[1, 1]") + kTransformer + kTimingNoTrace, &console);
  const json s = summary(dir);
  const double T = s["step_time_s"];
  ASSERT_GT(T, 0);
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 16 / T);
  EXPECT_DOUBLE_EQ(s["tokens_per_s"].get<double>(), 16 * 16 / T);
  const std::string line = podsim::format_count(16 / T) + " samples/s, " + podsim::format_count(256 / T) + " tokens/s";
  EXPECT_NE(console.find(line), std::string::npos) << console;
  CliResult r = run_podsim({"report", dir, "--no-plots"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
}

// Microbenchmarks have no batch: no throughput figure at all (not a zero), and no model FLOPs.
TEST(FiguresTest, NoThroughputWithoutABatch) {
  const std::string runs[] = {
      hw("[2, 2]") + "workload: {model: collective, op: all_reduce, bytes: 64KiB}\n",
      hw("[1, 1]") + "workload: {model: memory, pattern: read, bytes: 1MiB}\n",
      hw("[2, 2]") + "workload: {model: traffic, pattern: uniform, rate: 0.1, message: 1KiB, duration: 2us}\n",
  };
  int i = 0;
  for (const std::string& yaml : runs) {
    std::string console;
    const json s = summary(run("bench" + std::to_string(i++), yaml + kTimingNoTrace, &console));
    SCOPED_TRACE(s["workload"].get<std::string>());
    EXPECT_FALSE(s.contains("samples_per_s"));
    EXPECT_FALSE(s.contains("tokens_per_s"));
    EXPECT_EQ(s["model_flops"], 0.0);
    EXPECT_EQ(console.find("throughput"), std::string::npos) << console;
  }
}

// A sweep's results.db and CSV export carry the throughput of each run as its summary.json gives it.
TEST(FiguresTest, SweepColumnsCarryThroughput) {
  const std::string file = write_file("sw.yaml", "name: sw\nbase:\n  hardware: {preset: tpu-v3}\n  workload:\n"
                                                 "    model: transformer\n    layers: 1\n    d_model: 32\n"
                                                 "    d_ff: 64\n    heads: 2\n    vocab: 64\n    seq_len: 8\n"
                                                 "    batch: 4\n  run: {trace: {format: \"off\"}}\n"
                                                 "grid:\n  workload.batch: [4, 8]\n");
  CliResult r = run_podsim({"sweep", file, "-j", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string dir = test_dir() + "/results/sw";
  const auto rows = db_rows(dir + "/results.db");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const json s = summary(dir + "/runs/" + row.at("name"));
    const double batch = std::stod(row.at("workload.batch")), T = s["step_time_s"];
    EXPECT_EQ(std::stod(row.at("samples_per_s")), batch / T);
    EXPECT_EQ(std::stod(row.at("tokens_per_s")), batch * 8 / T);
    EXPECT_EQ(std::stod(row.at("hfu")), s["hfu"].get<double>());
  }
  CliResult csv = run_podsim({"sweep", "export", dir, "--csv"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  const std::string header = csv.out.substr(0, csv.out.find('\r'));
  for (const char* c : {",hfu,", ",samples_per_s,", ",tokens_per_s,"})
    EXPECT_NE(header.find(c), std::string::npos) << c << "\n" << header;
}

// In a pipeline the first stage's receives of the second stage's gradients are issued early and wait for it: by
// span they would head the table. Ranked by busy time (a unit worked for the op) they fall below the matmuls, and
// their waiting shows apart; busy + wait is each op's span.
TEST(FiguresTest, WaitingReceiveRanksBelowCompute) {
  std::string console;
  const std::string dir = run("pipe", hw("[2, 1]") + kTransformer + kTimingNoTrace +
                                          "strategy: {name: pipeline, micro_batches: 2}\n", &console);
  const json s = summary(dir);
  const json& ops = s["ops"];
  const json* recv = nullptr;
  double longest_compute = 0, least_busy_matmul = 1e9;
  for (const json& op : ops) {
    const double busy = op["busy_s"], wait = op["wait_s"];
    EXPECT_GE(busy, 0) << op["name"];
    EXPECT_GE(wait, 0) << op["name"];
    EXPECT_NEAR(busy + wait, wall_s(op), 1e-12) << op["name"];
    if (op["kind"] == "recv" && (!recv || wall_s(op) > wall_s(*recv))) recv = &op;
    if (op["unit"] != "ICI") longest_compute = std::max(longest_compute, wall_s(op));
    if (op["unit"] == "MXU") least_busy_matmul = std::min(least_busy_matmul, op["busy_s"].get<double>());
  }
  ASSERT_NE(recv, nullptr) << "the first stage receives gradients";
  const std::string name = (*recv)["name"];
  // By span it would come first; most of it is waiting for the other stage.
  EXPECT_GT(wall_s(*recv), longest_compute) << name;
  EXPECT_GT((*recv)["wait_s"].get<double>(), longest_compute) << name;
  EXPECT_LT((*recv)["busy_s"].get<double>(), least_busy_matmul) << name;

  // The console's and the report's top ops: ranked by busy time, the waiting receive not among them, each row's
  // wait beside its busy time.
  double most_busy = -1;
  std::string busiest;
  for (const json& op : ops)
    if (op["busy_s"].get<double>() > most_busy) most_busy = op["busy_s"], busiest = op["name"];
  const size_t top = console.find("top ops by busy time");
  ASSERT_NE(top, std::string::npos) << console;
  const std::string first = console.substr(top, console.find('\n', console.find('\n', top) + 1) - top);
  EXPECT_NE(first.find(busiest), std::string::npos) << first;
  EXPECT_NE(first.find("wait"), std::string::npos) << first;
  EXPECT_EQ(console.find(name), std::string::npos) << console;
  CliResult r = run_podsim({"report", dir, "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t table = r.out.find("top ops by busy time");
  ASSERT_NE(table, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wait", table), std::string::npos);
  const size_t row = r.out.find('\n', table) + 1;
  EXPECT_EQ(r.out.compare(row, 2 + std::min<size_t>(busiest.size(), 33), "  " + busiest.substr(0, 33)), 0) << r.out;
  EXPECT_EQ(r.out.find(name.substr(0, 33), table), std::string::npos) << r.out;
}

namespace {

struct Exposure {
  double exposed = 0, communication = 0;
};

// Exposed communication as docs/report.md defines it, from a chip's op table: the time its communication ops
// (ICI) run while none of its compute ops does, the union of every op's span but the receives' (a receive waits
// for its peer) less the union of the compute ops' spans. Also the union of the communication spans alone.
Exposure exposure(const json& ops) {
  std::vector<std::pair<double, double>> compute, communication, all;
  for (const json& op : ops) {
    if (op["kind"] == "recv") continue;
    const std::pair<double, double> span{op["start_ns"].get<double>() * 1e-9, op["end_ns"].get<double>() * 1e-9};
    (op["unit"] == "ICI" ? communication : compute).push_back(span);
    all.push_back(span);
  }
  return {union_s(all) - union_s(compute), union_s(communication)};
}

}  // namespace

// summary.json's communication.exposed_s and exposed_fraction against their definition, recomputed from the op
// table, on steps whose answer is known: an all-reduce alone (nothing to hide it: all of it is exposed, the whole
// step), a matmul alone (no communication), and a data-parallel MLP on 4 chips (one role: the result chip's figure
// is the average) with one all-reduce per gradient (run.combine_threshold 0), where the gradients' all-reduces
// overlap the backward pass but the last ones cannot: some communication exposed, less than all of it.
TEST(FiguresTest, ExposedCommunicationIsCommunicationWhileNoComputeRuns) {
  const std::string quiet = "run: {trace: {format: \"off\"}}\n";
  const json ar = summary(run("exposed-ar", hw("[2, 2]") +
                                                "workload: {model: collective, op: all_reduce, bytes: 4MiB}\n" + quiet));
  const double T_ar = ar["step_time_s"];
  ASSERT_GT(T_ar, 0);
  EXPECT_NEAR(ar["communication"]["exposed_s"].get<double>(), exposure(ar["ops"]).exposed, 1e-11);
  EXPECT_NEAR(ar["communication"]["exposed_s"].get<double>(), T_ar, 1e-11);
  EXPECT_DOUBLE_EQ(ar["communication"]["exposed_fraction"].get<double>(), 1);

  const json mm = summary(run("exposed-mm", hw("[1, 1]") + "workload: {model: matmul, m: 256, k: 256, n: 256}\n" + quiet));
  EXPECT_EQ(mm["communication"]["exposed_s"].get<double>(), 0);
  EXPECT_EQ(mm["communication"]["exposed_fraction"].get<double>(), 0);

  const json dp = summary(run("exposed-dp", hw("[2, 2]") + kMlp + "strategy: {name: data_parallel}\n" +
                                                "run: {numeric: false, combine_threshold: 0B, trace: {format: \"off\"}}\n"));
  const double T = dp["step_time_s"];
  const Exposure e = exposure(dp["ops"]);
  ASSERT_GT(e.communication, e.exposed) << "the test needs communication that the backward pass hides";
  EXPECT_GT(e.exposed, 0);
  EXPECT_NEAR(dp["communication"]["exposed_s"].get<double>(), e.exposed, 1e-11 * static_cast<double>(dp["ops"].size()));
  EXPECT_NEAR(dp["communication"]["exposed_fraction"].get<double>(), e.exposed / T, 5e-7);
}
