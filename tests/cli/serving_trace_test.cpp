// A serving run's timeline (docs/serving.md, "Figures"; sim/serving/run/serving_trace.h): Perfetto's own trace
// processor loads it clean, with one slice per iteration on the engine's track, every request as a slice holding its
// wait for the first token and its decoding on lanes shared by requests in flight, counters per iteration, the KV
// cache transfers of a disaggregated run on a track of their own; run.trace.format and compress choose the file.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/cli_util.h"
#include "tests/common/perfetto_check.h"

using namespace podsim::test;

namespace {

// 12 requests over 20 ms, two of a single output token (sampled by the prefill: no decoding).
const char* kStream =
    "arrival_s,input_tokens,output_tokens\n"
    "0.000,120,9\n0.001,40,1\n0.002,200,14\n0.004,64,6\n0.005,33,20\n0.007,150,3\n"
    "0.009,90,1\n0.012,20,11\n0.014,180,7\n0.016,75,16\n0.018,128,5\n0.020,60,2\n";

std::string experiment(const std::string& engine, const std::string& extra = "") {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
         "workload: {preset: llm-tiny, layers: 2, d_model: 512, heads: 8, kv_heads: 2, d_ff: 2048, vocab: 2048, "
         "max_context: 1024}\n"
         "strategy: {name: spmd}\n"
         "serving:\n"
         "  requests: {trace: " + write_file("stream.csv", kStream) + "}\n"
         "  engine: " + engine + "\n" + extra;
}

// Runs the experiment into test_dir()/name; returns host.json.
nlohmann::json run(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  const std::string path = write_file(name + ".yaml", yaml);
  std::vector<std::string> args = {"run", path, "--out", test_dir() + "/" + name, "-q"};
  for (const auto& s : sets) args.push_back("--set"), args.push_back(s);
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/host.json"));
}

// requests.csv's rows as (output tokens, TTFT) and iterations.csv's row count.
struct Tables {
  std::vector<int64_t> outputs;
  int64_t iterations = 0;
};
Tables tables(const std::string& dir) {
  Tables t;
  std::istringstream req(read_file(dir + "/requests.csv")), it(read_file(dir + "/iterations.csv"));
  std::string line;
  std::getline(req, line);
  std::vector<std::string> head;
  {
    std::stringstream hs(line);
    for (std::string c; std::getline(hs, c, ',');) head.push_back(c);
  }
  size_t out_col = 0;
  while (out_col < head.size() && head[out_col] != "output_tokens") ++out_col;
  while (std::getline(req, line)) {
    std::stringstream ls(line);
    std::vector<std::string> f;
    for (std::string c; std::getline(ls, c, ',');) f.push_back(c);
    t.outputs.push_back(std::stoll(f.at(out_col)));
  }
  std::getline(it, line);
  while (std::getline(it, line)) ++t.iterations;
  return t;
}

// Slices per track name prefix ("in flight 2" counts as "in flight") and per slice name.
std::map<std::string, int64_t> counts(const PerfettoCheck& c) {
  std::map<std::string, int64_t> m;
  for (const auto& row : c.rows) m[row["k"].get<std::string>()] += row["n"].get<int64_t>();
  return m;
}

const char* kByTrack =
    "select case when t.name like 'in flight%' then 'track:in flight' else 'track:' || t.name end k, count(*) n "
    "from slice s join track t on s.track_id = t.id group by k";
const char* kByName =
    "select case when name like 'request %' then 'name:request' else 'name:' || name end k, count(*) n from slice "
    "group by k";
const char* kCounters =
    "select 'counter:' || t.name k, count(*) n from counter c join counter_track t on c.track_id = t.id group by k";

}  // namespace

TEST(ServingTrace, EveryIterationAndRequestIsASliceInAPerfettoTrace) {
  const auto host = run("continuous", experiment("{policy: continuous, slots: 4, slot_tokens: 256}"));
  ASSERT_EQ(host["trace"]["file"], "trace.pftrace");
  const std::string dir = test_dir() + "/continuous";
  const Tables t = tables(dir);
  ASSERT_EQ(t.outputs.size(), 12u);
  int64_t decoding = 0;
  for (int64_t o : t.outputs) decoding += o > 1;
  ASSERT_EQ(decoding, 10);  // a request of one output token has no decoding slice
  const PerfettoCheck c = perfetto_check(dir + "/trace.pftrace", {kByTrack, kByName, kCounters}, dir + "/check.err");
  ASSERT_FALSE(c.no_engine) << kNoTraceChecker;
  ASSERT_EQ(c.rc, 0) << c.output;
  std::map<std::string, int64_t> n = counts(c);
  EXPECT_EQ(n["track:iterations"], t.iterations);
  EXPECT_EQ(n["track:in flight"], 12 * 2 + decoding);
  EXPECT_EQ(n["name:request"], 12);
  EXPECT_EQ(n["name:to first token"], 12);
  EXPECT_EQ(n["name:decoding"], decoding);
  EXPECT_EQ(n["name:prefill"] + n["name:decode"], t.iterations);
  for (const char* k : {"counter:sequences in the iteration", "counter:sequences holding a slot", "counter:KV cache"})
    EXPECT_EQ(n[k], t.iterations) << k;
  EXPECT_EQ(host["trace"]["events"].get<int64_t>(), c.summary["slices"].get<int64_t>() +
                                                        c.summary["counter_values"].get<int64_t>());
}

TEST(ServingTrace, DisaggregatedRunsShowBothSlicesAndTheCacheTransfers) {
  const auto host = run("disaggregated",
                        experiment("{policy: continuous, slots: 4, slot_tokens: 256}",
                                   "  disaggregated: {prefill_pod: [2, 2], prefill_batch: 1, link: ici}\n"));
  const std::string dir = test_dir() + "/disaggregated";
  const Tables t = tables(dir);
  int64_t decoding = 0;
  for (int64_t o : t.outputs) decoding += o > 1;
  const PerfettoCheck c = perfetto_check(dir + "/trace.pftrace", {kByTrack}, dir + "/check.err");
  ASSERT_FALSE(c.no_engine) << kNoTraceChecker;
  ASSERT_EQ(c.rc, 0) << c.output;
  std::map<std::string, int64_t> n = counts(c);
  EXPECT_EQ(n["track:decode slice"] + n["track:prefill slice"], t.iterations);
  EXPECT_EQ(n["track:prefill slice"], 12);  // one prompt a prefill
  EXPECT_EQ(n["track:KV cache transfers"], decoding);  // a request of one token never leaves the prefill slice
}

TEST(ServingTrace, TheRunsTraceOptionsChooseTheFile) {
  const std::string yaml = experiment("{policy: static, slots: 4}");
  EXPECT_EQ(run("json", yaml, {"run.trace.format=json"})["trace"]["file"], "trace.json");
  EXPECT_TRUE(exists(test_dir() + "/json/trace.json"));
  EXPECT_EQ(run("gz", yaml, {"run.trace.compress=true"})["trace"]["file"], "trace.pftrace.gz");
  EXPECT_TRUE(exists(test_dir() + "/gz/trace.pftrace.gz"));
  const auto off = run("off", yaml, {"run.trace.format=off"});
  EXPECT_TRUE(off["trace"]["file"].is_null());
  EXPECT_FALSE(exists(test_dir() + "/off/trace.pftrace"));
  EXPECT_FALSE(exists(test_dir() + "/off/trace.json"));
  const PerfettoCheck c = perfetto_check(test_dir() + "/json/trace.json", {kByName}, test_dir() + "/check.err");
  ASSERT_FALSE(c.no_engine) << kNoTraceChecker;
  EXPECT_EQ(c.rc, 0) << c.output;
  EXPECT_EQ(counts(c)["name:request"], 12);
}
