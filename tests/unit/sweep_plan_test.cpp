// Sweep files expanded into runs: grid, zip and explicit run lists, their order, run-name templates, the resolved
// configuration of each run, and every error located in the sweep file (file:line:column).
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sim/config/loader.h"
#include "sim/sweep/plan.h"

using namespace podsim;
namespace fs = std::filesystem;

namespace {

std::string dir() {
  static std::string d = [] {
    std::string p = fs::temp_directory_path().string() + "/podsim-sweep-plan-" + std::to_string(getpid());
    fs::create_directories(p);
    return p;
  }();
  // Removed when the test process ends (each test runs in a process of its own). Registered once `d` is made, so
  // that the handler runs before `d` is destroyed.
  static const bool removed_at_exit = [] {
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(dir(), ec);
    });
    return true;
  }();
  (void)removed_at_exit;
  return d;
}

std::string write(const std::string& name, const std::string& text) {
  std::string p = dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

SweepPlan plan(const std::string& text) { return plan_sweep(load_sweep_file(write("s.yaml", text))); }

const std::string kMatmul =
    "base:\n"
    "  hardware: {preset: tpu-v3}\n"
    "  workload: {model: matmul, m: 64, k: 64, n: 64}\n";

std::vector<std::string> names(const SweepPlan& p) {
  std::vector<std::string> n;
  for (const auto& r : p.runs) n.push_back(r.name);
  return n;
}

// The plan fails with `err` at s.yaml:line:col (0: any) and a message containing `needle`.
void expect_error(const std::string& text, Err err, int line, int col, const std::string& needle) {
  try {
    plan(text);
    ADD_FAILURE() << "planned, but should have failed:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(err).id) << e.what();
    EXPECT_EQ(e.where().file, dir() + "/s.yaml") << e.what();
    if (line) {
      EXPECT_EQ(e.where().line, line) << e.what();
    }
    if (col) {
      EXPECT_EQ(e.where().column, col) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(SweepPlanTest, GridIsTheCartesianProductFirstAxisSlowest) {
  SweepPlan p = plan(kMatmul + "grid:\n  workload.m: [64, 128, 256]\n  hardware.preset: [tpu-v3, tpu-v4]\n");
  // Written out by hand: m varies slowest.
  EXPECT_EQ(names(p), (std::vector<std::string>{"64-tpu-v3", "64-tpu-v4", "128-tpu-v3", "128-tpu-v4", "256-tpu-v3",
                                                "256-tpu-v4"}));
  EXPECT_EQ(p.param_columns, (std::vector<std::string>{"workload.m", "hardware.preset"}));
  EXPECT_EQ(std::get<int64_t>(p.runs[3].params[0]), 128);
  EXPECT_EQ(std::get<std::string>(p.runs[3].params[1]), "tpu-v4");
  for (size_t i = 0; i < p.runs.size(); ++i) EXPECT_EQ(p.runs[i].index, i);
}

TEST(SweepPlanTest, ZipAdvancesItsListsTogetherAndGroupsAreAxes) {
  SweepPlan p = plan(kMatmul +
                     "zip:\n"
                     "  - {workload.m: [64, 128], workload.k: [256, 512]}\n"
                     "  - {workload.n: [32, 96, 160]}\n"
                     "run_name: \"m{workload.m}k{workload.k}n{workload.n}\"\n");
  EXPECT_EQ(names(p), (std::vector<std::string>{"m64k256n32", "m64k256n96", "m64k256n160", "m128k512n32",
                                                "m128k512n96", "m128k512n160"}));
  // A single group may be written as a plain mapping.
  SweepPlan q = plan(kMatmul + "zip:\n  workload.m: [64, 128]\n  workload.k: [256, 512]\n");
  EXPECT_EQ(names(q), (std::vector<std::string>{"64-256", "128-512"}));
}

// {key.path:+TEXT} marks the runs that set a boolean option, also in a sweep whose other runs lack it.
TEST(SweepPlanTest, ConditionalPlaceholderMarksRunsWithAnOptionSet) {
  SweepPlan p = plan("base:\n  hardware: {preset: tpu-v3, pod: {dims: [2, 1]}}\n"
                     "  workload: {model: mlp, batch: 8, input: 16, hidden: 16, layers: 1, classes: 4}\n"
                     "runs:\n"
                     "  - {strategy.name: data_parallel}\n"
                     "  - {strategy.name: data_parallel, strategy.weight_update_sharding: true}\n"
                     "  - {strategy.name: data_parallel, strategy.weight_update_sharding: false}\n"
                     "  - {strategy.name: spmd}\n"
                     "run_name: \"{index}-{strategy.name}{strategy.weight_update_sharding:+-wus}\"\n");
  EXPECT_EQ(names(p), (std::vector<std::string>{"0-data_parallel", "1-data_parallel-wus", "2-data_parallel",
                                                "3-spmd"}));
  expect_error(kMatmul + "run_name: \"{:+x}\"\n", Err::SweepTemplate, 4, 11, "names no parameter before ':+'");
}

TEST(SweepPlanTest, RunListsSetTheirOwnKeysAndMappingsAreFlattened) {
  SweepPlan p = plan(kMatmul +
                     "grid:\n  workload.m: [64, 128]\n"
                     "runs:\n"
                     "  - {}\n"
                     "  - hardware.chip.mxu: {rows: 64, cols: 32}\n"
                     "run_name: \"{index}-m{workload.m}-{hardware.chip.mxu.rows}x{hardware.chip.mxu.cols}\"\n");
  EXPECT_EQ(names(p), (std::vector<std::string>{"0-m64-128x128", "1-m64-64x32", "2-m128-128x128", "3-m128-64x32"}));
  EXPECT_EQ(p.param_columns,
            (std::vector<std::string>{"workload.m", "hardware.chip.mxu.rows", "hardware.chip.mxu.cols"}));
  // A run that does not set a swept key gets its resolved value (the tpu-v3 preset's 128), not NULL.
  EXPECT_EQ(std::get<int64_t>(p.runs[0].params[1]), 128);
  EXPECT_EQ(std::get<int64_t>(p.runs[1].params[2]), 32);
  // The swept values of each run, as the plan prints them.
  ASSERT_EQ(p.runs[1].swept.size(), 3u);
  EXPECT_EQ(p.runs[1].swept[1], (std::pair<std::string, std::string>{"hardware.chip.mxu.rows", "64"}));
}

TEST(SweepPlanTest, TemplatesRenderListsQuantitiesIndexAndSweep) {
  SweepPlan p = plan("name: demo\n"
                     "base:\n"
                     "  hardware: {preset: tpu-v3}\n"
                     "  workload: {model: collective, op: all_reduce, bytes: 1MiB}\n"
                     "grid:\n"
                     "  hardware.pod.dims: [[2, 2], [4, 2]]\n"
                     "  workload.bytes: [64KiB, 8MiB]\n"
                     "set: {run.trace.format: \"off\"}\n"
                     "runs: [{}, {}, {}, {}, {}, {}]\n"
                     "run_name: \"{sweep}/{index}:{hardware.pod.dims}_{workload.bytes}\"\n");
  ASSERT_EQ(p.runs.size(), 24u);
  // {index} is padded to the width of the last index (23); '/' and ':' are no folder-name characters.
  EXPECT_EQ(p.runs[0].name, "demo_00_2x2_64KiB");
  EXPECT_EQ(p.runs[23].name, "demo_23_4x2_8MiB");
  // Quantities go to results.db in SI units; lists as text.
  EXPECT_EQ(std::get<std::string>(p.runs[23].params[0]), "[4, 2]");
  EXPECT_DOUBLE_EQ(std::get<double>(p.runs[23].params[1]), 8.0 * 1024 * 1024);
  EXPECT_EQ(p.name, "demo");
}

TEST(SweepPlanTest, EachRunsConfigurationIsTheResolvedExperiment) {
  SweepPlan p = plan(kMatmul + "set:\n  run.seed: 7\ngrid:\n  workload.m: [96, 160]\n");
  ASSERT_EQ(p.runs.size(), 2u);
  Experiment e = load_experiment_text(p.runs[1].config, "cfg.yaml");
  EXPECT_EQ(e.params.i("workload.m"), 160);
  EXPECT_EQ(e.params.i("workload.k"), 64);
  EXPECT_EQ(e.run.seed, 7u);
  EXPECT_EQ(e.run.name, "160");
  EXPECT_EQ(e.hardware.chip.mxu.rows, 128);
  EXPECT_NE(p.runs[0].config_digest, p.runs[1].config_digest);
  // Comments and layout of the sweep file do not change a run's configuration (resume keys on it).
  SweepPlan q = plan("# a comment\n\n" + kMatmul + "set: {run.seed: 7}\ngrid:   {workload.m: [96, 160]}\n");
  EXPECT_EQ(p.runs[1].config_digest, q.runs[1].config_digest);
  EXPECT_EQ(config_digest("abc"), "e71fa2190541574b");  // FNV-1a 64 of "abc", from the published test vectors
}

TEST(SweepPlanTest, BaseFileIsRelativeToTheSweepFile) {
  fs::create_directories(dir() + "/exps");
  write("exps/mm.yaml", "hardware: {preset: tpu-v4}\nworkload: {model: matmul, m: 32, k: 32, n: 32}\n");
  SweepPlan p = plan("base: exps/mm.yaml\ngrid: {workload.n: [32, 64]}\n");
  ASSERT_EQ(p.runs.size(), 2u);
  Experiment e = load_experiment_text(p.runs[1].config, "cfg.yaml");
  EXPECT_EQ(e.hardware.preset, "tpu-v4");
  EXPECT_EQ(e.params.i("workload.n"), 64);
}

TEST(SweepPlanTest, ErrorsPointIntoTheSweepFile) {
  // A swept value out of range: at the value, naming the run.
  expect_error(kMatmul + "grid:\n  workload.m: [64, 0]\n", Err::OutOfRange, 5, 20, "run 1 of 2 (workload.m=0)");
  // An unknown swept key: at the key.
  expect_error(kMatmul + "grid:\n  workload.mm: [64]\n", Err::UnknownKey, 5, 3, "did you mean");
  // A problem in an inline base: at its line in the sweep file.
  expect_error("base:\n  hardware:\n    preset: tpu-v3\n  workload:\n    model: matmul\n    m: 64\n    k: 64\n"
               "    n: 64\n    dtpye: bf16\n",
               Err::UnknownKey, 9, 5, "'workload.dtpye'");
  expect_error("base:\n  hardware: {preset: tpu-v3}\n  workload: {model: matmul, m: 64, k: 64, n: 64.5}\n",
               Err::WrongType, 3, 0, "whole number");
  // A missing base file: at base:.
  expect_error("base: missing.yaml\n", Err::FileUnreadable, 1, 7, "missing.yaml");
  // The sweep file's own shape.
  expect_error(kMatmul + "grdi: {workload.m: [1]}\n", Err::UnknownKey, 4, 1, "did you mean 'grid'?");
  expect_error("grid: {workload.m: [1]}\n", Err::MissingKey, 0, 0, "'base'");
  expect_error(kMatmul + "grid:\n  workload.m: 64\n", Err::WrongType, 5, 15, "non-empty list");
  expect_error(kMatmul + "zip:\n  workload.m: [64, 128]\n  workload.k: [64]\n", Err::LengthMismatch, 6, 15,
               "'workload.k' has 1 values but 'workload.m' has 2");
  expect_error(kMatmul + "set: {workload.m: 32}\ngrid:\n  workload.m: [64]\n", Err::DuplicateKey, 6, 3,
               "already set by set");
  expect_error(kMatmul + "grid: {workload.m: [1]}\nruns: [{workload.m: 2}]\n", Err::DuplicateKey, 5, 9,
               "already set by grid");
  expect_error(kMatmul + "grid:\n  workload m: [64]\n", Err::WrongType, 5, 3, "not a key path");
  expect_error(kMatmul + "figures: {hbm: busy_fraction/hbm}\n", Err::WrongType, 4, 16, "JSON pointer");
  expect_error(kMatmul + "figures: {status: /mfu}\n", Err::WrongType, 4, 11, "not one of");
  expect_error(kMatmul + "grid: {workload.m: [64, 128]}\nrun_name: \"{workload.n}\"\n", Err::SweepDuplicateName, 5,
               11, "runs 0 and 1 are both named '64'");
  expect_error(kMatmul + "grid: {workload.m: [64]}\nrun_name: \"{workload.mm}\"\n", Err::SweepTemplate, 5, 11,
               "did you mean '{workload.m}'?");
  expect_error(kMatmul + "run_name: \"{workload.m\"\n", Err::SweepTemplate, 4, 11, "without its '}'");
  expect_error(kMatmul + "grid: {workload.m: [64]}\ngrid: {workload.k: [64]}\n", Err::DuplicateKey, 5, 1,
               "duplicated key 'grid'");
  expect_error(kMatmul + "grid: {workload.m: [64\n", Err::YamlSyntax, 0, 0, "YAML syntax error");
  // A key without its ':' is named at its own line (4), as in experiment files.
  expect_error(kMatmul + "grid\n  workload.m: [64]\n", Err::YamlSyntax, 4, 5,
               "line 4 ('grid') has no ':' after its key");
}

TEST(SweepPlanTest, ShippedSweepsPlan) {
  for (const auto& e : fs::directory_iterator(std::string(PODSIM_SOURCE_DIR) + "/configs/sweeps")) {
    SweepPlan p = plan_sweep(load_sweep_file(e.path().string()));
    EXPECT_GT(p.runs.size(), 1u) << e.path();
  }
}
