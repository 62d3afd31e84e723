// The command line end to end: subcommands, exit codes, the resolved experiment, run folders.
#include <gtest/gtest.h>

#include <cstdlib>
#include "tests/test_paths.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kMatmul = "hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 256\n  k: 512\n  n: 384\n";

}  // namespace

TEST(CliTest, VersionAndHelp) {
  auto v = run_podsim({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("podsim 0."), std::string::npos) << v.out;
  auto h = run_podsim({"--help"});
  EXPECT_EQ(h.code, 0);
  // Every subcommand is listed, each on its own line, the docs' `podsim docs` included; and each has its help.
  for (const char* cmd : {"run", "validate", "list", "report", "compare", "sweep", "docs"}) {
    EXPECT_NE(h.out.find(std::string("\n  ") + cmd + " "), std::string::npos) << cmd << " missing in:\n" << h.out;
    EXPECT_EQ(run_podsim({cmd, "--help"}).code, 0) << cmd;
  }
  auto hr = run_podsim({"run", "--help"});
  EXPECT_EQ(hr.code, 0);
  EXPECT_NE(hr.out.find("--set"), std::string::npos);
  EXPECT_NE(hr.out.find("--force"), std::string::npos);
}

TEST(CliTest, UsageErrorExitsTwo) {
  auto r = run_podsim({"run"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("PODSIM-CLI-001"), std::string::npos) << r.err;
  auto l = run_podsim({"list", "hardwares"});
  EXPECT_EQ(l.code, 2);
}

TEST(CliTest, ListHardwareShowsTheSixPresets) {
  auto r = run_podsim({"list", "hardware"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* p : {"tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"})
    EXPECT_NE(r.out.find(std::string("  ") + p + " "), std::string::npos) << p << "\n" << r.out;
}

TEST(CliTest, ListWithoutArgumentSaysWhatCanBeListed) {
  auto r = run_podsim({"list"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* what : {"hardware", "workloads", "strategies", "collectives", "params", "errors"}) {
    EXPECT_NE(r.out.find(std::string("  ") + what + " "), std::string::npos) << what << "\n" << r.out;
    EXPECT_EQ(run_podsim({"list", what}).code, 0) << what;  // and each of them works
  }
}

TEST(CliTest, ListHardwareAlignsTheDescriptions) {
  auto r = run_podsim({"list", "hardware"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<size_t> columns;
  for (size_t at = r.out.find("TPU v"); at != std::string::npos; at = r.out.find("TPU v", at + 1))
    columns.insert(at - r.out.rfind('\n', at));
  EXPECT_EQ(columns.size(), 1u) << r.out;
}

// The run summary prints the clock with its decimals: 1.05 GHz on TPU v4, 1.5 GHz on v5e.
TEST(CliTest, RunPrintsClockRatesWithTheirDecimals) {
  for (auto [preset, clock] : {std::pair<std::string, std::string>{"tpu-v4", "1.05 GHz"}, {"tpu-v5e", "1.5 GHz"}}) {
    std::string exp = write_file(preset + ".yaml", "hardware:\n  preset: " + preset +
                                                       "\nworkload:\n  model: matmul\n  m: 128\n  k: 128\n  n: 128\n");
    auto r = run_podsim({"run", exp, "--out", preset});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("cycles at " + clock + ")"), std::string::npos) << r.out;
  }
}

TEST(CliTest, ListOtherRegistries) {
  auto w = run_podsim({"list", "workloads"});
  ASSERT_EQ(w.code, 0);
  for (const char* n : {"matmul", "mlp", "transformer", "collective", "traffic"})
    EXPECT_NE(w.out.find(n), std::string::npos) << n;
  // The model presets, each with the count podsim builds and its source.
  for (const char* n : {"gpt3-175b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "palm-540b",
                        "llm-tiny"})
    EXPECT_NE(w.out.find(std::string("  ") + n + " "), std::string::npos) << n << "\n" << w.out;
  EXPECT_NE(w.out.find("540.36B parameters; source: Chowdhery et al. 2022, PaLM (arXiv:2204.02311), Table 1"),
            std::string::npos) << w.out;
  EXPECT_NE(w.out.find("106816 parameters"), std::string::npos) << w.out;
  auto s = run_podsim({"list", "strategies"});
  EXPECT_NE(s.out.find("single_device"), std::string::npos);
  auto c = run_podsim({"list", "collectives"});
  EXPECT_NE(c.out.find("torus"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("all_reduce (default)"), std::string::npos) << c.out;
  auto p = run_podsim({"list", "params", "--workload", "matmul"});
  EXPECT_NE(p.out.find("hardware.chip.mxu.weight_double_buffer"), std::string::npos);
  EXPECT_NE(p.out.find("workload.m "), std::string::npos);
  auto e = run_podsim({"list", "errors"});
  EXPECT_NE(e.out.find("PODSIM-CFG-002  unknown key"), std::string::npos);
}

TEST(CliTest, ValidatePrintsTheResolvedExperiment) {
  auto r = run_podsim({"validate", source_dir() + "/configs/quickstart.yaml"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("preset: \"tpu-v3\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clock: 940MHz"), std::string::npos);
  EXPECT_NE(r.out.find("tpu-v3.yaml:"), std::string::npos);  // origins
  EXPECT_NE(r.out.find("weight_double_buffer: true"), std::string::npos);
  auto quiet = run_podsim({"validate", "--no-origins", source_dir() + "/configs/quickstart.yaml"});
  EXPECT_EQ(quiet.out.find("#  "), std::string::npos);
}

TEST(CliTest, MisspelledKeyFailsWithLineAndSuggestion) {
  std::string text = read_file(source_dir() + "/configs/quickstart.yaml");
  auto pos = text.find("  heads:");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 8, "  haeds:");
  int line = 1;
  for (size_t i = 0; i < pos; ++i) line += text[i] == '\n';
  std::string file = write_file("typo.yaml", text);
  auto r = run_podsim({"validate", file});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ":" + std::to_string(line) + ":3: error PODSIM-CFG-002"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'heads'?"), std::string::npos) << r.err;
}

// The issue as a user met it: `mdoel: transformer` in the quickstart, and a second typo further down. Both are
// reported, each at its own line, the misspelled model with its suggestion and not as a missing key.
TEST(CliTest, EveryErrorOfAFileAtItsOwnLine) {
  std::string text = read_file(source_dir() + "/configs/quickstart.yaml");
  auto line_of = [&](size_t pos) {
    int line = 1;
    for (size_t i = 0; i < pos; ++i) line += text[i] == '\n';
    return line;
  };
  auto model = text.find("  model: transformer");
  auto numeric = text.find("  numeric: false");
  ASSERT_NE(model, std::string::npos);
  ASSERT_NE(numeric, std::string::npos);
  text.replace(model, 8, "  mdoel:");
  text.replace(numeric, 10, "  numerci:");
  std::string file = write_file("typos.yaml", text);
  auto r = run_podsim({"run", file, "--out", "o"});
  EXPECT_EQ(r.code, 2);
  std::string first = file + ":" + std::to_string(line_of(model)) + ":3: error PODSIM-CFG-002: unknown key " +
                      "'workload.mdoel' (did you mean 'model'?)\n";
  std::string second = file + ":" + std::to_string(line_of(numeric)) + ":3: error PODSIM-CFG-002: unknown key " +
                       "'run.numerci' (did you mean 'numeric'?)\n";
  EXPECT_EQ(r.err, first + second);
  EXPECT_FALSE(exists(test_dir() + "/o"));
}

TEST(CliTest, RunWritesItsFolder) {
  std::string exp = write_file("mm.yaml", kMatmul);
  auto r = run_podsim({"run", exp, "--out", "out"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos);
  EXPECT_NE(r.out.find("MFU"), std::string::npos);
  EXPECT_NE(r.out.find("peak memory"), std::string::npos);
  for (const char* f : {"summary.json", "config.resolved.yaml", "host.json"})
    EXPECT_TRUE(exists(test_dir() + "/out/" + f)) << f;
  auto s = nlohmann::json::parse(read_file(test_dir() + "/out/summary.json"));
  for (const char* k : {"step_time_s", "cycles", "flops", "mfu", "busy_fraction", "hbm", "peak_memory_bytes", "ops"})
    EXPECT_TRUE(s.contains(k)) << k;
  for (const char* k : {"name", "kind", "unit", "cycles", "start_ns", "end_ns", "flops", "bytes"})
    EXPECT_TRUE(s["ops"][0].contains(k)) << k;
  // The resolved experiment reruns to the same summary.
  auto again = run_podsim({"run", test_dir() + "/out/config.resolved.yaml", "--out", "again"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(read_file(test_dir() + "/again/summary.json"), read_file(test_dir() + "/out/summary.json"));
}

// The podsim command asks glibc for a heap on transparent huge pages, kept when free (it sets GLIBC_TUNABLES and
// runs itself again, sim/cli/main.cpp) and host.json says so; PODSIM_NO_HUGE_PAGES=1, or running under valgrind, leaves the environment
// alone, and the summary is the same either way.
TEST(CliTest, RunAsksForHugePagesUnlessToldNot) {
  std::string exp = write_file("mm.yaml", kMatmul);
  unsetenv("GLIBC_TUNABLES");
  unsetenv("PODSIM_NO_HUGE_PAGES");
  ASSERT_EQ(run_podsim({"run", exp, "--out", "huge"}).code, 0);
  EXPECT_EQ(nlohmann::json::parse(read_file(test_dir() + "/huge/host.json"))["malloc_huge_pages"], true);
  // And keeps freed memory for reuse instead of handing it back to the kernel to be cleared again.
  EXPECT_EQ(nlohmann::json::parse(read_file(test_dir() + "/huge/host.json"))["glibc_tunables"],
            "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=33554432");
  setenv("PODSIM_NO_HUGE_PAGES", "1", 1);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "plain"}).code, 0);
  unsetenv("PODSIM_NO_HUGE_PAGES");
  EXPECT_EQ(nlohmann::json::parse(read_file(test_dir() + "/plain/host.json"))["malloc_huge_pages"], false);
  EXPECT_EQ(read_file(test_dir() + "/huge/summary.json"), read_file(test_dir() + "/plain/summary.json"));
  // A GLIBC_TUNABLES of the user's own is kept, the setting added to it.
  setenv("GLIBC_TUNABLES", "glibc.malloc.check=0", 1);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "kept"}).code, 0);
  unsetenv("GLIBC_TUNABLES");
  EXPECT_EQ(nlohmann::json::parse(read_file(test_dir() + "/kept/host.json"))["glibc_tunables"],
            "glibc.malloc.check=0:glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=67108864:"
            "glibc.malloc.mmap_threshold=33554432");
  // Under valgrind (its preload library named in LD_PRELOAD) podsim does not run itself again.
  setenv("LD_PRELOAD", "/nonexistent/vgpreload_core-amd64-linux.so", 1);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "tool"}).code, 0);
  unsetenv("LD_PRELOAD");
  EXPECT_EQ(nlohmann::json::parse(read_file(test_dir() + "/tool/host.json"))["malloc_huge_pages"], false);
}

// strategy.name: auto (the default) is resolved to the workload's default strategy; the resolved file names the one
// that ran, keeps auto in its comment, and reruns to the same step.
TEST(CliTest, ResolvedFileNamesTheStrategyAutoChose) {
  std::string exp = write_file("allreduce.yaml", "hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\nworkload:\n"
                                                 "  model: collective\n  op: all_reduce\n  bytes: 1MiB\n");
  auto r = run_podsim({"run", exp, "--out", "out", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto s = nlohmann::json::parse(read_file(test_dir() + "/out/summary.json"));
  ASSERT_EQ(s["strategy"], "replicate");  // what ran
  std::string resolved = read_file(test_dir() + "/out/config.resolved.yaml");
  EXPECT_NE(resolved.find("strategy:\n  name: [replicate]"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("# default: chosen by auto (the workload's default strategy)\n"), std::string::npos)
      << resolved;
  EXPECT_EQ(resolved.find("[auto]"), std::string::npos) << resolved;
  auto again = run_podsim({"run", test_dir() + "/out/config.resolved.yaml", "--out", "again", "-q"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(read_file(test_dir() + "/again/summary.json"), read_file(test_dir() + "/out/summary.json"));
  // A strategy given by name has its own origin.
  auto named = run_podsim({"validate", exp, "--set", "strategy.name=replicate"});
  EXPECT_NE(named.out.find("name: [replicate]"), std::string::npos) << named.out;
  EXPECT_EQ(named.out.find("chosen by auto"), std::string::npos) << named.out;
}

TEST(CliTest, DefaultOutputFolderIsResultsRunName) {
  std::string exp = write_file("named.yaml", kMatmul);
  auto r = run_podsim({"run", exp});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(exists(test_dir() + "/results/named/summary.json"));
  auto named = run_podsim({"run", exp, "--set", "run.name=other"});
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_TRUE(exists(test_dir() + "/results/other/summary.json"));
}

TEST(CliTest, ExistingFolderIsRefusedUnlessForced) {
  std::string exp = write_file("mm.yaml", kMatmul);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "out"}).code, 0);
  auto again = run_podsim({"run", exp, "--out", "out", "--set", "workload.m=512"});
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("PODSIM-IO-002"), std::string::npos);
  auto before = nlohmann::json::parse(read_file(test_dir() + "/out/summary.json"));
  EXPECT_EQ(before["ops"][0]["mxu"]["m"], 256);  // untouched
  auto forced = run_podsim({"run", exp, "--out", "out", "--set", "workload.m=512", "--force"});
  ASSERT_EQ(forced.code, 0) << forced.err;
  auto after = nlohmann::json::parse(read_file(test_dir() + "/out/summary.json"));
  EXPECT_EQ(after["ops"][0]["mxu"]["m"], 512);
}

TEST(CliTest, FailedRunLeavesNoFolder) {
  std::string exp = write_file("oom.yaml", "hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 65536, k: 65536, "
                                           "n: 65536, dtype: fp32}\n");
  auto r = run_podsim({"run", exp, "--out", "out"});
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(exists(test_dir() + "/out"));
  for (const auto& e : std::filesystem::directory_iterator(test_dir()))
    EXPECT_EQ(e.path().filename().string().find(".out.partial"), std::string::npos) << e.path();
}

TEST(CliTest, DeadlockWhenAChipNeverJoinsACollective) {
  std::string file = write_file("exp.yaml", "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\nworkload:\n  model: matmul\n"
                                            "  m: 8\n  k: 8\n  n: 8\nstrategy:\n  name: test_missing_member\n");
  auto r = run_podsim({"run", file, "--plugin", PODSIM_TEST_PLUGIN, "--out", "o"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error PODSIM-SIM-001: deadlock at simulated time"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 chips wait forever"), std::string::npos) << r.err;
  // The waiting chips name the chip that never joined.
  EXPECT_NE(r.err.find("chip 0 (x=0,y=0) (0 of 1 ops done): 'all_reduce' (all_reduce) has 6 of 24 transfers done and "
                       "waits for data from chip 1, chip 3"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/o"));
}
