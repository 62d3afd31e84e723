// `podsim run --memory-only`: the memory verdict without a simulation. Its figures are those of a full run of the
// same experiment (and of a hand count), it simulates nothing, and a step that does not fit fails as a full run
// does, leaving no folder behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

const std::string kPipeline = source_dir() + "/configs/examples/pipeline.yaml";  // 4 stages, shipped as is

json summary(const std::string& dir) { return json::parse(read_file(test_dir() + "/" + dir + "/summary.json")); }

const char* kCategories[] = {"weights", "gradients", "optimizer_state", "activations", "temporaries", "weight_copies"};

}  // namespace

// Per role: the same peak and the same bytes per category as the full run, exactly (both come from the lowered
// programs; the simulation must not change them), and the same verdict.
TEST(MemoryOnlyTest, FiguresEqualThoseOfAFullRun) {
  auto full = run_podsim({"run", kPipeline, "--out", "full", "-q"});
  ASSERT_EQ(full.code, 0) << full.err;
  auto mem = run_podsim({"run", kPipeline, "--out", "mem", "--memory-only"});
  ASSERT_EQ(mem.code, 0) << mem.err;
  const json f = summary("full"), m = summary("mem");
  ASSERT_EQ(m["roles"].size(), 4u);  // one per stage
  ASSERT_EQ(f["roles"].size(), m["roles"].size());
  for (size_t r = 0; r < f["roles"].size(); ++r) {
    const json &fr = f["roles"][r], &mr = m["roles"][r];
    EXPECT_EQ(mr["role"], fr["role"]);
    EXPECT_EQ(mr["chips"], fr["chips"]);
    EXPECT_EQ(mr["peak_memory_bytes"].get<double>(), fr["peak_memory_bytes"].get<double>()) << fr["role"];
    for (const char* c : kCategories)
      EXPECT_EQ(mr["memory_at_peak"][c].get<double>(), fr["memory_at_peak"][c].get<double>()) << fr["role"] << c;
    EXPECT_EQ(mr["fits"], fr["fits"]);
  }
  EXPECT_EQ(m["memory"], f["memory"]);
  EXPECT_EQ(m["peak_memory_bytes"], f["peak_memory_bytes"]);
  ASSERT_TRUE(m.contains("parameters"));  // counted from the graph, as the full run counts them
  EXPECT_EQ(m["parameters"], f["parameters"]);
  EXPECT_GT(m["parameters"].get<int64_t>(), 0);
  EXPECT_TRUE(m["memory"]["fits"].get<bool>());
  // The stages differ (the first holds the embedding, the last the head), so equal figures are not one figure
  // copied four times.
  EXPECT_NE(m["roles"][0]["peak_memory_bytes"], m["roles"][1]["peak_memory_bytes"]);
  EXPECT_NE(mem.out.find("memory only: not simulated"), std::string::npos) << mem.out;
}

// A 256 x 512 by 512 x 384 bf16 matmul on one chip: a (256 KiB) and b (384 KiB) are live when it writes c
// (192 KiB); b is the weight, a and c activations.
TEST(MemoryOnlyTest, MatmulPeakIsTheHandCount) {
  std::string exp = write_file("mm.yaml", "hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 256\n"
                                          "  k: 512\n  n: 384\n");
  auto r = run_podsim({"run", exp, "--out", "mm", "--memory-only", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = summary("mm");
  const double a = 256 * 512 * 2, b = 512 * 384 * 2, c = 256 * 384 * 2;
  EXPECT_EQ(s["memory"]["peak_bytes"].get<double>(), a + b + c);
  EXPECT_EQ(s["memory"]["at_peak"]["weights"].get<double>(), b);
  EXPECT_EQ(s["memory"]["at_peak"]["activations"].get<double>(), a + c);
  EXPECT_EQ(s["roles"][0]["peak_memory_bytes"].get<double>(), a + b + c);
  EXPECT_FALSE(s.contains("parameters"));  // a microbenchmark's operands are no model's
}

// Nothing simulated: no step time or per-op timing in summary.json, host.json says so and has no simulation wall
// time, no trace is written.
TEST(MemoryOnlyTest, RunsNoSimulation) {
  auto r = run_podsim({"run", kPipeline, "--out", "mem", "--memory-only", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = summary("mem");
  EXPECT_FALSE(s["simulated"].get<bool>());
  for (const char* k : {"step_time_s", "cycles", "mfu", "busy_fraction", "ops", "timeline", "time_breakdown"})
    EXPECT_FALSE(s.contains(k)) << k;
  for (const auto& role : s["roles"]) EXPECT_FALSE(role.contains("compute_s"));
  EXPECT_EQ(s["pipeline"]["stages"], 4);
  EXPECT_FALSE(s["pipeline"].contains("bubble_fraction"));  // measured only by a simulation
  const json h = json::parse(read_file(test_dir() + "/mem/host.json"));
  EXPECT_FALSE(h["simulated"].get<bool>());
  EXPECT_FALSE(h.contains("wall_s"));
  EXPECT_FALSE(h.contains("activations"));
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(test_dir() + "/mem")) files.insert(e.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{"config.resolved.yaml", "host.json", "summary.json"}));
  // A full run says it was simulated.
  auto full = run_podsim({"run", kPipeline, "--out", "full", "-q"});
  ASSERT_EQ(full.code, 0) << full.err;
  EXPECT_TRUE(summary("full")["simulated"].get<bool>());
  EXPECT_TRUE(json::parse(read_file(test_dir() + "/full/host.json"))["simulated"].get<bool>());
  // `podsim report` shows the memory tables of such a folder and draws no plot.
  auto rep = run_podsim({"report", test_dir() + "/mem"});
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.out.find("not simulated"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("stage3"), std::string::npos) << rep.out;
  EXPECT_EQ(rep.out.find("wrote"), std::string::npos) << rep.out;
}

// A step that does not fit: PODSIM-MEM-001 as in a full run, and no folder (not even a hidden partial one). With
// run.allow_oom it is reported instead: fits false, exit 0.
TEST(MemoryOnlyTest, StepThatDoesNotFitFailsAndLeavesNoFolder) {
  std::string exp = write_file("big.yaml", "hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 65536\n"
                                           "  k: 65536\n  n: 65536\n  dtype: fp32\n");
  auto full = run_podsim({"run", exp, "--out", "full"});
  auto r = run_podsim({"run", exp, "--out", "out", "--memory-only"});
  EXPECT_EQ(r.code, full.code);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("PODSIM-MEM-001"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peaks at 48.00 GiB"), std::string::npos) << r.err;  // 3 x 65536^2 fp32 values
  for (const auto& e : std::filesystem::directory_iterator(test_dir()))
    EXPECT_EQ(e.path().filename().string().find("out"), std::string::npos) << e.path();

  auto oom = run_podsim({"run", exp, "--out", "oom", "--memory-only", "-q", "--set", "run.allow_oom=true"});
  ASSERT_EQ(oom.code, 0) << oom.err;
  const json s = summary("oom");
  EXPECT_FALSE(s["memory"]["fits"].get<bool>());
  EXPECT_FALSE(s["roles"][0]["fits"].get<bool>());
  EXPECT_EQ(s["memory"]["peak_bytes"].get<double>(), 3.0 * 65536.0 * 65536.0 * 4.0);
}

TEST(MemoryOnlyTest, HelpNamesTheFlag) {
  auto h = run_podsim({"run", "--help"});
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--memory-only"), std::string::npos) << h.out;
}

// The console's "peak memory" is the result chip's; when another role peaks higher (the last stage of the shipped
// pipeline holds the head), the console names that role with its summary.json figure. One role: no such line.
TEST(MemoryOnlyTest, ConsoleNamesTheHeaviestRoleOfAFullRun) {
  auto full = run_podsim({"run", kPipeline, "--out", "full"});
  ASSERT_EQ(full.code, 0) << full.err;
  const json s = summary("full");
  const json* heaviest = nullptr;
  for (const auto& r : s["roles"])
    if (!heaviest || r["peak_memory_bytes"].get<double>() > (*heaviest)["peak_memory_bytes"].get<double>())
      heaviest = &r;
  ASSERT_NE(heaviest, nullptr);
  ASSERT_GT((*heaviest)["peak_memory_bytes"].get<double>(), s["peak_memory_bytes"].get<double>());
  EXPECT_NE(full.out.find("heaviest role " + (*heaviest)["role"].get<std::string>() + ": "), std::string::npos)
      << full.out;

  std::string exp = write_file("one.yaml", "hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 256\n"
                                           "  k: 512\n  n: 384\n");
  auto one = run_podsim({"run", exp, "--out", "one"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(one.out.find("heaviest role"), std::string::npos) << one.out;
}
