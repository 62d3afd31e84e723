// `podsim search` end to end on a 2 x 2 pod and a tiny model, where the whole space can be simulated: the search
// with its memory prune and estimate-ordered budget finds the same best candidate as simulating every candidate;
// a second search resumes (nothing runs again); best.yaml is a runnable experiment that gives the winner's step time;
// every stage-2 peak equals what `podsim run --memory-only` reports for that candidate; bad input stops with a
// located error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// 2 x 2 v5e, the tiny Llama: every strategy set, no re-materialization, pipelines with 2 micro-batches.
const char* kSpace =
    "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
    "workload: {preset: llm-tiny, batch: 8}\n"
    "search: {remat: [none], micro_batches: [2]}\n";

using Table = std::vector<std::map<std::string, std::string>>;

// A TSV with a header line; lines starting with '#' are left out.
Table read_tsv(const std::string& path) {
  std::istringstream in(read_file(path));
  std::string line;
  std::vector<std::string> head;
  Table t;
  auto cells = [](const std::string& l) {
    std::vector<std::string> c;
    std::stringstream ss(l);
    for (std::string x; std::getline(ss, x, '\t');) c.push_back(x);
    return c;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (head.empty()) {
      head = cells(line);
      continue;
    }
    std::vector<std::string> c = cells(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < head.size() && i < c.size(); ++i) row[head[i]] = c[i];
    t.push_back(row);
  }
  return t;
}

double step_time(const std::string& run_dir) {
  return nlohmann::json::parse(read_file(run_dir + "/summary.json"))["step_time_s"].get<double>();
}

}  // namespace

TEST(SearchCli, PrunedAndOrderedFindsTheExhaustiveBest) {
  const std::string exp = write_file("space.yaml", kSpace);
  // Everything: no memory cap to speak of, no budget.
  CliResult all = run_podsim({"search", exp, "--out", "all", "-j", "2", "--budget", "0", "--no-plot", "--set",
                              "search.memory_cap=1TB"});
  ASSERT_EQ(all.code, 0) << all.out << all.err;
  Table cands = read_tsv(test_dir() + "/all/candidates.tsv");
  Table every = read_tsv(test_dir() + "/all/ranking.tsv");
  size_t fit = 0;
  for (const auto& c : cands) fit += c.at("fate") == "simulate";
  ASSERT_GE(fit, 10u);
  ASSERT_EQ(every.size(), fit);  // each one simulated

  // The cap: the median peak of the candidates, so that about half are pruned.
  std::map<std::string, double> peak;
  std::vector<double> peaks;
  for (const auto& c : cands)
    if (c.at("fate") == "simulate") {
      peak[c.at("candidate")] = std::stod(c.at("peak_memory_bytes"));
      peaks.push_back(peak[c.at("candidate")]);
    }
  std::sort(peaks.begin(), peaks.end());
  const double cap = peaks[peaks.size() / 2];
  std::string best_under_cap;
  for (const auto& r : every)  // ranked best first
    if (peak.at(r.at("candidate")) <= cap) {
      best_under_cap = r.at("candidate");
      break;
    }
  ASSERT_FALSE(best_under_cap.empty());

  // The search: memory prune at the cap, then only a third of what fits, most promising first.
  const std::string cap_text = std::to_string(static_cast<long long>(cap)) + "B";
  size_t under = 0;
  for (double p : peaks) under += p <= cap;
  const std::string budget = std::to_string((under + 2) / 3);
  CliResult pruned = run_podsim({"search", exp, "--out", "pruned", "-j", "2", "--budget", budget, "--explain",
                                 "--no-plot", "--set", "search.memory_cap=" + cap_text});
  ASSERT_EQ(pruned.code, 0) << pruned.out << pruned.err;
  EXPECT_NE(pruned.out.find("over the memory cap"), std::string::npos) << pruned.out;
  EXPECT_NE(pruned.out.find("  dropped "), std::string::npos) << pruned.out;  // each one with its peak
  Table ranked = read_tsv(test_dir() + "/pruned/ranking.tsv");
  ASSERT_EQ(ranked.size(), std::stoul(budget));
  EXPECT_EQ(ranked.front().at("candidate"), best_under_cap);
  EXPECT_NE(pruned.out.find("why " + best_under_cap + " wins over the runner-up"), std::string::npos) << pruned.out;
  // The same simulation gives the same figure in both searches.
  EXPECT_EQ(step_time(test_dir() + "/pruned/sweep/runs/" + best_under_cap),
            step_time(test_dir() + "/all/sweep/runs/" + best_under_cap));

  // Resuming: the same search again runs nothing.
  CliResult again = run_podsim({"search", exp, "--out", "pruned", "--budget", budget, "--no-plot", "--set",
                                "search.memory_cap=" + cap_text});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find(budget + " done before, 0 to run"), std::string::npos) << again.err;

  // best.yaml runs as it is and gives the winner's step time.
  CliResult run = run_podsim({"run", test_dir() + "/pruned/best.yaml", "--out", "best", "-q"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(step_time(test_dir() + "/best"), step_time(test_dir() + "/pruned/sweep/runs/" + best_under_cap));
}

TEST(SearchCli, StageTwoPeaksAreMemoryOnlyPeaks) {
  // Stage 2 plans every candidate as `podsim run --memory-only` does; pick three of different kinds.
  const std::string exp = write_file("space.yaml", kSpace);
  CliResult dry = run_podsim({"search", exp, "--out", "s", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  for (const std::string name : {"data4-none", "fsdp2-model2-none", "model4-none-sp"}) {
    bool seen = false;
    for (const auto& c : read_tsv(test_dir() + "/s/candidates.tsv")) {
      if (c.at("candidate") != name) continue;
      seen = true;
      std::vector<std::string> args = {"run", exp, "--memory-only", "--out", "m-" + name, "-q"};
      // The candidate's overrides, from the search's sweep: run it the same way by hand.
      std::string strategies = c.at("strategies");
      for (char& ch : strategies)
        if (ch == '+') ch = ',';
      args.insert(args.end(), {"--set", "strategy.name=[" + strategies + "]"});
      std::string axes, shape;
      std::stringstream mesh(c.at("mesh"));  // "fsdp 2 x model 2"
      std::string axis, size, x;
      while (mesh >> axis >> size) {
        axes += (axes.empty() ? "" : ",") + axis;
        shape += (shape.empty() ? "" : ",") + size;
        mesh >> x;
      }
      args.insert(args.end(), {"--set", "mesh.axes=[" + axes + "]", "--set", "mesh.shape=[" + shape + "]", "--set",
                               "workload.remat=none"});
      if (name.find("-sp") != std::string::npos) args.insert(args.end(), {"--set", "strategy.sequence_parallel=true"});
      CliResult m = run_podsim(args);
      ASSERT_EQ(m.code, 0) << m.err;
      auto s = nlohmann::json::parse(read_file(test_dir() + "/m-" + name + "/summary.json"));
      double most = 0;
      for (const auto& r : s["roles"]) most = std::max(most, r["peak_memory_bytes"].get<double>());
      EXPECT_EQ(std::stod(c.at("peak_memory_bytes")), most) << name;
    }
    EXPECT_TRUE(seen) << name;
  }
}

TEST(SearchCli, BadSearchInputIsLocated) {
  const std::string exp = write_file("bad.yaml", std::string(kSpace) + "search2: {}\n");
  CliResult r = run_podsim({"search", exp, "--dry-run"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.yaml:4:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'search'"), std::string::npos) << r.err;

  const std::string alg = write_file("alg.yaml", std::string(kSpace) + "  # more\n");
  r = run_podsim({"search", alg, "--dry-run", "--set", "search.algorithms=[rign]"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("PODSIM-CFG-013"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'ring'"), std::string::npos) << r.err;

  // Nothing fits: a clear error, not an empty table.
  r = run_podsim({"search", exp.substr(0, exp.size() - 8) + "alg.yaml", "--dry-run", "--set",
                  "search.memory_cap=1KiB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no candidate of the search fits"), std::string::npos) << r.err;
}
