// `podsim sweep plot` on results.db tables the test writes itself with SQLite (the layout the driver writes: run_index,
// name, the swept parameters, status, wall_s, figures), so every value is known: bars for a text x drawn at the
// heights of the figures, lines per combination of two --by columns, --where selecting runs without a column, and
// a --where that selects nothing naming the values there are. Axis labels: tests/unit/sweep_plot_axis_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

// A sweep folder whose results.db has `params` as swept columns and one figure, step_time_s; each row gives the
// params' values as SQL literals (NULL for a run without that parameter) and the figure.
std::string make_db(const std::string& name, const std::vector<std::string>& params,
                    const std::vector<std::pair<std::vector<std::string>, double>>& rows) {
  const std::string dir = test_dir() + "/" + name;
  write_file(name + "/sweep.json", "{}");
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open((dir + "/results.db").c_str(), &db), SQLITE_OK);
  std::string cols = "run_index INTEGER, name TEXT";
  for (const auto& p : params) cols += ", \"" + p + "\"";
  cols += ", status TEXT, wall_s REAL, step_time_s REAL";
  std::string sql = "CREATE TABLE runs (" + cols + ");";
  for (size_t i = 0; i < rows.size(); ++i) {
    sql += "INSERT INTO runs VALUES (" + std::to_string(i) + ", 'run" + std::to_string(i) + "'";
    for (const auto& v : rows[i].first) sql += ", " + v;
    sql += ", 'done', 1.0, " + std::to_string(rows[i].second) + ");";
  }
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
  sqlite3_free(err);
  sqlite3_close(db);
  return dir;
}

// Reads a PNG with matplotlib: `bars` gives, per run of columns holding matplotlib's first colour (#1f77b4), its
// left column, top row and bottom row; `colours` says which of the first five colours of the cycle appear.
json measure(const std::string& png, const std::string& what) {
  std::string script = write_file("measure.py", R"(import json, sys
import matplotlib.image as mpimg
import numpy as np
img = (mpimg.imread(sys.argv[1])[:, :, :3] * 255).round().astype(int)
def mask(rgb):
    return np.all(np.abs(img - np.array(rgb)) <= 8, axis=2)
if sys.argv[2] == "bars":
    m = mask((31, 119, 180))
    cols = np.nonzero(m.any(axis=0))[0]
    runs = np.split(cols, np.nonzero(np.diff(cols) > 1)[0] + 1)
    bars = []
    for r in runs:
        rows = np.nonzero(m[:, r[len(r) // 2]])[0]
        bars.append({"left": int(r[0]), "width": int(len(r)), "top": int(rows.min()), "bottom": int(rows.max())})
    print(json.dumps({"bars": bars}))
else:
    cycle = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]
    print(json.dumps({"colours": [int(mask(c).sum()) for c in cycle]}))
)");
  std::string out = test_dir() + "/measure.json";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + png + "' " + what + " > '" + out + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) return {{"error", read_file(out)}};
  return json::parse(read_file(out));
}

}  // namespace

// A text x (strategy names) draws one bar per value, in the order the sweep ran them, as high as the figure: step
// times of 1, 3 and 2 ms give bars whose heights stand 1 : 3 : 2 on one baseline.
TEST(SweepPlotTest, TextXDrawsBarsAtTheFiguresHeights) {
  const std::string dir = make_db("bars", {"strategy.name"},
                                  {{{"'data_parallel'"}, 1e-3}, {{"'spmd'"}, 3e-3}, {{"'pipeline'"}, 2e-3}});
  CliResult r = run_podsim({"sweep", "plot", dir, "--x", "strategy.name", "--y", "step_time_s", "-o", "bars.png"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json m = measure(test_dir() + "/bars.png", "bars");
  ASSERT_FALSE(m.contains("error")) << m.dump();
  const auto& bars = m["bars"];
  ASSERT_EQ(bars.size(), 3u) << m.dump();
  std::vector<double> h;
  for (const auto& b : bars) {
    EXPECT_GT(b["width"].get<int>(), 20) << m.dump();
    EXPECT_NEAR(b["bottom"].get<int>(), bars[0]["bottom"].get<int>(), 1) << m.dump();
    h.push_back(b["bottom"].get<int>() - b["top"].get<int>());
  }
  EXPECT_LT(bars[0]["left"].get<int>(), bars[1]["left"].get<int>());
  EXPECT_LT(bars[1]["left"].get<int>(), bars[2]["left"].get<int>());
  EXPECT_GT(h[0], 30);
  EXPECT_NEAR(h[1] / h[0], 3.0, 0.05) << m.dump();
  EXPECT_NEAR(h[2] / h[0], 2.0, 0.05) << m.dump();
}

// Two runs at one x differ in two parameters: --by one of them is refused naming the other; --by both (a,b or
// repeated) draws one line per combination: four lines, in the first four colours of the cycle and not a fifth.
TEST(SweepPlotTest, ByTwoColumnsDrawsALinePerCombination) {
  std::vector<std::pair<std::vector<std::string>, double>> rows;
  for (int a : {1, 2})
    for (const char* b : {"'x'", "'y'"})
      for (int x : {1, 2, 3}) rows.push_back({{std::to_string(x), std::to_string(a), b}, 1e-3 * (x + 4 * a + 8 * (b[1] == 'y'))});
  const std::string dir = make_db("by", {"workload.batch", "workload.a", "workload.b"}, rows);
  CliResult one = run_podsim({"sweep", "plot", dir, "--x", "batch", "--y", "step_time_s", "--by", "workload.a"});
  EXPECT_EQ(one.code, 2);
  EXPECT_NE(one.err.find("they differ in workload.b (x, y)"), std::string::npos) << one.err;

  CliResult both = run_podsim({"sweep", "plot", dir, "--x", "batch", "--y", "step_time_s", "--by", "a,b", "-o", "ab.png"});
  ASSERT_EQ(both.code, 0) << both.err;
  CliResult repeated = run_podsim(
      {"sweep", "plot", dir, "--x", "batch", "--y", "step_time_s", "--by", "a", "--by", "b", "-o", "a_b.png"});
  ASSERT_EQ(repeated.code, 0) << repeated.err;
  EXPECT_EQ(read_file(test_dir() + "/ab.png"), read_file(test_dir() + "/a_b.png"));
  const json m = measure(test_dir() + "/ab.png", "colours");
  ASSERT_FALSE(m.contains("error")) << m.dump();
  for (int i = 0; i < 4; ++i) EXPECT_GT(m["colours"][i].get<int>(), 50) << i << " " << m.dump();
  EXPECT_EQ(m["colours"][4].get<int>(), 0) << m.dump();
  // Without -o the file is named after every --by column.
  ASSERT_EQ(run_podsim({"sweep", "plot", dir, "--x", "batch", "--y", "step_time_s", "--by", "a,b"}).code, 0);
  EXPECT_TRUE(exists(dir + "/plot_step_time_s_vs_workload.batch_by_workload.a_workload.b.png"));
}

// A parameter only some strategies have is NULL for the others. --where COLUMN= selects those runs, and values of
// one column are alternatives: the runs below sit at x = 1 with w = 0 and without w, and at x = 2 with w = 1. Each
// selection either puts two runs at x = 1 (refused, naming both values) or not, which tells which runs it kept.
TEST(SweepPlotTest, WhereSelectsRunsWithoutAColumnAndSaysWhatExists) {
  const std::string dir = make_db("where", {"workload.batch", "strategy.weight_update_sharding"},
                                  {{{"1", "0"}, 1e-3}, {{"1", "NULL"}, 2e-3}, {{"2", "1"}, 3e-3}});
  auto plot = [&](std::vector<std::string> where) {
    std::vector<std::string> args = {"sweep", "plot", dir, "--x", "batch", "--y", "step_time_s", "-o", "w.png"};
    for (const auto& w : where) args.insert(args.end(), {"--where", w});
    return run_podsim(args);
  };
  // No filter: both runs at x = 1, their difference named with "absent" for the missing value.
  CliResult all = plot({});
  EXPECT_EQ(all.code, 2);
  EXPECT_NE(all.err.find("strategy.weight_update_sharding (0, absent)"), std::string::npos) << all.err;
  // Absent only: the run without w, and not the one with w = 0 at the same x.
  EXPECT_EQ(plot({"strategy.weight_update_sharding="}).code, 0);
  EXPECT_EQ(plot({"weight_update_sharding=1", "weight_update_sharding="}).code, 0);
  // 0 or absent: both runs at x = 1 again.
  CliResult either = plot({"weight_update_sharding=0", "weight_update_sharding="});
  EXPECT_EQ(either.code, 2);
  EXPECT_NE(either.err.find("both at workload.batch = 1"), std::string::npos) << either.err;
  // A value no run has: an error listing the values there are, and how to select the runs without one.
  CliResult none = plot({"weight_update_sharding=2"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("PODSIM-SWP-006"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("--where weight_update_sharding=2 matches no done run"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("strategy.weight_update_sharding holds 0, 1, absent (absent: --where "
                          "strategy.weight_update_sharding=)"),
            std::string::npos)
      << none.err;
  // Filters on two columns that each keep runs but none together.
  CliResult apart = plot({"weight_update_sharding=1", "batch=1"});
  EXPECT_EQ(apart.code, 2);
  EXPECT_NE(apart.err.find("no done run matches all the --where filters together"), std::string::npos) << apart.err;
}
