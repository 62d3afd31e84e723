// `podsim report` on a pod: the timeline's communication series against the run's own time breakdown and per-chip
// figures, and drawn where they say (pixels read back); the heat map's size and its colours fitted to the data
// (--fit-colors); the collectives table naming each collective's tensor, mesh axis and group.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

// Data x model on a 4 x 2 pod: model groups of 4 chips, data groups of 2; communication in both passes.
constexpr const char* kDataModel =
    "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 2]}\nworkload:\n  model: transformer\n  layers: 2\n"
    "  d_model: 128\n  d_ff: 512\n  heads: 4\n  vocab: 512\n  seq_len: 64\n  batch: 8\n"
    "strategy:\n  name: [data_parallel, spmd]\nmesh:\n  axes: [data, model]\n  shape: [2, 4]\n";

std::string run_exp(const std::string& name, const std::string& yaml) {
  std::string out = test_dir() + "/" + name;
  CliResult r = run_podsim({"run", write_file(name + ".yaml", yaml), "--out", out, "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}
// Width and height from the PNG's IHDR chunk.
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  std::string s = read_file(path);
  if (s.size() < 24 || s.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  return {be32(s, 16), be32(s, 20)};
}

// Reads a PNG with matplotlib (what drew it) and answers in JSON.
//   line R G B       the longest run of columns holding that colour (a line, not its legend sample), and per
//                    column of it the lowest row of the colour (-1 elsewhere)
//   reddish          the columns holding a red shade (#d62728 blended over white or grey: red well above green,
//                    green and blue alike), none of the other series' colours
//   heatmap          in the upper three quarters (above fitted colour bars), the first panel's cells in viridis'
//                    top colour and bottom colour, and whether the top colour lies below and left of the bottom one
json measure(const std::string& png, const std::vector<std::string>& what) {
  std::string script = write_file("measure.py", R"(import json, sys
import matplotlib.image as mpimg
import numpy as np
img = (mpimg.imread(sys.argv[1])[:, :, :3] * 255).round().astype(int)
def mask(rgb):
    return np.all(np.abs(img - np.array(rgb)) <= 12, axis=2)
what = sys.argv[2]
if what == "line":
    m = mask(tuple(int(v) for v in sys.argv[3:6]))
    cols = np.nonzero(m.any(axis=0))[0]
    runs = np.split(cols, np.nonzero(np.diff(cols) > 1)[0] + 1)
    line = set(max(runs, key=len).tolist())
    print(json.dumps({"rows": [int(np.nonzero(m[:, c])[0].max()) if c in line else -1 for c in range(img.shape[1])]}))
elif what == "reddish":
    r, g, b = img[:, :, 0], img[:, :, 1], img[:, :, 2]
    red = (r - g > 30) & (np.abs(g - b) < 15) & (r > 150)
    print(json.dumps({"cols": [int(c) for c in np.nonzero(red.any(axis=0))[0]]}))
else:
    upper = img[: int(img.shape[0] * 0.75)]
    top = np.all(np.abs(upper - np.array((253, 231, 37))) <= 12, axis=2)
    bottom = np.all(np.abs(upper - np.array((68, 1, 84))) <= 12, axis=2)
    cols = np.nonzero((top | bottom).any(axis=0))[0]
    if len(cols) == 0:
        print(json.dumps({"top": 0, "bottom": 0}))
        sys.exit(0)
    gaps = np.nonzero(np.diff(cols) > 1)[0]
    first = cols[: gaps[0] + 1] if len(gaps) else cols
    t, b = top[:, first], bottom[:, first]
    ty, tx = np.nonzero(t)
    by, bx = np.nonzero(b)
    out = {"top": int(t.sum()), "bottom": int(b.sum())}
    if len(ty) and len(by):
        out.update({"top_below": bool(ty.mean() > by.mean()), "top_left": bool(tx.mean() < bx.mean())})
    print(json.dumps(out))
)");
  std::string out = test_dir() + "/measure.json";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + png + "'";
  for (const auto& w : what) cmd += " " + w;
  cmd += " > '" + out + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) return {{"error", read_file(out)}};
  return json::parse(read_file(out));
}

double sum(const json& a) {
  double s = 0;
  for (const auto& v : a) s += v.get<double>();
  return s;
}

}  // namespace

// The timeline's series are the result chip's figures spread over the bins: summed back, each gives the figure
// summary.json computes elsewhere, from other records (op spans for the time breakdown, the routers' link counters
// for per_chip.ici_busy_fraction, HBM byte counts).
TEST(ReportPlotsTest, TimelineSeriesAddUpToTheRunsFigures) {
  const std::string out = run_exp("dm", kDataModel);
  const json s = json::parse(read_file(out + "/summary.json"));
  const json& t = s["timeline"];
  const int64_t chip = t["chip"].get<int64_t>();
  const double w = t["bin_s"].get<double>(), T = s["step_time_s"].get<double>();
  ASSERT_EQ(t["communication"].size(), 100u);
  EXPECT_NEAR(w * 100, T, 1e-12);
  const json& tb = s["time_breakdown"];
  ASSERT_GT(tb["exposed_communication_s"].get<double>(), 0.05 * T) << "the test needs exposed communication";
  EXPECT_NEAR(sum(t["communication"]) * w, tb["communication_s"].get<double>(), 1e-4 * T);
  EXPECT_NEAR(sum(t["exposed_communication"]) * w, tb["exposed_communication_s"].get<double>(), 1e-4 * T);
  EXPECT_GT(s["per_chip"]["ici_busy_fraction"][chip].get<double>(), 0.0);
  EXPECT_NEAR(sum(t["ici_busy"]) / 100, s["per_chip"]["ici_busy_fraction"][chip].get<double>(), 1e-5);
  EXPECT_NEAR(sum(t["mxu_busy"]) / 100, s["per_chip"]["mxu_busy_fraction"][chip].get<double>(), 1e-5);
  EXPECT_NEAR(sum(t["hbm_Bps"]) * w, s["per_chip"]["hbm_bytes"][chip].get<double>(),
              1e-5 * s["per_chip"]["hbm_bytes"][chip].get<double>());
  for (size_t k = 0; k < 100; ++k) {
    EXPECT_LE(t["exposed_communication"][k].get<double>(), t["communication"][k].get<double>() + 1e-6) << k;
    EXPECT_LE(t["communication"][k].get<double>(), 1.0 + 1e-6) << k;
  }
}

// The communication panel is drawn from the run's numbers: with the links busy 0.2, 0.4 and 0.6 over the thirds of
// the step, their line sits at three equally spaced heights; exposed communication set in the middle third only is
// shaded red there and nowhere else.
TEST(ReportPlotsTest, TimelineDrawsCommunication) {
  const std::string out = run_exp("dm", kDataModel);
  json s = json::parse(read_file(out + "/summary.json"));
  json& t = s["timeline"];
  const size_t bins = t["ici_busy"].size();
  for (size_t i = 0; i < bins; ++i) {
    const bool middle = i >= bins / 3 && i < 2 * bins / 3;
    t["ici_busy"][i] = i < bins / 3 ? 0.2 : middle ? 0.4 : 0.6;
    t["communication"][i] = middle ? 1.0 : 0.0;
    t["exposed_communication"][i] = middle ? 1.0 : 0.0;
    t["mxu_busy"][i] = t["vpu_busy"][i] = t["hbm_Bps"][i] = 0.0;
  }
  std::ofstream(out + "/summary.json") << s.dump();
  CliResult r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const json m = measure(out + "/timeline.png", {"line", "148", "103", "189"});  // #9467bd
  ASSERT_FALSE(m.contains("error")) << m.dump();
  std::vector<int> rows = m["rows"].get<std::vector<int>>(), cols;
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] >= 0) cols.push_back(static_cast<int>(c));
  ASSERT_GT(cols.size(), 300u);
  const int first = cols.front(), span = cols.back() - cols.front();
  auto row_at = [&](double f) { return rows[first + static_cast<int>(f * span)]; };
  const int r1 = row_at(1.0 / 6), r3 = row_at(0.5), r5 = row_at(5.0 / 6);
  EXPECT_GT(r1, r3);  // image rows grow downwards: 0.2 lowest
  EXPECT_GT(r3, r5);
  EXPECT_NEAR(r1 - r3, r3 - r5, 2) << r1 << " " << r3 << " " << r5;
  EXPECT_GT(r1 - r3, 20);
  // The line runs from the middle of bin 0 to the middle of the last bin: bin k starts at column px(k).
  auto px = [&](double k) { return first + (k - 0.5) / static_cast<double>(bins - 1) * span; };
  const double lo = px(static_cast<double>(bins / 3)), hi = px(static_cast<double>(2 * bins / 3));
  const json red = measure(out + "/timeline.png", {"reddish"});
  ASSERT_FALSE(red.contains("error")) << red.dump();
  int inside = 0;
  for (int c : red["cols"].get<std::vector<int>>()) {
    if (c < first || c > first + span) continue;  // the legend's samples
    EXPECT_GE(c, lo - 2) << "red before the exposed third";
    EXPECT_LE(c, hi + 2) << "red after the exposed third";
    ++inside;
  }
  EXPECT_GE(inside, 0.9 * (hi - lo)) << lo << " " << hi;
}

// A pod gets a heat map, 4 panels of 3.4 inches plus 1 by 3.6 at 110 dpi, with the colour scale 0-100 %: MXU busy
// 10 % on three chips and 11 % on chip 1 is all dark, no cell in the scale's top colour. --fit-colors spans each
// panel's own range: chip 1 is then the top colour and the others the bottom one, a quarter of the cells, at chip
// 1's place (x = 1, y = 0: lower right); the figure grows by 0.8 inch for the colour bars under the panels.
TEST(ReportPlotsTest, HeatMapOfAPodAndFittedColours) {
  const std::string out = run_exp("ar4", "hardware:\n  preset: tpu-v3\n  pod:\n    dims: [2, 2]\nworkload:\n"
                                         "  model: collective\n  op: all_reduce\n  bytes: 64KiB\n");
  json s = json::parse(read_file(out + "/summary.json"));
  s["per_chip"]["mxu_busy_fraction"] = {0.10, 0.11, 0.10, 0.10};
  std::ofstream(out + "/summary.json") << s.dump();

  CliResult r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out + "/heatmap.png"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("note: no heatmap.png"), std::string::npos) << r.out;
  EXPECT_EQ(png_size(out + "/heatmap.png"), std::make_pair(static_cast<uint32_t>((3.4 * 4 + 1) * 110 + 0.5), 396u));
  json fixed = measure(out + "/heatmap.png", {"heatmap"});
  ASSERT_FALSE(fixed.contains("error")) << fixed.dump();
  EXPECT_EQ(fixed["top"].get<int>(), 0) << fixed.dump();

  r = run_podsim({"report", out, "--fit-colors"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(png_size(out + "/heatmap.png").second, static_cast<uint32_t>((3.6 + 0.8) * 110 + 0.5));
  json fit = measure(out + "/heatmap.png", {"heatmap"});
  ASSERT_FALSE(fit.contains("error")) << fit.dump();
  const double top = fit["top"].get<double>(), bottom = fit["bottom"].get<double>();
  ASSERT_GT(top + bottom, 1000) << fit.dump();
  EXPECT_NEAR(top / (top + bottom), 0.25, 0.03) << fit.dump();
  EXPECT_TRUE(fit["top_below"].get<bool>()) << fit.dump();
  EXPECT_FALSE(fit["top_left"].get<bool>()) << fit.dump();
}

// Each collective says what it moves, over which mesh axis and among which chips: the group's size is the product
// of the mesh axes it spans (model 4, data 2, from the experiment), and the report prints those fields on its row,
// so rows of different tensors differ.
TEST(ReportPlotsTest, CollectivesNameTheirTensorAxisAndGroup) {
  const std::string out = run_exp("dm", kDataModel);
  const json s = json::parse(read_file(out + "/summary.json"));
  ASSERT_TRUE(s.contains("collectives"));
  const std::map<std::string, int64_t> axis_size = {{"data", 2}, {"model", 4}};
  std::set<std::string> axes_seen;
  for (const auto& c : s["collectives"]) {
    SCOPED_TRACE(c.dump());
    EXPECT_FALSE(c["tensor"].get<std::string>().empty());
    int64_t size = 1;
    for (const auto& a : c["axes"]) {
      size *= axis_size.at(a.get<std::string>());
      axes_seen.insert(a.get<std::string>());
    }
    EXPECT_EQ(c["group_size"].get<int64_t>(), size);
    EXPECT_NE(c["group"].get<std::string>().find(" of " + std::to_string(size) + " on "), std::string::npos);
  }
  EXPECT_EQ(axes_seen, (std::set<std::string>{"data", "model"}));

  CliResult r = run_podsim({"report", out, "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("\ncollectives ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::vector<std::string> lines;
  size_t pos = r.out.find('\n', at + 1) + 1;
  for (size_t i = 0; i < std::min<size_t>(20, s["collectives"].size()); ++i) {
    size_t end = r.out.find('\n', pos);
    lines.push_back(r.out.substr(pos, end - pos));
    pos = end + 1;
  }
  std::set<std::string> distinct;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& c = s["collectives"][i];
    SCOPED_TRACE(lines[i]);
    EXPECT_EQ(lines[i].rfind("  " + c["kind"].get<std::string>() + " ", 0), 0u);
    EXPECT_NE(lines[i].find(c["tensor"].get<std::string>().substr(0, 21)), std::string::npos);
    std::string axis = " ";  // appended piecewise: `" " + std::string` trips a false -Wrestrict in GCC 12
    axis += c["axes"][0].get<std::string>();
    axis += ' ';
    EXPECT_NE(lines[i].find(axis), std::string::npos);
    EXPECT_EQ(lines[i].substr(lines[i].size() - c["group"].get<std::string>().size()), c["group"].get<std::string>());
    distinct.insert(c["kind"].get<std::string>() + c["tensor"].get<std::string>());
  }
  std::set<std::string> printed(lines.begin(), lines.end());
  EXPECT_EQ(printed.size(), distinct.size());
}
