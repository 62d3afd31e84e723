// run.scheduler on a whole step (docs/model.md, "Issue order"): a Megatron MLP on two chips, whose backward makes
// each layer's weight gradient before its input gradient in program order, so the input gradient's all-reduce waits
// for both matmuls; under latency_hiding the input gradient goes first and its all-reduce runs while the weight
// gradients compute. The step's numbers do not change with the order.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kMlp =
    "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 1]}\n"
    "workload:\n  model: mlp\n  layers: 3\n  input: 4096\n  hidden: 4096\n  classes: 4096\n  batch: 4096\n"
    "  dtype: bf16\n"
    "strategy:\n  name: spmd\n  scheme: megatron\n"
    "run:\n  trace: {format: \"off\"}\n";

struct Span {
  double start = 0, end = 0;
};

struct StepOps {
  double step = 0;
  std::map<std::string, Span> ops;
};

StepOps run(const std::string& name, const std::vector<std::string>& set) {
  const std::string exp = write_file(name + ".yaml", kMlp);
  std::vector<std::string> args = {"run", exp, "--out", test_dir() + "/" + name, "-q"};
  for (const std::string& s : set) {
    args.push_back("--set");
    args.push_back(s);
  }
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
  StepOps out;
  out.step = j["step_time_s"].get<double>();
  for (const auto& o : j["ops"]) out.ops[o["name"].get<std::string>()] = {o["start_ns"], o["end_ns"]};
  return out;
}

}  // namespace

TEST(Scheduler, ProgramOrderIsTheDefault) {
  const StepOps d = run("default", {});
  const StepOps p = run("program", {"run.scheduler=program"});
  EXPECT_EQ(d.step, p.step);
  // In program order the second layer's weight gradient (out.dB) runs before fc2's input gradient on the MXU, and
  // the all-reduce of fc2's input gradient starts when that matmul ends.
  EXPECT_LE(p.ops.at("out.dB").end, p.ops.at("fc2.dA").start);
  EXPECT_DOUBLE_EQ(p.ops.at("fc2.dA/all_reduce[model]#2").start, p.ops.at("fc2.dA").end);
}

TEST(Scheduler, LatencyHidingStartsTheCollectiveBeforeTheWeightGradients) {
  const StepOps p = run("program", {"run.scheduler=program"});
  const StepOps l = run("lhs", {"run.scheduler=latency_hiding"});
  // fc2's input gradient now follows the fusion that makes its operand, ahead of out.dB, and its all-reduce starts
  // as it ends; out.dB and fc2's weight gradient run under the all-reduce.
  EXPECT_DOUBLE_EQ(l.ops.at("fc2.dA").start, l.ops.at("fusion(out.dA .. fc2.relu.dx)").end);
  const Span ar = l.ops.at("fc2.dA/all_reduce[model]#2");
  EXPECT_DOUBLE_EQ(ar.start, l.ops.at("fc2.dA").end);
  EXPECT_GE(l.ops.at("out.dB").start, ar.start);
  EXPECT_LE(l.ops.at("out.dB").end, ar.end);
  // By hand: the all-reduce starts earlier by out.dB's time in program order, and the rest of the backward pass
  // (fc1's and fc0's gradients, which wait for it) moves with it; what differs after that is only HBM shared with
  // the weight gradients (under 2 % of out.dB here).
  const double moved = p.ops.at("out.dB").end - p.ops.at("out.dB").start;
  EXPECT_NEAR(p.ops.at("fc2.dA/all_reduce[model]#2").start - ar.start, moved, 0.02 * moved);
  EXPECT_NEAR(p.step - l.step, moved * 1e-9, 0.05 * moved * 1e-9);
}

TEST(Scheduler, TheNumbersDoNotDependOnTheOrder) {
  for (const char* s : {"program", "latency_hiding"}) {
    const std::string exp = write_file(std::string(s) + "_n.yaml", kMlp);
    const CliResult r = run_podsim({"run", exp, "--out", test_dir() + "/n_" + s, "-q", "--set", "run.numeric=true",
                                    "--set", std::string("run.scheduler=") + s, "--set", "workload.batch=64",
                                    "--set", "workload.input=96", "--set", "workload.hidden=128", "--set",
                                    "workload.classes=32", "--set", "workload.dtype=fp32"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const CliResult c = run_podsim({"compare", test_dir() + "/n_program", test_dir() + "/n_latency_hiding"});
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
}
