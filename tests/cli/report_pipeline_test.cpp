// The pipeline schedule as it ran: summary.json's pipeline.stage_units (each stage's forward, backward and
// recomputation of every micro-batch with its simulated start and end) and the chart `podsim report` draws from it
// (pipeline.png). Compared with the schedules as docs/strategies.md defines them, with the result chip's own op
// table, and with the pixels of the PNG read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

constexpr int K = 4, M = 4;  // stages, micro-batches

// Four Transformer layers (six cells with the embedding and the head) on four chips: every stage has layers to run.
const char* kPipeline = "strategy:\n  name: pipeline\n  micro_batches: 4\n";

std::string experiment(const std::string& strategy) {
  return write_file("exp.yaml", "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n"
                                "workload:\n  model: transformer\n  layers: 4\n  d_model: 128\n  d_ff: 512\n"
                                "  heads: 4\n  vocab: 512\n  seq_len: 32\n  batch: 8\n" + strategy);
}

json run(const std::string& out, const std::vector<std::string>& sets = {}, const std::string& strategy = kPipeline) {
  std::vector<std::string> args = {"run", experiment(strategy), "--out", out, "--quiet"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  auto r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(out + "/summary.json"));
}

using Unit = std::pair<std::string, int>;  // pass, micro-batch

// A stage's units in the order they started.
std::vector<Unit> started_order(const json& units) {
  std::vector<json> v(units.begin(), units.end());
  std::stable_sort(v.begin(), v.end(), [](const json& a, const json& b) {
    return a["start_s"].get<double>() < b["start_s"].get<double>();
  });
  std::vector<Unit> out;
  for (const json& u : v) out.push_back({u["pass"].get<std::string>(), u["micro_batch"].get<int>()});
  return out;
}

const json& find_unit(const json& units, const std::string& pass, int m) {
  for (const json& u : units)
    if (u["pass"] == pass && u["micro_batch"] == m) return u;
  ADD_FAILURE() << "no " << pass << " of micro-batch " << m << " in " << units.dump();
  static const json none = {{"start_s", 0.0}, {"end_s", 0.0}};
  return none;
}

// Where the unit's work after the stage's last wait within it begins (its only span, or the last of its spans).
double last_span_start(const json& u) {
  return u.contains("spans_s") ? u["spans_s"].back()[0].get<double>() : u["start_s"].get<double>();
}

}  // namespace

// GPipe, K = 4 stages and M = 4 micro-batches: every stage runs each micro-batch's forward and backward once, all
// forwards (0 .. M-1) before the backwards (M-1 .. 0); a stage starts a micro-batch's forward after the previous
// stage finished it, and its backward after the next stage finished that; every block lies within the forward and
// backward passes. Stage 0 runs on the result chip, so its blocks are also the spans of its ops in summary.json's
// op table, grouped by the micro-batch their names carry.
TEST(ReportPipelineTest, GpipeUnitsAreTheSimulatedSchedule) {
  const json s = run(test_dir() + "/gpipe");
  const json& p = s["pipeline"];
  ASSERT_TRUE(p.contains("stage_units")) << p.dump();
  const json& st = p["stage_units"];
  ASSERT_EQ(st.size(), static_cast<size_t>(K));
  std::vector<Unit> expected;
  for (int m = 0; m < M; ++m) expected.push_back({"forward", m});
  for (int m = M - 1; m >= 0; --m) expected.push_back({"backward", m});
  const double fb = p["forward_backward_s"].get<double>(), T = s["step_time_s"].get<double>();
  ASSERT_GT(fb, 0);
  EXPECT_LE(fb, T);
  for (int k = 0; k < K; ++k) {
    EXPECT_EQ(st[k].size(), static_cast<size_t>(2 * M)) << "stage " << k;
    EXPECT_EQ(started_order(st[k]), expected) << "stage " << k;
    for (const json& u : st[k]) {
      const double a = u["start_s"].get<double>(), b = u["end_s"].get<double>();
      EXPECT_GE(a, 0) << u.dump();
      EXPECT_LT(a, b) << u.dump();
      EXPECT_LE(b, fb) << u.dump();
    }
  }
  // The handoffs: activations forward, their gradients backward.
  for (int k = 1; k < K; ++k)
    for (int m = 0; m < M; ++m) {
      EXPECT_GE(last_span_start(find_unit(st[k], "forward", m)),
                find_unit(st[k - 1], "forward", m)["end_s"].get<double>())
          << "stage " << k << " micro-batch " << m;
      EXPECT_GE(last_span_start(find_unit(st[k - 1], "backward", m)),
                find_unit(st[k], "backward", m)["end_s"].get<double>())
          << "stage " << k - 1 << " micro-batch " << m;
    }
  // Only the last stage starts work before its first activations arrive: slicing its labels.
  for (int k = 0; k + 1 < K; ++k)
    for (const json& u : st[k]) EXPECT_FALSE(u.contains("spans_s")) << "stage " << k << " " << u.dump();
  // Stage 0 from its op table: ops named <op>/mb<m> (fused kernels by their first member), forward or backward by
  // their phase; transfers to the next stage excluded.
  std::map<Unit, std::pair<double, double>> spans;  // ns
  const std::regex mb(".*/mb([0-9]+)$");
  for (const json& op : s["ops"]) {
    const std::string kind = op["kind"], phase = op["phase"];
    if (kind == "send" || kind == "recv") continue;
    const std::string first = op.contains("fused") ? op["fused"][0].get<std::string>() : op["name"].get<std::string>();
    std::smatch match;
    if (!std::regex_match(first, match, mb)) continue;
    const Unit u{phase == "forward" || phase == "loss" ? "forward" : "backward", std::stoi(match[1])};
    const double a = op["start_ns"].get<double>(), b = op["end_ns"].get<double>();
    auto it = spans.try_emplace(u, a, b).first;
    it->second = {std::min(it->second.first, a), std::max(it->second.second, b)};
  }
  ASSERT_EQ(spans.size(), static_cast<size_t>(2 * M));
  for (const auto& [u, span] : spans) {
    const json& unit = find_unit(st[0], u.first, u.second);
    EXPECT_NEAR(unit["start_s"].get<double>() * 1e9, span.first, 1e-3) << u.first << " " << u.second;
    EXPECT_NEAR(unit["end_s"].get<double>() * 1e9, span.second, 1e-3) << u.first << " " << u.second;
  }
}

// 1F1B with re-materialization: stage k runs K - 1 - k forwards ahead, then alternates one forward with one
// backward, each backward preceded by the recomputation of its micro-batch's activations (docs/strategies.md).
TEST(ReportPipelineTest, OneFOneBOrderWithRecomputation) {
  const json s = run(test_dir() + "/1f1b", {"strategy.schedule=1f1b", "strategy.remat=true"});
  const json& st = s["pipeline"]["stage_units"];
  ASSERT_EQ(st.size(), static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    const int warm = std::min(K - 1 - k, M);
    std::vector<Unit> expected;
    auto backward = [&](int m) {
      expected.push_back({"recompute", m});
      expected.push_back({"backward", m});
    };
    for (int m = 0; m < warm; ++m) expected.push_back({"forward", m});
    for (int i = 0; i + warm < M; ++i) {
      expected.push_back({"forward", i + warm});
      backward(i);
    }
    for (int i = M - warm; i < M; ++i) backward(i);
    EXPECT_EQ(st[k].size(), static_cast<size_t>(3 * M)) << "stage " << k;
    EXPECT_EQ(started_order(st[k]), expected) << "stage " << k;
  }
}

namespace {

// Reads pipeline.png with matplotlib (what drew it): its size, the axes frame (the long black lines of its
// spines), and per band of block-coloured rows inside the frame (a stage), each column's majority class: F
// (forward #1f77b4), B (backward #ff7f0e), R (recompute #aec7e8), W (background white) or o (anything else).
json measure(const std::string& png) {
  std::string script = write_file("measure.py", R"(import json, sys
import matplotlib.image as mpimg
import numpy as np
img = (mpimg.imread(sys.argv[1])[:, :, :3] * 255).round().astype(int)
def mask(rgb):
    return np.all(np.abs(img - np.array(rgb)) <= 12, axis=2)
def runs(idx):
    out = []
    for i in idx:
        if out and i == out[-1][-1] + 1: out[-1].append(int(i))
        else: out.append([int(i)])
    return out
black = np.all(img <= 80, axis=2)
cs, rs = black.sum(axis=0), black.sum(axis=1)
cols, rows = runs(np.nonzero(cs > 0.5 * cs.max())[0]), runs(np.nonzero(rs > 0.5 * rs.max())[0])
left, right = float(np.mean(cols[0])), float(np.mean(cols[-1]))
top, bottom = float(np.mean(rows[0])), float(np.mean(rows[-1]))
x0, x1, y0, y1 = int(round(left)), int(round(right)), int(round(top)) + 2, int(round(bottom)) - 2
classes = [("F", mask((31, 119, 180))), ("B", mask((255, 127, 14))), ("R", mask((174, 199, 232))),
           ("W", mask((255, 255, 255)))]
block = classes[0][1] | classes[1][1] | classes[2][1]
inside = np.zeros(block.shape, bool)
inside[y0:y1, x0 + 2:x1 - 1] = True
bands = []
for band in runs(np.nonzero((block & inside).any(axis=1))[0]):
    b0, b1 = band[0], band[-1] + 1
    text = ""
    for c in range(x0, x1 + 1):
        counts = [int(m[b0:b1, c].sum()) for _, m in classes]
        other = (b1 - b0) - sum(counts)
        text += "o" if other > max(counts) else classes[int(np.argmax(counts))][0]
    bands.append({"top": b0, "bottom": b1, "classes": text})
print(json.dumps({"width": img.shape[1], "height": img.shape[0], "left": left, "right": right, "bands": bands}))
)");
  std::string out = test_dir() + "/measure.json";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + png + "' > '" + out + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) return {{"error", read_file(out)}};
  return json::parse(read_file(out));
}

}  // namespace

// pipeline.png is drawn from stage_units: 1100 x 352 pixels (10 x (1.2 + 0.5 K) inches at 110 dpi), one band per
// stage, stage 0 on top; the middle of every block wide enough to see has its pass's colour, and where a stage
// did nothing between two blocks (the bubble) there is no block colour, only background.
TEST(ReportPipelineTest, ChartIsDrawnFromTheUnits) {
  const std::string out = test_dir() + "/gpipe";
  const json s = run(out, {"strategy.remat=true"});
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out + "/pipeline.png"), std::string::npos) << r.out;
  const json m = measure(out + "/pipeline.png");
  ASSERT_FALSE(m.contains("error")) << m.dump();
  EXPECT_EQ(m["width"].get<int>(), 1100);
  EXPECT_EQ(m["height"].get<int>(), static_cast<int>(std::lround((1.2 + 0.5 * K) * 110)));
  const json& bands = m["bands"];
  ASSERT_EQ(bands.size(), static_cast<size_t>(K)) << m.dump();
  const json& st = s["pipeline"]["stage_units"];
  const double fb = s["pipeline"]["forward_backward_s"].get<double>();
  const double left = m["left"].get<double>(), right = m["right"].get<double>();
  ASSERT_GT(right - left, 600);
  auto px = [&](double t) { return left + t / fb * (right - left); };
  auto cls = [&](int k, double x) {
    const std::string& c = bands[k]["classes"].get_ref<const std::string&>();
    const long i = std::lround(x) - std::lround(left);
    return i >= 0 && i < static_cast<long>(c.size()) ? c[static_cast<size_t>(i)] : '?';
  };
  int blocks = 0, bubble_columns = 0;
  for (int k = 0; k < K; ++k) {
    std::vector<std::pair<double, double>> spans;  // the stage's work, in seconds
    for (const json& u : st[k]) {
      const json parts = u.contains("spans_s") ? u["spans_s"] : json::array({{u["start_s"], u["end_s"]}});
      for (const json& x : parts) spans.push_back({x[0].get<double>(), x[1].get<double>()});
      const json& longest = *std::max_element(parts.begin(), parts.end(), [](const json& a, const json& b) {
        return a[1].get<double>() - a[0].get<double>() < b[1].get<double>() - b[0].get<double>();
      });
      const double a = longest[0].get<double>(), b = longest[1].get<double>();
      if (px(b) - px(a) < 8) continue;
      const std::string pass = u["pass"];
      const char want = pass == "forward" ? 'F' : pass == "backward" ? 'B' : 'R';
      EXPECT_EQ(cls(k, px((a + b) / 2)), want) << "stage " << k << " " << u.dump();
      ++blocks;
    }
    // The stage's idle gaps: between the end of all work so far and the next start.
    std::sort(spans.begin(), spans.end());
    double busy_until = spans.front().second;
    for (const auto& [a, b] : spans) {
      if (px(a) - px(busy_until) >= 10) {
        int background = 0, n = 0;
        for (double x = std::ceil(px(busy_until) + 2); x <= px(a) - 2; ++x, ++n) {
          const char c = cls(k, x);
          EXPECT_TRUE(c == 'W' || c == 'o') << "stage " << k << " column " << x << ": " << c;
          background += c == 'W';
        }
        // A faint grid line (one or two columns) may cross the bubble, however narrow the bubble is.
        EXPECT_LE(n - background, std::max(2.0, 0.1 * n)) << "stage " << k;
        bubble_columns += n;
      }
      busy_until = std::max(busy_until, b);
    }
  }
  EXPECT_GE(blocks, 2 * K * M) << "blocks too narrow to check";
  EXPECT_GE(bubble_columns, 100);
}

// A run without a pipeline gets the other plots and no pipeline.png, without a word about it.
TEST(ReportPipelineTest, NoChartWithoutAPipeline) {
  const std::string out = test_dir() + "/dp";
  run(out, {}, "strategy:\n  name: data_parallel\n");
  auto r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* p : {"timeline.png", "memory.png", "heatmap.png"}) EXPECT_TRUE(exists(out + "/" + p)) << p;
  EXPECT_FALSE(exists(out + "/pipeline.png"));
  EXPECT_EQ(r.out.find("pipeline"), std::string::npos) << r.out;
  EXPECT_FALSE(json::parse(read_file(out + "/summary.json")).contains("pipeline"));
}
