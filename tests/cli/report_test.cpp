// `podsim report RUN_DIR`: the summary as tables (figures taken from summary.json, not recomputed differently) and
// PNG plots drawn by matplotlib; clear errors for folders that are not runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/common/text.h"
#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

const char* kPlots[] = {"timeline.png", "memory.png", "heatmap.png"};

bool is_png(const std::string& path) {
  std::string s = read_file(path);
  return s.size() > 1000 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

std::string run_quickstart() {
  std::string out = test_dir() + "/qs";
  auto r = run_podsim({"run", source_dir() + "/configs/quickstart.yaml", "--out", out, "--quiet"});
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

}  // namespace

TEST(ReportTest, TablesShowTheRunsFigures) {
  std::string out = run_quickstart();
  json s = json::parse(read_file(out + "/summary.json"));
  auto r = run_podsim({"report", out, "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Step time, MFU and peak memory as the run computed them.
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(podsim::strprintf("%.3f ms", s["step_time_s"].get<double>() * 1e3)), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(podsim::strprintf("%.1f %%", s["mfu"].get<double>() * 100)), std::string::npos) << r.out;
  for (const char* row : {"mxu", "vpu", "hbm", "ici", "exposed communication", "idle (bubble)", "weights",
                          "optimizer_state", "activations", "top ops by time"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  // The slowest op of the run heads the top-ops table.
  std::string slowest;
  double worst = -1;
  for (const auto& op : s["ops"]) {
    double t = op["end_ns"].get<double>() - op["start_ns"].get<double>();
    if (t > worst) worst = t, slowest = op["name"].get<std::string>();
  }
  size_t top = r.out.find("top ops by time");
  ASSERT_NE(top, std::string::npos);
  size_t first_row = r.out.find('\n', top) + 1;
  EXPECT_EQ(r.out.compare(first_row, 2 + slowest.size(), "  " + slowest), 0) << slowest << "\n" << r.out;
  for (const char* p : kPlots) EXPECT_FALSE(exists(out + "/" + p)) << p;
}

TEST(ReportTest, WritesPngPlots) {
  std::string out = run_quickstart();
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* p : kPlots) {
    EXPECT_TRUE(is_png(out + "/" + p)) << p;
    EXPECT_NE(r.out.find(out + "/" + p), std::string::npos) << r.out;
  }
}

TEST(ReportTest, HeatMapOfA3DPod) {
  std::string exp = write_file("ar.yaml",
                               "hardware:\n  preset: tpu-v4\n  pod:\n    dims: [2, 2, 2]\nworkload:\n  model: collective\n"
                               "  op: all_reduce\n  bytes: 64KiB\n");
  std::string out = test_dir() + "/ar";
  ASSERT_EQ(run_podsim({"run", exp, "--out", out, "--quiet"}).code, 0);
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(is_png(out + "/heatmap.png"));
  EXPECT_NE(r.out.find("exposed communication"), std::string::npos) << r.out;
}

TEST(ReportTest, NotARunFolderIsABadInput) {
  auto missing = run_podsim({"report", test_dir() + "/nothing"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("error PODSIM-IO-"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("nothing"), std::string::npos) << missing.err;
  write_file("junk/summary.json", "{not json");
  auto junk = run_podsim({"report", test_dir() + "/junk"});
  EXPECT_EQ(junk.code, 2) << junk.err;
  EXPECT_NE(junk.err.find("summary.json"), std::string::npos) << junk.err;
}
