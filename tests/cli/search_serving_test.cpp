// `podsim search` of a serving experiment (docs/search.md, "Serving"; sim/search/serving_search.h): the candidates
// its search section allows, those a layout cannot hold dropped with the reason, every other one a serving run of the
// same stream; the ranking by output tokens/s among those within the latency target, each figure equal to its run's
// summary.json; best.yaml reproduces the winner; a target nobody meets is exit 1; bad values are located errors.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

std::string experiment(const std::string& search, const std::string& policy = "continuous") {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
         "workload: {preset: llm-tiny, layers: 2, d_model: 512, heads: 8, kv_heads: 2, d_ff: 2048, vocab: 2048, "
         "max_context: 512}\n"
         "serving:\n"
         "  requests: {count: 8, input_tokens: [20, 200], output_tokens: [4, 24], arrival: all_at_once, seed: 2}\n"
         "  engine: {policy: " + policy + ", slots: 4}\n"
         "search:\n" + search;
}

// ranking.tsv as rows of column -> text.
std::vector<std::map<std::string, std::string>> tsv(const std::string& path) {
  std::istringstream in(read_file(path));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  {
    std::stringstream hs(line);
    for (std::string c; std::getline(hs, c, '\t');) head.push_back(c);
  }
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::stringstream ls(line);
    std::map<std::string, std::string> r;
    size_t i = 0;
    for (std::string c; std::getline(ls, c, '\t') && i < head.size(); ++i) r[head[i]] = c;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

TEST(SearchServing, RanksTheCandidatesWithinTheTargetByThroughput) {
  const std::string exp = write_file("ranked.yaml", experiment("  layouts: [1d, 2d, 1d_kv_batch]\n"
                                                               "  replicas: [1, 2]\n"
                                                               "  weight_dtypes: [bf16, int8]\n"
                                                               "  tpot_target: 1s\n"));
  const std::string out = test_dir() + "/ranked";
  const CliResult r = run_podsim({"search", exp, "--out", out, "-j", "2"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // 3 layouts x 2 replica counts x 2 formats: 2-D over replicas is dropped before anything runs, with its reason.
  // The batch-split cache under continuous batching runs: its decodes are every slot (the engine's batch padding),
  // its prefills of one prompt under the same layout split by heads.
  const std::string cands = read_file(out + "/candidates.tsv");
  EXPECT_NE(cands.find("r2-2d-wbf16\tinvalid\t2-D weight-stationary candidates use the whole pod"), std::string::npos)
      << cands;
  EXPECT_NE(cands.find("1d_kv_batch-wint8\tsimulate\t\tstrategy.name=spmd serving.prefill.strategy.name=spmd "
                       "serving.prefill.strategy.kv_sharding=heads strategy.kv_sharding=batch"),
            std::string::npos)
      << cands;
  const auto kvb = nlohmann::json::parse(read_file(out + "/sweep/runs/1d_kv_batch-wbf16/summary.json"));
  EXPECT_TRUE(kvb["serving"]["phases"]["decode"]["collectives"].contains("all_to_all"));  // queries to their rows
  EXPECT_FALSE(kvb["serving"]["phases"]["prefill"]["collectives"].contains("all_to_all"));
  const auto rows = tsv(out + "/ranking.tsv");
  ASSERT_EQ(rows.size(), 10u);  // 1d, 2d, r2-1d, 1d_kv_batch, r2-1d_kv_batch, each in bf16 and int8
  double last = 1e300;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("name"));
    EXPECT_EQ(row.at("status"), "done");
    EXPECT_EQ(row.at("meets_targets"), "true");  // 1 s a token: every run keeps it
    // Each figure is its run's, and the ranking falls in output tokens/s.
    const auto s = nlohmann::json::parse(read_file(out + "/sweep/runs/" + row.at("name") + "/summary.json"));
    const double tps = std::stod(row.at("output_tokens_per_s"));
    EXPECT_NEAR(tps, s["serving"]["output_tokens_per_s"].get<double>(), 1e-6 * tps);
    EXPECT_NEAR(std::stod(row.at("tpot_p99_s")), s["serving"]["tpot_s"]["p99"].get<double>(), 1e-9);
    EXPECT_NEAR(std::stod(row.at("output_tokens_per_s_per_chip")) * 4, tps, 1e-6 * tps);
    EXPECT_LE(tps, last);
    last = tps;
  }
  // best.yaml runs as an experiment and reproduces the winner's stream.
  const CliResult b = run_podsim({"run", out + "/best.yaml", "--out", test_dir() + "/best", "-q"});
  ASSERT_EQ(b.code, 0) << b.err;
  const auto best = nlohmann::json::parse(read_file(test_dir() + "/best/summary.json"));
  EXPECT_NEAR(best["serving"]["output_tokens_per_s"].get<double>(), std::stod(rows[0].at("output_tokens_per_s")),
              1e-6 * std::stod(rows[0].at("output_tokens_per_s")));
}

TEST(SearchServing, ATargetNobodyMeetsRanksThemAllAndExitsOne) {
  const std::string exp =
      write_file("tight.yaml", experiment("  layouts: [1d]\n  weight_dtypes: [bf16, int8]\n  tpot_target: 1ns\n"));
  const std::string out = test_dir() + "/tight";
  const CliResult r = run_podsim({"search", exp, "--out", out});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("no candidate meets the targets (p99 TPOT <= "), std::string::npos) << r.out;
  const auto rows = tsv(out + "/ranking.tsv");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_EQ(row.at("meets_targets"), "false");
  EXPECT_FALSE(exists(out + "/best.yaml"));
}

TEST(SearchServing, StaticBatchingTakesTheBatchSplitCacheAndDryRunRunsNothing) {
  const std::string exp = write_file("static.yaml", experiment("  layouts: [1d_kv_batch]\n  slots: [4, 8]\n", "static"));
  const CliResult r = run_podsim({"search", exp, "--out", test_dir() + "/static", "--dry-run", "--explain"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("note: --explain compares two steps' time breakdowns"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("would run 1d_kv_batch-slots4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("would run 1d_kv_batch-slots8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("strategy.kv_sharding=batch serving.engine.slots=8"), std::string::npos) << r.out;
  EXPECT_FALSE(exists(test_dir() + "/static/sweep"));
}

TEST(SearchServing, TheBatchSplitCacheIsDroppedWithoutBatchPaddingOrUnderChunkedBatching) {
  const std::string exp = write_file("unpadded.yaml", experiment("  layouts: [1d, 1d_kv_batch]\n"));
  const CliResult r = run_podsim({"search", exp, "--out", test_dir() + "/unpadded", "--dry-run", "--set",
                                  "serving.engine.batch_padding=none"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("invalid 1d_kv_batch                        a KV cache split over the batch needs decodes of "
                       "every slot (serving.engine.batch_padding: engine)"),
            std::string::npos)
      << r.out;
  const std::string chunked = write_file("chunked.yaml", experiment("  layouts: [1d, 1d_kv_batch]\n", "chunked"));
  const CliResult c = run_podsim({"search", chunked, "--out", test_dir() + "/chunked", "--dry-run"});
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("needs one row per sequence; chunked batching packs its iterations"), std::string::npos)
      << c.out;
}

TEST(SearchServing, BadSearchValuesAreLocated) {
  const std::string exp = write_file("bad.yaml", experiment("  layouts: [3d]\n"));
  const CliResult r = run_podsim({"search", exp, "--dry-run", "--out", test_dir() + "/bad"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.yaml:7:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1d_kv_batch"), std::string::npos) << r.err;  // what would be valid
}

// A request trace named relative to the experiment file is read from there by every candidate's run (the sweep's
// base.yaml lives in the search folder).
TEST(SearchServing, ARequestTraceBesideTheExperimentIsFound) {
  write_file("stream.csv", "arrival_s,input_tokens,output_tokens\n0,50,5\n0,60,6\n");
  const std::string exp = write_file(
      "traced.yaml",
      "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
      "workload: {preset: llm-tiny, layers: 2, d_model: 512, heads: 8, kv_heads: 2, d_ff: 2048, vocab: 2048, "
      "max_context: 512}\n"
      "serving:\n  requests: {trace: stream.csv}\n  engine: {policy: continuous, slots: 2}\n"
      "search:\n  layouts: [1d]\n");
  const std::string out = test_dir() + "/elsewhere/traced";
  const CliResult r = run_podsim({"search", exp, "--out", out});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto rows = tsv(out + "/ranking.tsv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("status"), "done");
  const auto s = nlohmann::json::parse(read_file(out + "/sweep/runs/1d/summary.json"));
  EXPECT_EQ(s["serving"]["requests"], 2);
  EXPECT_EQ(s["serving"]["output_tokens"], 11);
}
