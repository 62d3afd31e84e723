// `podsim report RUN_DIR`: the summary as tables (figures taken from summary.json, not recomputed differently) and
// PNG plots drawn by matplotlib; clear errors for folders that are not runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

const char* kPlots[] = {"timeline.png", "memory.png", "heatmap.png"};

struct Png {
  bool ok = false;
  uint32_t width = 0, height = 0;
};

// The PNG signature and the image size from its IHDR chunk.
Png png(const std::string& path) {
  std::string s = read_file(path);
  Png p;
  if (s.size() < 24 || s.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || s.compare(12, 4, "IHDR") != 0) return p;
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
           (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
  };
  p.ok = true;
  p.width = be32(16);
  p.height = be32(20);
  return p;
}

bool is_png(const std::string& path) { return png(path).ok; }

// Reads pixels with matplotlib (what drew them) and answers in JSON: for the timeline, the lowest row of MXU-line
// pixels (matplotlib's first colour, #1f77b4) per column of the line (its legend sample left out); for the heat map, the share of the first panel's cells in
// viridis' top colour (#fde725) among its top and bottom colours, and where the top colour lies.
nlohmann::json measure(const std::string& png_path, const std::string& what) {
  std::string script = write_file("measure.py", R"(import json, sys
import matplotlib.image as mpimg
import numpy as np
img = (mpimg.imread(sys.argv[1])[:, :, :3] * 255).round().astype(int)
def mask(rgb):
    return np.all(np.abs(img - np.array(rgb)) <= 12, axis=2)
if sys.argv[2] == "timeline":
    m = mask((31, 119, 180))
    cols = np.nonzero(m.any(axis=0))[0]
    runs = np.split(cols, np.nonzero(np.diff(cols) > 1)[0] + 1)
    line = max(runs, key=len)  # the line itself, not its sample in the legend
    rows = [int(np.nonzero(m[:, c])[0].max()) if c in set(line.tolist()) else -1 for c in range(img.shape[1])]
    print(json.dumps({"rows": rows}))
else:
    top, bottom = mask((253, 231, 37)), mask((68, 1, 84))
    cols = np.nonzero((top | bottom).any(axis=0))[0]
    gaps = np.nonzero(np.diff(cols) > 1)[0]
    first = cols[: gaps[0] + 1] if len(gaps) else cols  # the first panel: the first run of coloured columns
    t, b = top[:, first], bottom[:, first]
    ty, tx = np.nonzero(t)
    by, bx = np.nonzero(b)
    print(json.dumps({"top": int(t.sum()), "bottom": int(b.sum()),
                      "top_below": bool(ty.mean() > by.mean()), "top_left": bool(tx.mean() < bx.mean())}))
)");
  std::string out = test_dir() + "/measure.json";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + png_path + "' " + what + " > '" + out + "'";
  if (std::system(cmd.c_str()) != 0) return {{"error", read_file(out)}};
  return nlohmann::json::parse(read_file(out));
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
  // HFU and the hardware FLOPs beside the model's (one chip: no work repeated).
  const size_t hfu = r.out.find("\nHFU ");
  ASSERT_NE(hfu, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(hfu, r.out.find('\n', hfu + 1) - hfu).find(podsim::strprintf("%.1f %%", s["hfu"].get<double>() * 100)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hardware " + podsim::format_count(s["hardware_flops"].get<double>()) + "FLOP: 1.00 x the model's"),
            std::string::npos)
      << r.out;
  for (const char* row : {"mxu", "vpu", "hbm", "ici", "exposed communication", "idle (bubble)", "weights",
                          "optimizer_state", "activations", "top ops by busy time"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  // The busiest op of the run heads the top-ops table.
  std::string slowest;
  double worst = -1;
  for (const auto& op : s["ops"]) {
    double t = op["busy_s"].get<double>();
    if (t > worst) worst = t, slowest = op["name"].get<std::string>();
  }
  size_t top = r.out.find("top ops by busy time");
  ASSERT_NE(top, std::string::npos);
  size_t first_row = r.out.find('\n', top) + 1;
  EXPECT_EQ(r.out.compare(first_row, 2 + slowest.size(), "  " + slowest), 0) << slowest << "\n" << r.out;
  for (const char* p : kPlots) EXPECT_FALSE(exists(out + "/" + p)) << p;
}

TEST(ReportTest, WritesPngPlots) {
  std::string out = run_quickstart();
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* p : {"timeline.png", "memory.png"}) {
    EXPECT_TRUE(is_png(out + "/" + p)) << p;
    EXPECT_NE(r.out.find(out + "/" + p), std::string::npos) << r.out;
  }
  // One chip has no other chip to compare with: no heat map, and the report says so (report_plots_test.cpp draws
  // one for a pod).
  EXPECT_FALSE(exists(out + "/heatmap.png"));
  EXPECT_NE(r.out.find("note: no heatmap.png: one chip"), std::string::npos) << r.out;
  // The sizes the figures are drawn at (inches x 110 dpi): timeline 9 x 7.2 (three panels), memory 8 x 2.8.
  Png t = png(out + "/timeline.png"), m = png(out + "/memory.png");
  EXPECT_EQ(t.width, 990u);
  EXPECT_EQ(t.height, 792u);
  EXPECT_EQ(m.width, 880u);
  EXPECT_EQ(m.height, 308u);
}

// The timeline is drawn from the run's numbers: with the MXU busy fraction set to 0.1, 0.3 and 0.5 over the thirds
// of the step, the MXU line sits at three heights spaced equally (0.2 apart each), in that order.
TEST(ReportTest, TimelineFollowsTheRunsNumbers) {
  std::string out = run_quickstart();
  json s = json::parse(read_file(out + "/summary.json"));
  auto& t = s["timeline"];
  const size_t bins = t["mxu_busy"].size();
  ASSERT_GE(bins, 30u);
  for (size_t i = 0; i < bins; ++i) {
    t["mxu_busy"][i] = i < bins / 3 ? 0.1 : i < 2 * bins / 3 ? 0.3 : 0.5;
    t["vpu_busy"][i] = 0.0;
    t["hbm_Bps"][i] = 0.0;
  }
  std::ofstream(out + "/summary.json") << s.dump();
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  json m = measure(out + "/timeline.png", "timeline");
  ASSERT_FALSE(m.contains("error")) << m.dump();
  std::vector<int> rows = m["rows"].get<std::vector<int>>();
  // The columns the line spans, split in thirds; the middle of each third.
  std::vector<int> cols;
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] >= 0) cols.push_back(static_cast<int>(c));
  ASSERT_GT(cols.size(), 300u);
  const int first = cols.front(), span = cols.back() - cols.front();
  auto row_at = [&](double f) { return rows[first + static_cast<int>(f * span)]; };
  const int r1 = row_at(1.0 / 6), r3 = row_at(0.5), r5 = row_at(5.0 / 6);
  EXPECT_GT(r1, r3);  // image rows grow downwards: 0.1 lowest
  EXPECT_GT(r3, r5);
  EXPECT_NEAR(r1 - r3, r3 - r5, 2) << r1 << " " << r3 << " " << r5;
  EXPECT_GT(r1 - r3, 20);
}

// The heat map is drawn from the per-chip figures: on a 2 x 2 pod with the MXU busy fraction 1 on chip 1 and 0 on
// the others, a quarter of the first panel's cells is in the colour map's top colour, at chip 1's place.
TEST(ReportTest, HeatMapFollowsThePerChipNumbers) {
  std::string exp = write_file("ar4.yaml", "hardware:\n  preset: tpu-v3\n  pod:\n    dims: [2, 2]\nworkload:\n"
                                           "  model: collective\n  op: all_reduce\n  bytes: 64KiB\n");
  std::string out = test_dir() + "/ar4";
  ASSERT_EQ(run_podsim({"run", exp, "--out", out, "--quiet"}).code, 0);
  json s = json::parse(read_file(out + "/summary.json"));
  s["per_chip"]["mxu_busy_fraction"] = {0.0, 1.0, 0.0, 0.0};
  std::ofstream(out + "/summary.json") << s.dump();
  ASSERT_EQ(run_podsim({"report", out}).code, 0);
  json m = measure(out + "/heatmap.png", "heatmap");
  ASSERT_FALSE(m.contains("error")) << m.dump();
  const double top = m["top"].get<double>(), bottom = m["bottom"].get<double>();
  ASSERT_GT(top + bottom, 1000) << m.dump();
  EXPECT_NEAR(top / (top + bottom), 0.25, 0.03) << m.dump();
  // Chip 1 is x = 1, y = 0: the lower right cell (y grows upwards).
  EXPECT_TRUE(m["top_below"].get<bool>()) << m.dump();
  EXPECT_FALSE(m["top_left"].get<bool>()) << m.dump();
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
