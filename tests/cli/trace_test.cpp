// Traces written by `podsim run`: Perfetto's own trace processor (tools/perfetto_check/check) loads them with no
// import problems and with exactly the slices, counter values and flows the run tallied in host.json; the run.trace
// options (format, compression, detail, chip subset, time window, chip limit) shape what is written.
//
// The checker's engine is installed by tools/bootstrap test (tools/perfetto_check/check --fetch); without it these
// tests fail: a trace that was not checked is not a pass.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/cli/cli_util.h"
#include "tests/common/perfetto_check.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

using Check = PerfettoCheck;

Check check(const std::string& trace, const std::vector<std::string>& sql = {}) {
  return perfetto_check(trace, sql, test_dir() + "/check.err");
}

json host(const std::string& dir) { return json::parse(read_file(dir + "/host.json")); }

// Runs podsim, then checks the trace against host.json's tally; returns the check.
Check run_and_check(const std::string& exp, const std::vector<std::string>& sets, const std::string& out,
                    const std::vector<std::string>& sql = {}) {
  std::vector<std::string> args = {"run", exp, "--out", out};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  auto r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  json t = host(out)["trace"];
  Check c = check(out + "/" + t["file"].get<std::string>(), sql);
  EXPECT_FALSE(c.no_engine) << kNoTraceChecker;
  if (c.no_engine) return c;
  EXPECT_EQ(c.rc, 0) << c.output;
  EXPECT_TRUE(c.stats.empty()) << c.output;
  EXPECT_EQ(c.summary.value("slices", -1), t["slices"].get<int64_t>()) << c.output;
  EXPECT_EQ(c.summary.value("counter_values", -1), t["counter_values"].get<int64_t>()) << c.output;
  EXPECT_EQ(c.summary.value("flows", -1), t["flows"].get<int64_t>()) << c.output;
  return c;
}

std::set<std::string> column(const std::vector<json>& rows, const char* key) {
  std::set<std::string> out;
  for (const auto& r : rows)
    if (r.contains(key)) out.insert(r[key].is_string() ? r[key].get<std::string>() : r[key].dump());
  return out;
}

std::string collective(const std::string& dims, const std::string& bytes) {
  return write_file("ar.yaml", "hardware:\n  preset: tpu-v3\n  pod:\n    dims: " + dims +
                                   "\nworkload:\n  model: collective\n  op: all_reduce\n  bytes: " + bytes + "\n");
}

const char* kProcesses = "select name from process where name is not null";
const char* kTrackNames = "select distinct name from track where name is not null";

}  // namespace

TEST(TraceTest, QuickstartTraceLoadsWithTheTalliedCounts) {
  std::string out = test_dir() + "/qs";
  Check c = run_and_check(source_dir() + "/configs/quickstart.yaml", {}, out, {kTrackNames});
  if (c.no_engine) return;  // failed in run_and_check: no checker
  EXPECT_GT(c.summary["slices"].get<int64_t>(), 1000);
  EXPECT_GT(c.summary["counter_values"].get<int64_t>(), 0);
  auto names = column(c.rows, "name");
  for (const char* t : {"Steps", "TensorCore 0 ops", "MXU utilization", "HBM bandwidth"})
    EXPECT_TRUE(names.count(t)) << t << "\n" << c.output;
  // Op slices carry their figures as args.
  Check a = check(out + "/trace.pftrace",
                  {"select count(*) n from slice s join args a using (arg_set_id) where a.key = 'debug.flops'"});
  ASSERT_FALSE(a.rows.empty()) << a.output;
  EXPECT_GT(a.rows[0]["n"].get<int64_t>(), 100) << a.output;
}

TEST(TraceTest, CollectiveTraceHasLinksFlowsAndOneProcessPerChip) {
  std::string out = test_dir() + "/ar";
  Check c = run_and_check(collective("[4, 4]", "1MiB"), {}, out, {kProcesses, kTrackNames});
  if (c.no_engine) return;  // failed in run_and_check: no checker
  EXPECT_GT(c.summary["flows"].get<int64_t>(), 0);
  auto names = column(c.rows, "name");
  EXPECT_TRUE(names.count("chip 0 (x=0,y=0)")) << c.output;
  EXPECT_TRUE(names.count("chip 15 (x=3,y=3)")) << c.output;
  int chips = 0, links = 0;
  for (const auto& n : names) {
    chips += n.rfind("chip ", 0) == 0;
    links += n.rfind("ICI ", 0) == 0 && n.find("bandwidth") == std::string::npos;
  }
  EXPECT_EQ(chips, 16) << c.output;
  EXPECT_EQ(links, 4) << "one track per link direction, named alike on every chip\n" << c.output;
}

TEST(TraceTest, JsonAndGzipTracesLoadWithTheSameCounts) {
  std::string exp = collective("[2, 2]", "256KiB");
  std::string pb = test_dir() + "/pb", js = test_dir() + "/js", gz = test_dir() + "/gz";
  Check a = run_and_check(exp, {}, pb);
  if (a.no_engine) return;  // failed in run_and_check: no checker
  Check b = run_and_check(exp, {"run.trace.format=json"}, js);
  Check g = run_and_check(exp, {"run.trace.format=json", "run.trace.compress=true"}, gz);
  EXPECT_TRUE(exists(js + "/trace.json"));
  EXPECT_TRUE(exists(gz + "/trace.json.gz"));
  EXPECT_EQ(a.summary["slices"], b.summary["slices"]);
  EXPECT_EQ(a.summary["flows"], b.summary["flows"]);
  EXPECT_EQ(b.summary["slices"], g.summary["slices"]);
  auto pgz = run_podsim({"run", exp, "--out", test_dir() + "/pgz", "--set", "run.trace.compress=true"});
  ASSERT_EQ(pgz.code, 0) << pgz.err;
  Check p = check(test_dir() + "/pgz/trace.pftrace.gz");
  EXPECT_EQ(p.rc, 0) << p.output;
  EXPECT_EQ(p.summary["slices"], a.summary["slices"]);
}

TEST(TraceTest, DetailOpsLeavesOutUnitsAndLinks) {
  std::string out = test_dir() + "/ops";
  Check c = run_and_check(collective("[2, 2]", "256KiB"), {"run.trace.detail=ops"}, out, {kTrackNames});
  if (c.no_engine) return;  // failed in run_and_check: no checker
  EXPECT_EQ(c.summary["flows"].get<int64_t>(), 0);
  for (const auto& n : column(c.rows, "name")) {
    EXPECT_NE(n.rfind("ICI ", 0), 0u) << n;
    EXPECT_NE(n.rfind("MXU", 0), 0u) << n;
  }
  json full = host(out)["trace"];
  auto r = run_podsim({"run", collective("[2, 2]", "256KiB"), "--out", test_dir() + "/links"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(full["events"].get<int64_t>(), host(test_dir() + "/links")["trace"]["events"].get<int64_t>());
}

TEST(TraceTest, ChipSubsetAndTimeWindow) {
  std::string out = test_dir() + "/sub";
  Check c = run_and_check(collective("[4, 4]", "1MiB"), {"run.trace.chips=[0, 5]"}, out, {kProcesses});
  if (c.no_engine) return;  // failed in run_and_check: no checker
  auto procs = column(c.rows, "name");
  ASSERT_EQ(procs.size(), 2u) << c.output;
  EXPECT_EQ(procs.begin()->rfind("chip 0 ", 0), 0u) << c.output;
  EXPECT_EQ(std::next(procs.begin())->rfind("chip 5 ", 0), 0u) << c.output;

  // A window keeps slices inside it (clipped at its edges).
  double T = json::parse(read_file(out + "/summary.json"))["step_time_s"].get<double>();
  int64_t to_ns = static_cast<int64_t>(T * 0.5e9);
  std::string win = test_dir() + "/win";
  Check w = run_and_check(collective("[4, 4]", "1MiB"), {"run.trace.to=" + std::to_string(to_ns) + "ns"}, win,
                          {"select max(ts + dur) hi from slice"});
  ASSERT_FALSE(w.rows.empty()) << w.output;
  EXPECT_LE(w.rows[0]["hi"].get<int64_t>(), to_ns + 1);
  // ... and drops what lies after it: fewer slices than the same run traced over the whole step.
  auto whole = run_podsim({"run", collective("[4, 4]", "1MiB"), "--out", test_dir() + "/whole"});
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_LT(host(win)["trace"]["slices"].get<int64_t>(), host(test_dir() + "/whole")["trace"]["slices"].get<int64_t>());
}

TEST(TraceTest, LargePodsWriteNoTraceByDefaultButCanOptIn) {
  std::string exp = collective("[17, 17]", "73984B");  // 64 x 289 x 4 bytes
  std::string out = test_dir() + "/big";
  auto r = run_podsim({"run", exp, "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(exists(out + "/trace.pftrace"));
  EXPECT_NE(r.out.find("no trace: the pod has 289 chips, more than run.trace.max_chips = 256"), std::string::npos)
      << r.out;
  EXPECT_EQ(host(out)["trace"]["events"].get<int64_t>(), 0);

  auto sub = run_podsim({"run", exp, "--out", test_dir() + "/sub", "--set", "run.trace.chips=[288]"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  EXPECT_TRUE(exists(test_dir() + "/sub/trace.pftrace"));

  auto all = run_podsim({"run", exp, "--out", test_dir() + "/all", "--set", "run.trace.max_chips=300"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_TRUE(exists(test_dir() + "/all/trace.pftrace"));
  EXPECT_GT(host(test_dir() + "/all")["trace"]["slices"].get<int64_t>(),
            host(test_dir() + "/sub")["trace"]["slices"].get<int64_t>() * 100);
}

TEST(TraceTest, WarnsBeforeWritingAHugeTrace) {
  auto r = run_podsim({"run", collective("[2, 2]", "256KiB"), "--out", test_dir() + "/w", "--set",
                       "run.trace.warn_events=10"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("podsim: warning: writing a trace of "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("more than run.trace.warn_events = 10"), std::string::npos) << r.out;
  auto q = run_podsim({"run", collective("[2, 2]", "256KiB"), "--out", test_dir() + "/q"});
  EXPECT_EQ(q.err.find("warning"), std::string::npos) << q.err;
}

TEST(TraceTest, FormatOffWritesNoTrace) {
  auto r = run_podsim({"run", collective("[2, 2]", "256KiB"), "--out", test_dir() + "/off", "--set",
                       "run.trace.format=off"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& e : std::filesystem::directory_iterator(test_dir() + "/off"))
    EXPECT_EQ(e.path().filename().string().rfind("trace", 0), std::string::npos) << e.path();
}

// Transfers of several chunks: every chunk is one flow from its send slice to its receive slice, each with ids of
// its own (flows once collided for chunk tags 2j and 2j+1, and all-to-all tags once left out the peer). Hand counts
// with 1 MiB chunks: an all-to-all of 16 MiB on 8 chips sends 7 blocks of 2 MiB, 2 chunks each, per chip (112); a
// collective_permute of 4 MiB on 4 chips sends 4 chunks per chip (16); a point-to-point send of 4 MiB sends 4
// chunks (and an acknowledgement, which carries no data and no flow).
void expect_one_flow_per_chunk(const std::string& yaml, const std::vector<std::string>& extra, int64_t flows,
                               bool load_in_perfetto) {
  std::string exp = write_file("multi.yaml", yaml);
  std::string out = test_dir() + "/multi" + std::to_string(flows);
  std::vector<std::string> args = {"run", exp, "--out", out};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_podsim(args);
  ASSERT_EQ(r.code, 0) << yaml << r.err;
  EXPECT_EQ(host(out)["trace"]["flows"].get<int64_t>(), flows) << yaml;
  if (!load_in_perfetto) return;
  Check c = check(out + "/trace.pftrace",
                  {"select count(*) n, count(distinct slice_out) sends, count(distinct slice_in) recvs from flow"});
  ASSERT_FALSE(c.no_engine) << kNoTraceChecker;
  EXPECT_EQ(c.rc, 0) << c.output;
  ASSERT_EQ(c.rows.size(), 1u) << c.output;
  EXPECT_EQ(c.rows[0]["n"].get<int64_t>(), flows) << yaml << c.output;
  EXPECT_EQ(c.rows[0]["sends"].get<int64_t>(), flows) << c.output;
  EXPECT_EQ(c.rows[0]["recvs"].get<int64_t>(), flows) << c.output;
}

TEST(TraceTest, EveryChunkOfACollectiveIsOneFlow) {
  expect_one_flow_per_chunk("hardware: {preset: tpu-v3, pod: {dims: [4, 2]}}\n"
                            "workload: {model: collective, op: all_to_all, bytes: 16MiB}\n", {}, 112, true);
  expect_one_flow_per_chunk("hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\n"
                            "workload: {model: collective, op: collective_permute, bytes: 4MiB}\n", {}, 16, false);
}

TEST(TraceTest, EveryChunkOfAPointToPointSendIsOneFlow) {
  expect_one_flow_per_chunk("hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\n"
                            "workload: {model: collective, op: all_gather, bytes: 4MiB}\n"
                            "strategy: {name: test_send_recv}\n",
                            {"--plugin", PODSIM_TEST_PLUGIN}, 4, true);
}
