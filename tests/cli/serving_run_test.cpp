// Serving runs end to end (docs/serving.md, "The serving engine"): `podsim run` of an experiment with a serving
// section writes its folder (summary.json's serving object, requests.csv, iterations.csv, the trace); the default
// mode's interpolated iteration times stay within 1 % of exact mode's on every reported figure; bad serving input
// fails with its error id, its location and exit 2, writing nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// A small Llama-shaped model (grouped-query attention, SwiGLU) wide enough that its iterations' times follow their
// batch and contexts, on a 2 x 2 slice under 1-D weight-stationary (megatron).
std::string experiment(const std::string& serving, const std::string& workload_extra = "") {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
         "workload: {preset: llm-tiny, layers: 2, d_model: 1024, heads: 8, kv_heads: 2, d_ff: 4096, vocab: 2048, "
         "max_context: 2048" + workload_extra + "}\n"
         "strategy: {name: spmd}\n"
         "serving:\n" + serving;
}

const std::string kStream =
    "  requests: {count: 10, input_tokens: [20, 300], output_tokens: [8, 40], arrival: poisson, rate: 400, seed: 3}\n";

nlohmann::json run(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  const std::string path = write_file(name + ".yaml", yaml);
  std::vector<std::string> args = {"run", path, "--out", test_dir() + "/" + name, "-q"};
  for (const auto& s : sets) args.push_back("--set"), args.push_back(s);
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

TEST(ServingRun, WritesTheServingFiguresAndTheRequestsTable) {
  const auto j = run("chunked", experiment(kStream + "  engine: {policy: chunked, slots: 4, max_batched_tokens: 128, "
                                                     "kv: paged, page_tokens: 16, pages: 48}\n"));
  ASSERT_TRUE(j.contains("serving"));
  const auto& s = j["serving"];
  EXPECT_EQ(s["requests"], 10);
  for (const char* k : {"ttft_s", "tpot_s", "itl_s", "e2e_s"})
    for (const char* q : {"mean", "p50", "p90", "p99"}) EXPECT_GT(s[k][q].get<double>(), 0) << k << " " << q;
  // Throughputs over the duration, as benchmark_serving divides them.
  const double T = s["duration_s"];
  const double out_rate = s["output_tokens_per_s"].get<double>();
  EXPECT_NEAR(out_rate, s["output_tokens"].get<double>() / T, 1e-6 * out_rate);
  EXPECT_NEAR(s["per_chip"]["output_tokens_per_s"].get<double>() * 4, s["output_tokens_per_s"].get<double>(), 1e-3);
  // Every iteration's kind is counted and the kinds' times add up to the duration less the idle gaps.
  double busy = 0;
  int64_t iterations = 0;
  for (const char* k : {"prefill", "decode", "mixed"}) {
    busy += s["iterations"][k]["time_s"].get<double>();
    iterations += s["iterations"][k]["count"].get<int64_t>();
  }
  EXPECT_LE(busy, T + 3e-9);  // three sums, each rounded to the nanosecond
  EXPECT_GT(s["iterations"]["mixed"]["count"].get<int64_t>(), 0);
  EXPECT_GT(s["iterations"]["mixed"]["mfu"].get<double>(), 0);
  EXPECT_GT(s["iterations"]["decode"]["mbu"].get<double>(), 0);
  // One row per request: its TTFT is first token less sent time, e2e finish less sent.
  std::istringstream csv(read_file(test_dir() + "/chunked/requests.csv"));
  std::string line;
  std::getline(csv, line);
  int rows = 0;
  double ttft_sum = 0;
  while (std::getline(csv, line)) {
    std::vector<double> f;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) f.push_back(std::stod(c));
    ASSERT_EQ(f.size(), 11u);
    EXPECT_NEAR(f[7], f[3] - f[2], 1e-8);
    EXPECT_NEAR(f[9], f[4] - f[2], 1e-8);
    ttft_sum += f[7];
    ++rows;
  }
  EXPECT_EQ(rows, 10);
  EXPECT_NEAR(ttft_sum / 10, s["ttft_s"]["mean"].get<double>(), 1e-8);
  std::istringstream it(read_file(test_dir() + "/chunked/iterations.csv"));
  int64_t lines = -1;
  while (std::getline(it, line)) ++lines;
  EXPECT_EQ(lines, iterations);
  EXPECT_TRUE(exists(test_dir() + "/chunked/trace.pftrace"));
}

// The default mode against exact mode on one small stream sent at once (so that both run the same schedule: with
// timed arrivals a request arriving near an iteration's end may wait one iteration more in one mode, which moves
// its TTFT by a whole iteration): every reported figure within 1 %.
void expect_within(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object()) {
    for (const auto& [k, v] : a.items())
      if (k != "shapes_simulated" && k != "exact") expect_within(v, b[k], path + "." + k);
    return;
  }
  if (!a.is_number()) return;
  const double x = a.get<double>(), y = b.get<double>();
  EXPECT_LE(std::abs(x - y), 0.01 * std::abs(y) + 1e-12) << path << ": default " << x << ", exact " << y;
}

TEST(ServingRun, InterpolatedIterationsWithinOnePercentOfExact) {
  for (const std::string policy : {"continuous", "chunked"}) {
    const std::string yaml = experiment(
        "  requests: {count: 10, input_tokens: [100, 600], output_tokens: [16, 48], arrival: all_at_once, seed: 3}\n"
        "  engine: {policy: " + policy + ", slots: 4, max_batched_tokens: 256}\n");
    const auto d = run("bucketed_" + policy, yaml);
    const auto e = run("exact_" + policy, yaml, {"serving.exact=true"});
    ASSERT_TRUE(d.contains("serving") && e.contains("serving"));
    EXPECT_LT(d["serving"]["shapes_simulated"].get<int64_t>(), e["serving"]["shapes_simulated"].get<int64_t>());
    expect_within(d["serving"], e["serving"], policy);
  }
}

// An error: exit 2, the id, the location, no folder.
void expect_error(const std::string& name, const std::string& yaml, const std::string& id, const std::string& where) {
  const std::string path = write_file(name + ".yaml", yaml);
  const std::string out = test_dir() + "/" + name;
  const CliResult r = run_podsim({"run", path, "--out", out});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(id), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(where), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

TEST(ServingRun, BadInputIsLocated) {
  expect_error("too_long",
               experiment("  requests: {count: 2, input_tokens: 2000, output_tokens: 100}\n"), "PODSIM-SRV-001",
               "too_long.yaml:");
  expect_error("small_cache",
               experiment("  requests: {count: 2, input_tokens: 500, output_tokens: 100}\n"
                          "  engine: {slot_tokens: 256}\n"),
               "PODSIM-SRV-002", "small_cache.yaml:");
  expect_error("few_pages",
               experiment("  requests: {count: 2, input_tokens: 500, output_tokens: 100}\n"
                          "  engine: {kv: paged, page_tokens: 64, pages: 4}\n"),
               "PODSIM-SRV-002", "few_pages.yaml:");
  expect_error("policy", experiment("  requests: {count: 2, input_tokens: 50, output_tokens: 10}\n"
                                    "  engine: {policy: speculative}\n"),
               "PODSIM-SRV-004", "policy.yaml:");
  write_file("unordered.csv", "arrival_s,input_tokens,output_tokens\n0.0,20,5\n0.5,30,5\n0.25,10,5\n");
  expect_error("unordered", experiment("  requests: {trace: unordered.csv}\n"), "PODSIM-SRV-003", "unordered.csv:4");
  write_file("malformed.csv", "arrival_s,input_tokens,output_tokens\n0.0,20\n");
  expect_error("malformed", experiment("  requests: {trace: malformed.csv}\n"), "PODSIM-SRV-003", "malformed.csv:2");
}

TEST(ServingRun, TraceStream) {
  write_file("trace.csv", "arrival_s,input_tokens,output_tokens\n0.0,20,5\n0.001,64,9\n0.002,33,3\n");
  const auto j = run("trace", experiment("  requests: {trace: trace.csv}\n  engine: {policy: static, slots: 2}\n"));
  ASSERT_TRUE(j.contains("serving"));
  EXPECT_EQ(j["serving"]["requests"], 3);
  EXPECT_EQ(j["serving"]["input_tokens"], 117);
  EXPECT_EQ(j["serving"]["output_tokens"], 17);
}

}  // namespace
