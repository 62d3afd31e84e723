// A sweep over serving keys (docs/sweeps.md, "results.db"): each run is a serving run, and results.db holds the
// serving figures of each run's summary.json (throughput, TTFT, TPOT, ITL, end-to-end latency, the disaggregated
// runs' KV transfer time), NULL where a run has no such figure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"
#include "tests/cli/sweep_util.h"

using namespace podsim::test;

namespace {

const char* kServingSweep = R"(name: serving
base:
  hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}
  workload: {preset: llm-tiny, layers: 2, d_model: 256, heads: 4, d_ff: 1024, vocab: 1024, max_context: 512}
  strategy: {name: spmd}
  serving:
    requests: {count: 6, input_tokens: [20, 100], output_tokens: [4, 20], arrival: poisson, rate: 400, seed: 3}
grid:
  serving.engine.policy: [static, continuous, chunked]
runs:
  - {}
  - {serving.disaggregated.prefill_pod: [2, 2], serving.disaggregated.link: ici}
run_name: "{serving.engine.policy}-{index}"
)";

double num(const std::string& s) { return std::stod(s); }

}  // namespace

TEST(SweepServing, ResultsDbHoldsEachRunsServingFigures) {
  const std::string file = write_file("serving_sweep.yaml", kServingSweep);
  const CliResult r = run_podsim({"sweep", file, "-j", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string dir = test_dir() + "/results/serving";
  const std::vector<Row> rows = db_rows(dir + "/results.db");
  ASSERT_EQ(rows.size(), 6u);
  for (const Row& row : rows) {
    SCOPED_TRACE(row.at("name"));
    EXPECT_EQ(row.at("status"), "done");
    const auto s = nlohmann::json::parse(read_file(dir + "/runs/" + row.at("name") + "/summary.json"))["serving"];
    EXPECT_EQ(s["policy"], row.at("serving.engine.policy"));
    EXPECT_EQ(num(row.at("output_tokens_per_s")), s["output_tokens_per_s"].get<double>());
    EXPECT_EQ(num(row.at("requests_per_s")), s["requests_per_s"].get<double>());
    EXPECT_EQ(num(row.at("ttft_mean_s")), s["ttft_s"]["mean"].get<double>());
    EXPECT_EQ(num(row.at("ttft_p50_s")), s["ttft_s"]["p50"].get<double>());
    EXPECT_EQ(num(row.at("ttft_p99_s")), s["ttft_s"]["p99"].get<double>());
    EXPECT_EQ(num(row.at("tpot_mean_s")), s["tpot_s"]["mean"].get<double>());
    EXPECT_EQ(num(row.at("itl_p50_s")), s["itl_s"]["p50"].get<double>());
    EXPECT_EQ(num(row.at("itl_p99_s")), s["itl_s"]["p99"].get<double>());
    EXPECT_EQ(num(row.at("e2e_mean_s")), s["e2e_s"]["mean"].get<double>());
    EXPECT_GT(num(row.at("output_tokens_per_s")), 0);
    if (s.contains("disaggregated")) {
      EXPECT_EQ(num(row.at("kv_transfer_mean_s")), s["disaggregated"]["kv_transfer_s"]["mean"].get<double>());
    } else {
      EXPECT_EQ(row.at("kv_transfer_mean_s"), kNull);  // one slice: no transfer, never a made-up figure
    }
  }
}
