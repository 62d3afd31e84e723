// The error catalogue's entries of sweeps (SWP), inference steps (INF) and serving runs (SRV), one test each, as
// errors_test.cpp has the others: each provokes the error through the command line, as a user would, and asserts
// its id, its exit code and where it points.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"
#include "tests/cli/errors_util.h"

using namespace podsim;
using namespace podsim::test;

namespace {

const std::string kSweepBase = "base:\n  hardware: {preset: tpu-v3}\n  workload: {model: matmul, m: 64, k: 64, n: 64}\n"
                               "set: {run.trace.format: \"off\"}\n";

CliResult sweep_error(const std::vector<std::string>& args, const std::string& id) {
  auto r = run_podsim(args);
  EXPECT_EQ(r.code, exit_of(id)) << r.err;
  EXPECT_NE(r.err.find("error " + id + ":"), std::string::npos) << r.err;
  return r;
}

}  // namespace

TEST(ErrorsTest, SWP001_SweepTemplate) {
  std::string file = write_file("s.yaml", kSweepBase + "grid: {workload.m: [64]}\nrun_name: \"{workload.q}\"\n");
  auto r = sweep_error({"sweep", "plan", file}, "PODSIM-SWP-001");
  EXPECT_NE(r.err.find(file + ":6:11:"), std::string::npos) << r.err;
}

TEST(ErrorsTest, SWP002_SweepDuplicateName) {
  std::string file = write_file("s.yaml", kSweepBase + "grid: {workload.m: [64, 128]}\nrun_name: \"mm\"\n");
  auto r = sweep_error({"sweep", "plan", file}, "PODSIM-SWP-002");
  EXPECT_NE(r.err.find(file + ":6:11: error PODSIM-SWP-002: runs 0 and 1 are both named 'mm'"), std::string::npos)
      << r.err;
}

TEST(ErrorsTest, SWP003_SweepBusy) {
  // Another driver holds the sweep folder's lock.
  std::string file = write_file("s.yaml", kSweepBase);
  write_file("busy/sweep.json", "{}\n");
  int fd = open((test_dir() + "/busy/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  sweep_error({"sweep", file, "--out", "busy"}, "PODSIM-SWP-003");
  close(fd);
}

TEST(ErrorsTest, SWP004_NotASweepDir) {
  sweep_error({"sweep", "export", test_dir()}, "PODSIM-SWP-004");
  // A folder that holds something else is never written into.
  std::string file = write_file("s.yaml", kSweepBase);
  write_file("other/notes.txt", "mine\n");
  sweep_error({"sweep", file, "--out", "other"}, "PODSIM-SWP-004");
  EXPECT_EQ(read_file(test_dir() + "/other/notes.txt"), "mine\n");
}

TEST(ErrorsTest, SWP005_SlurmFailed) {
  // No Slurm tools on PATH.
  std::string file = write_file("s.yaml", kSweepBase);
  std::filesystem::create_directories(test_dir() + "/empty");
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (test_dir() + "/empty").c_str(), 1);
  auto r = run_podsim({"sweep", file, "--backend", "slurm", "--out", "sl"});
  setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("error PODSIM-SWP-005: 'scontrol show config' could not be run"), std::string::npos) << r.err;
}

TEST(ErrorsTest, SWP006_SweepQuery) {
  std::string file = write_file("s.yaml", kSweepBase + "grid: {workload.m: [64, 128]}\n");
  ASSERT_EQ(run_podsim({"sweep", file, "--out", "sw"}).code, 0);
  auto r = sweep_error({"sweep", "plot", "sw", "--x", "workload.mm", "--y", "mfu"}, "PODSIM-SWP-006");
  EXPECT_NE(r.err.find("--x 'workload.mm' is no column of results.db (did you mean 'workload.m'?)"), std::string::npos)
      << r.err;
  // Two runs at one x on one line: the message names what still differs and the --by that tells them apart, which
  // then draws (one line per combination of k and n).
  std::string grid = write_file("g.yaml", kSweepBase + "grid: {workload.m: [64, 128], workload.k: [64, 128], "
                                                       "workload.n: [64, 128]}\n");
  ASSERT_EQ(run_podsim({"sweep", grid, "--out", "g"}).code, 0);
  auto a = sweep_error({"sweep", "plot", "g", "--x", "workload.m", "--y", "step_time_s", "--by", "workload.k"},
                       "PODSIM-SWP-006");
  EXPECT_NE(a.err.find("on the line workload.k = 64; they differ in workload.n (64, 128): pick one with --where or "
                       "draw lines --by workload.k,workload.n\n"),
            std::string::npos)
      << a.err;
  auto ok =
      run_podsim({"sweep", "plot", "g", "--x", "workload.m", "--y", "step_time_s", "--by", "workload.k,workload.n"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(exists(test_dir() + "/g/plot_step_time_s_vs_workload.m_by_workload.k_workload.n.png")) << ok.out;
}

TEST(ErrorsTest, SWP007_RunsFailed) {
  // The second run does not fit a 16 KiB HBM; the first one is done all the same.
  std::string file = write_file("s.yaml", kSweepBase + "runs: [{}, {hardware.chip.hbm.capacity: 16KiB}]\nrun_name: \"r{index}\"\n");
  auto r = sweep_error({"sweep", file, "--out", "sw"}, "PODSIM-SWP-007");
  EXPECT_NE(r.err.find("1 of 2 runs failed"), std::string::npos) << r.err;
  EXPECT_TRUE(exists(test_dir() + "/sw/runs/r0/summary.json"));
}

// ---- inference steps ----------------------------------------------------------------------------------------------

namespace {
const std::string kTiny = "hardware:\n  preset: tpu-v5e\nworkload:\n  preset: llm-tiny\n";  // workload keys from line 5
}  // namespace

TEST(ErrorsTest, INF001_ContextTooLong) {
  // A decode's cached tokens and the new one past the context window, located at the context; a run writes nothing.
  auto r = expect_error(kTiny + "  step: decode\n  batch: 2\n  context_lengths: [10, 64]\n  max_context: 64\n",
                        "PODSIM-INF-001", 7, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-INF-001"));
  EXPECT_NE(r.err.find("sequence 1 holds 65 tokens (64 cached, 1 new), past the model's context of "
                       "workload.max_context = 64"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
  // A generate step counts the tokens it generates.
  auto g = expect_error(kTiny + "  step: generate\n  batch: 1\n  seq_len: 60\n  generate: 8\n  max_context: 64\n",
                        "PODSIM-INF-001", 7, 0);
  EXPECT_NE(g.err.find("8 generated"), std::string::npos) << g.err;
}

TEST(ErrorsTest, INF002_KvCacheTooSmall) {
  auto r = expect_error(kTiny + "  step: decode\n  batch: 2\n  context: 40\n  kv_capacity: 32\n", "PODSIM-INF-002",
                        8, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-INF-002"));
  EXPECT_NE(r.err.find("workload.kv_capacity = 32 places per sequence cannot hold sequence 0, which needs 41"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
  auto s = expect_error(kTiny + "  step: decode\n  batch: 2\n  context: 4\n  kv_sequences: 1\n", "PODSIM-INF-002", 8,
                        0);
  EXPECT_NE(s.err.find("give at least 2"), std::string::npos) << s.err;
}

TEST(ErrorsTest, INF003_NumberFormat) {
  // fp8 on a chip without it; int8 activations on weights of another type; int8 weights in a training step.
  auto r = expect_error(kTiny + "  step: decode\n  batch: 1\n  context: 4\n  weight_dtype: fp8\n", "PODSIM-INF-003",
                        8, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-INF-003"));
  EXPECT_NE(r.err.find("tpu-v5e has no fp8 mode on its MXU (hardware.chip.mxu.fp8_rate = 0)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
  auto a = expect_error(kTiny + "  step: decode\n  batch: 1\n  context: 4\n  activation_dtype: int8\n",
                        "PODSIM-INF-003", 8, 0);
  EXPECT_NE(a.err.find("set weight_dtype: int8"), std::string::npos) << a.err;
  auto t = expect_error(kTiny + "  batch: 1\n  weight_dtype: int8\n", "PODSIM-INF-003", 6, 0);
  EXPECT_NE(t.err.find("a training step updates its weights in bf16 or fp32"), std::string::npos) << t.err;
}

TEST(ErrorsTest, INF004_KvShardingSplit) {
  // 3 sequences over the 4 chips of the model axis; and a packed (ragged) iteration, whose one row cannot split.
  const std::string hw = "hardware:\n  preset: tpu-v5e\n  pod: {dims: [4, 1]}\nworkload:\n  preset: llm-tiny\n";
  auto r = expect_error(hw + "  step: decode\n  batch: 3\n  context: 4\nstrategy:\n  name: spmd\n  kv_sharding: batch\n",
                        "PODSIM-INF-004", 11, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-INF-004"));
  EXPECT_NE(r.err.find("splits the iteration's 3 sequences over the 4 devices of [model]"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
  auto p = expect_error(hw + "  step: prefill\n  batch: 4\n  prompt_lengths: [3, 5, 8, 2]\nstrategy:\n  name: spmd\n"
                             "  kv_sharding: batch\n",
                        "PODSIM-INF-004", 11, 0, {}, true);
  EXPECT_NE(p.err.find("packs its 4 sequences of unequal lengths into one row"), std::string::npos) << p.err;
}

// ---- serving runs ---------------------------------------------------------------------------------------------

TEST(ErrorsTest, SRV001_ServingLength) {
  // A request's input and output past the model's context, located at the lengths; nothing written.
  auto r = expect_error(kTiny + "  max_context: 64\nserving:\n  requests: {count: 2, input_tokens: 60, output_tokens: "
                                "10}\n",
                        "PODSIM-SRV-001", 7, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-SRV-001"));
  EXPECT_NE(r.err.find("request 0 holds 70 tokens (60 input, 10 output), past the model's context"), std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}

TEST(ErrorsTest, SRV002_ServingCache) {
  auto r = expect_error(kTiny + "  max_context: 64\nserving:\n  requests: {count: 1, input_tokens: 30, output_tokens: "
                                "10}\n  engine: {slot_tokens: 16}\n",
                        "PODSIM-SRV-002", 8, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-SRV-002"));
  EXPECT_NE(r.err.find("give at least 39"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}

TEST(ErrorsTest, SRV003_ServingTrace) {
  // An arrival before the line above's, located at its line of the trace.
  write_file("trace.csv", "arrival_s,input_tokens,output_tokens\n0.5,8,4\n0.25,8,4\n");
  const std::string file = write_file("exp.yaml", kTiny + "serving:\n  requests: {trace: trace.csv}\n");
  const CliResult r = run_podsim({"run", file, "--out", test_dir() + "/out"});
  EXPECT_EQ(r.code, exit_of("PODSIM-SRV-003"));
  EXPECT_NE(r.err.find("trace.csv:3: error PODSIM-SRV-003: request 1 arrives at 0.25 s, before the one on the line "
                       "above"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}

TEST(ErrorsTest, SRV004_ServingPolicy) {
  auto r = expect_error(kTiny + "serving:\n  requests: {count: 1, input_tokens: 3, output_tokens: 2}\n"
                                "  engine: {policy: speculative}\n",
                        "PODSIM-SRV-004", 7, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-SRV-004"));
  EXPECT_NE(r.err.find("unknown serving policy 'speculative'; one of: chunked, continuous, static"), std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}

TEST(ErrorsTest, SRV005_ServingPhases) {
  // A prefill layout under the chunked policy, whose iterations mix prefill chunks and decodes: at the policy.
  auto r = expect_error(kTiny + "serving:\n  requests: {count: 1, input_tokens: 3, output_tokens: 2}\n"
                                "  engine: {policy: chunked}\n  prefill:\n    strategy: {name: spmd}\n",
                        "PODSIM-SRV-005", 7, 0, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-SRV-005"));
  EXPECT_NE(r.err.find("Use the continuous or static policy, or drop serving.prefill"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}
