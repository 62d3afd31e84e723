// Traces written by TraceWriter load cleanly into Perfetto's own trace processor (tools/perfetto_check/check) with
// the counts the writer tallied, tracks sit under their chip process, and a damaged trace makes the check fail.
//
// The checker's engine is installed by tools/bootstrap test (tools/perfetto_check/check --fetch); without it these
// tests fail: a trace that was not checked is not a pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/common/perfetto_check.h"
#include "tests/unit/trace_fixtures.h"

using namespace podsim;
using namespace podsim::test;
using nlohmann::json;

namespace {


// Queries whose rows the tests compare as "pid|name" or "src|dst" pairs.
const char* kTracksByChip =
    "select p.pid, t.name from track t join process p on p.upid = extract_arg(t.dimension_arg_set_id, 'upid') "
    "where t.name is not null";
const char* kThreadsByProcess =
    "select p.pid, t.name from thread t join process p using (upid) where t.name is not null";
const char* kCountersByProcess = "select p.pid, t.name from process_counter_track t join process p using (upid)";
const char* kFlows =
    "select so.name src, si.name dst from flow f join slice so on so.id = f.slice_out "
    "join slice si on si.id = f.slice_in order by so.ts";

using CheckResult = PerfettoCheck;

class TraceCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "podsim_trace_check_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::string path(const std::string& name) const { return m_dir + "/" + name; }

  // Runs the checker; fails the test when its engine is missing.
  CheckResult check(const std::string& trace, const std::vector<std::string>& sql = {}) {
    CheckResult r = perfetto_check(trace, sql, path("check.err"));
    EXPECT_FALSE(r.no_engine) << kNoTraceChecker;
    if (r.no_engine) m_skip = true;
    return r;
  }

  // Checks that the trace loads clean with the tallied counts; returns the result for further checks.
  CheckResult expect_clean(const std::string& trace, const TraceWriter::Tally& tally,
                           const std::vector<std::string>& sql = {}) {
    CheckResult r = check(trace, sql);
    if (m_skip) return r;
    EXPECT_EQ(r.rc, 0) << trace << "\n" << r.output;
    EXPECT_TRUE(r.stats.empty()) << trace << "\n" << r.output;
    EXPECT_EQ(r.summary.value("slices", -1), int64_t(tally.slices)) << trace;
    EXPECT_EQ(r.summary.value("counter_values", -1), int64_t(tally.counter_values)) << trace;
    EXPECT_EQ(r.summary.value("flows", -1), int64_t(tally.flows)) << trace;
    return r;
  }

  template <class Fill>
  TraceWriter::Tally write(const std::string& trace, TraceFormat fmt, bool gzip, Fill fill) {
    auto w = TraceWriter::create(trace, fmt, gzip);
    fill(*w);
    w->close();
    return w->tally();
  }

  std::string m_dir;
  bool m_skip = false;
};

std::string text(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// "a|b" for each row that has both columns.
std::set<std::string> pairs(const std::vector<json>& rows, const char* a, const char* b) {
  std::set<std::string> out;
  for (const json& r : rows) {
    if (r.contains(a) && r.contains(b)) out.insert(text(r[a]) + "|" + text(r[b]));
  }
  return out;
}

const std::set<std::string> kTinyFlows = {"convolution.2|barrier",
                                          "send all-reduce.3 chunk0|recv all-reduce.3 chunk0"};

}  // namespace

TEST_F(TraceCheckTest, TinyPftraceLoadsWithItsTracksUnderTheirChips) {
  for (bool gzip : {false, true}) {
    std::string trace = path(gzip ? "tiny.pftrace.gz" : "tiny.pftrace");
    TraceWriter::Tally tally = write(trace, TraceFormat::Pftrace, gzip, write_tiny_trace);
    CheckResult r = expect_clean(trace, tally, {kTracksByChip, kFlows});
    if (m_skip) return;  // already failed: no checker
    EXPECT_EQ(r.summary.value("tracks", -1), int64_t(tally.tracks));  // every declared track, none implicit
    std::set<std::string> want = {"1|Steps", "1|XLA Ops", "1|ICI +x", "1|MXU utilization",
                                  "2|Steps", "2|XLA Ops", "2|ICI +x", "2|HBM DMA", "2|HBM DMA 2", "2|Collectives",
                                  "2|all-reduce.3 [replica group 0]"};
    EXPECT_EQ(pairs(r.rows, "pid", "name"), want);
    EXPECT_EQ(pairs(r.rows, "src", "dst"), kTinyFlows);
  }
}

TEST_F(TraceCheckTest, TinyJsonLoadsWithTheSameCounts) {
  std::string trace = path("tiny.json");
  TraceWriter::Tally tally = write(trace, TraceFormat::Json, false, write_tiny_trace);
  CheckResult r = expect_clean(trace, tally, {kThreadsByProcess, kCountersByProcess, kFlows});
  if (m_skip) return;  // already failed: no checker
  std::string pod = std::to_string((1 << 30) + 1);  // the synthetic pid of the global track "Pod" (uuid 1)
  std::set<std::string> want = {"1|Steps", "1|XLA Ops", "1|ICI +x", "2|chip 1 (x=1,y=0,z=0)", "2|Steps",
                                "2|XLA Ops", "2|ICI +x", "2|HBM DMA", "2|HBM DMA 2", "2|Collectives",
                                "2|Collectives / all-reduce.3 [replica group 0]", pod + "|Pipeline stage 0",
                                // counters: JSON appends the arg key, which the writer makes the unit
                                "1|MXU utilization %", pod + "|ICI bandwidth GB/s"};
  EXPECT_EQ(pairs(r.rows, "pid", "name"), want);
  EXPECT_EQ(pairs(r.rows, "src", "dst"), kTinyFlows);
}

TEST_F(TraceCheckTest, LargeTraceLoadsWithTheTalliedCounts) {
  const int chips = 16, per_track = 500;
  auto fill = [&](TraceWriter& w) { write_large_trace(w, chips, per_track); };
  std::map<std::string, uint64_t> bytes;
  for (TraceFormat fmt : {TraceFormat::Pftrace, TraceFormat::Json}) {
    std::string trace = path(fmt == TraceFormat::Pftrace ? "large.pftrace" : "large.json");
    TraceWriter::Tally tally = write(trace, fmt, false, fill);
    EXPECT_EQ(tally.slices, uint64_t(chips) * (1 + 4 * per_track));
    EXPECT_EQ(tally.flows, uint64_t(chips) * per_track / 10);
    const char* per_track_sql =
        fmt == TraceFormat::Pftrace
            ? "select p.pid, t.name, count(*) n from slice s join track t on s.track_id = t.id join process p "
              "on p.upid = extract_arg(t.dimension_arg_set_id, 'upid') group by 1, 2"
            : "select p.pid, t.name, count(*) n from slice s join thread_track tt on s.track_id = tt.id "
              "join thread t using (utid) join process p using (upid) group by 1, 2";
    CheckResult r = expect_clean(trace, tally, {per_track_sql});
    if (m_skip) return;  // already failed: no checker
    std::map<std::string, int64_t> want = {{"Steps", 1},           {"XLA Ops", per_track},
                                           {"ICI +x", per_track},  {"ICI -x", per_track},
                                           {"HBM DMA", per_track / 2}, {"HBM DMA 2", per_track / 2}};
    ASSERT_EQ(r.rows.size(), size_t(chips) * want.size()) << r.output;
    for (const json& row : r.rows) EXPECT_EQ(row["n"].get<int64_t>(), want[row["name"].get<std::string>()]) << row;
    bytes[trace] = std::filesystem::file_size(trace);
    double per_slice = double(bytes[trace]) / double(tally.slices);
    RecordProperty(fmt == TraceFormat::Pftrace ? "pftrace_bytes_per_slice" : "json_bytes_per_slice",
                   std::to_string(per_slice));
    std::printf("%s: %llu bytes, %.1f bytes per slice (%llu slices, %llu counter values, %llu flows)\n",
                trace.c_str(), static_cast<unsigned long long>(bytes[trace]), per_slice,
                static_cast<unsigned long long>(tally.slices), static_cast<unsigned long long>(tally.counter_values),
                static_cast<unsigned long long>(tally.flows));
  }
  EXPECT_LT(bytes[path("large.pftrace")], bytes[path("large.json")]);
}

TEST_F(TraceCheckTest, TruncatedTracesFail) {
  for (TraceFormat fmt : {TraceFormat::Pftrace, TraceFormat::Json}) {
    std::string trace = path(fmt == TraceFormat::Pftrace ? "cut.pftrace" : "cut.json");
    write(trace, fmt, false, write_tiny_trace);
    std::filesystem::resize_file(trace, std::filesystem::file_size(trace) - 3);
    CheckResult r = check(trace);
    if (m_skip) return;  // already failed: no checker
    EXPECT_EQ(r.rc, 1) << trace << "\n" << r.output;
    EXPECT_FALSE(r.stats.empty()) << "the check failed without naming an import problem:\n" << r.output;
  }
}
