// TraceWriter: the tiny trace decoded by protoc against our schema subset equals the golden text (and decodes with no
// unknown fields), JSON and gzip outputs agree with it, and every rule the writer enforces throws Err::Internal.
//
// After an intended change of the output, regenerate the golden with
//   PODSIM_UPDATE_GOLDEN=1 build/bin/unit_trace_writer_test --gtest_filter='*Golden*'
// and review the diff of tests/unit/golden/tiny_trace.txt.
#include <gtest/gtest.h>
#include "tests/test_paths.h"
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/error.h"
#include "tests/unit/trace_fixtures.h"

using namespace podsim;
using namespace podsim::test;

namespace {

const std::string kSchemaDir = std::string(PODSIM_SOURCE_DIR) + "/sim/trace";
const std::string kGolden = std::string(PODSIM_SOURCE_DIR) + "/tests/unit/golden/tiny_trace.txt";

class TraceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "podsim_trace_writer_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::string path(const std::string& name) const { return m_dir + "/" + name; }

  // Writes the tiny trace and checks the tally on the way.
  std::string write_tiny(const std::string& name, TraceFormat fmt, bool gzip) {
    auto w = TraceWriter::create(path(name), fmt, gzip);
    write_tiny_trace(*w);
    w->close();
    TraceWriter::Tally got = w->tally(), want = tiny_trace_tally();
    EXPECT_EQ(got.slices, want.slices);
    EXPECT_EQ(got.counter_values, want.counter_values);
    EXPECT_EQ(got.flows, want.flows);
    EXPECT_EQ(got.tracks, want.tracks);
    return path(name);
  }

  std::string decode(const std::string& trace, const std::string& how = "--decode=perfetto.protos.Trace") {
    std::string schema = how == "--decode_raw" ? "" : " -I" + kSchemaDir + " perfetto_subset.proto";
    auto [rc, text] = run(std::string(PODSIM_PROTOC) + " " + how + schema + " < " + trace + " 2>" + path("protoc.err"));
    EXPECT_EQ(rc, 0) << read_file(path("protoc.err"));
    return text;
  }

  // A fresh writer with one chip, a slice track and a counter track, for the rule tests.
  struct Small {
    std::unique_ptr<TraceWriter> w;
    TraceWriter::Track chip, ops, other, util;
  };
  Small small() {
    Small s;
    s.w = TraceWriter::create(path("rules.pftrace"), TraceFormat::Pftrace, false);
    s.chip = s.w->process("chip 0", 1, 0);
    s.ops = s.w->child(s.chip, "XLA Ops", 0);
    s.other = s.w->child(s.chip, "ICI +x", 1);
    s.util = s.w->counter(s.chip, "MXU utilization", "%", 2);
    return s;
  }

  std::string m_dir;
};

// Expects `f` to throw Error(Err::Internal) mentioning `needle`.
void expect_bug(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::Internal) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "missing '" << needle << "' in: " << e.what();
    return;
  }
  ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
}

}  // namespace

TEST_F(TraceWriterTest, TinyTraceDecodesToTheGolden) {
  std::string text = decode(write_tiny("tiny.pftrace", TraceFormat::Pftrace, false));
  ASSERT_FALSE(text.empty());
  // A field number protoc does not know, or one with the wrong wire type, shows up as a bare number.
  std::smatch m;
  EXPECT_FALSE(std::regex_search(text, m, std::regex(R"((^|\n)\s*[0-9]+(: | \{))"))) << "unknown field: " << m.str();
  EXPECT_FALSE(decode(path("tiny.pftrace"), "--decode_raw").empty());

  if (std::getenv("PODSIM_UPDATE_GOLDEN")) {
    std::ofstream(kGolden, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << kGolden;
  }
  std::string golden = read_file(kGolden);
  if (text != golden) {
    std::ofstream("tiny_trace.actual.txt", std::ios::binary) << text;
    FAIL() << "decoded trace differs from " << kGolden << "; the actual text is tiny_trace.actual.txt in "
           << std::filesystem::current_path() << "; see the header of this file to regenerate";
  }
}

TEST_F(TraceWriterTest, TinyTraceHasWhatTheProtocolNeeds) {
  std::string text = decode(write_tiny("tiny.pftrace", TraceFormat::Pftrace, false));
  // The first packet clears the sequence's state; every packet with interned names depends on it.
  size_t first = text.find("packet {");
  size_t second = text.find("packet {", first + 1);
  std::string head = text.substr(first, second - first);
  EXPECT_NE(head.find("uuid: 0"), std::string::npos) << head;
  EXPECT_NE(head.find("process_ordering: PROCESS_ORDERING_EXPLICIT"), std::string::npos) << head;
  EXPECT_NE(head.find("sequence_flags: 1"), std::string::npos) << head;
  int with_iid = 0;
  for (size_t at = first; at != std::string::npos;) {
    size_t next = text.find("\npacket {", at + 1);
    std::string p = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next == std::string::npos ? next : next + 1;
    EXPECT_NE(p.find("trusted_packet_sequence_id: 1"), std::string::npos) << p;
    if (p.find("name_iid") != std::string::npos || p.find("interned_data") != std::string::npos) {
      ++with_iid;
      EXPECT_NE(p.find("sequence_flags: 2"), std::string::npos) << p;
    }
  }
  EXPECT_EQ(with_iid, 15);  // one BEGIN per slice
  EXPECT_NE(text.find("flow_ids: 13907095862997510025"), std::string::npos);  // 0xC0FFEE0123456789
  EXPECT_NE(text.find("terminating_flow_ids: 13907095862997510025"), std::string::npos);
  EXPECT_NE(text.find("unit_name: \"GB/s\""), std::string::npos);
  EXPECT_NE(text.find("name: \"HBM DMA 2\""), std::string::npos);  // the lane overflow
  EXPECT_EQ(text.find("name: \"HBM DMA 3\""), std::string::npos);  // the third transfer reused lane 1
}

TEST_F(TraceWriterTest, JsonHasTheSameSlicesCountersAndFlows) {
  std::string text = read_file(write_tiny("tiny.json", TraceFormat::Json, false));
  nlohmann::json doc = nlohmann::json::parse(text);  // throws, failing the test, if the file is not JSON
  ASSERT_TRUE(doc.contains("traceEvents"));
  EXPECT_FALSE(doc.contains("displayTimeUnit"));
  std::map<std::string, int> phases;
  std::map<std::string, std::string> flow_start, flow_end;
  for (const auto& e : doc["traceEvents"]) {
    std::string ph = e["ph"];
    ++phases[ph];
    if (ph == "s") flow_start[e["id"].get<std::string>()] = std::to_string(e["pid"].get<int>());
    if (ph == "f") {
      EXPECT_EQ(e["bp"], "e");
      flow_end[e["id"].get<std::string>()] = std::to_string(e["pid"].get<int>());
    }
    if (ph == "X" && e["name"] == "convolution.2/mxu pass") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 3.5);  // µs, from 3500 ns
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5);
    }
    if (ph == "X" && e["name"] == "fusion.1") {
      EXPECT_EQ(e["args"]["flops"], int64_t{1} << 34);
      EXPECT_EQ(e["args"]["bytes/flop"], 0.25);
      EXPECT_EQ(e["args"]["note"], "quote \" and \xC2\xB5s");
    }
  }
  TraceWriter::Tally want = tiny_trace_tally();
  EXPECT_EQ(phases["X"], int(want.slices));
  EXPECT_EQ(phases["C"], int(want.counter_values));
  EXPECT_EQ(phases["s"], int(want.flows));
  EXPECT_EQ(phases["f"], int(want.flows));
  EXPECT_EQ(flow_start["0xc0ffee0123456789"], "1");  // chip 0 sends
  EXPECT_EQ(flow_end["0xc0ffee0123456789"], "2");    // chip 1 receives
  EXPECT_GT(phases["M"], 0);
}

TEST_F(TraceWriterTest, GzipDecompressesToThePlainBytes) {
  for (TraceFormat fmt : {TraceFormat::Pftrace, TraceFormat::Json}) {
    std::string ext = fmt == TraceFormat::Pftrace ? ".pftrace" : ".json";
    std::string plain = read_file(write_tiny("t" + ext, fmt, false));
    std::string gz = write_tiny("t" + ext + ".gz", fmt, true);
    ASSERT_FALSE(plain.empty());
    auto [rc, unzipped] = run("gzip -dc " + gz);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(unzipped, plain) << ext;
    EXPECT_LT(read_file(gz).size(), plain.size());
  }
}

TEST_F(TraceWriterTest, LanesAreReusedOnceFree) {
  auto w = TraceWriter::create(path("lanes.pftrace"), TraceFormat::Pftrace, false);
  auto chip = w->process("chip 0", 1, 0);
  auto a = w->lane(chip, "HBM DMA", 0, 100, 3);
  auto b = w->lane(chip, "HBM DMA", 50, 80, 3);    // a is busy
  auto c = w->lane(chip, "HBM DMA", 60, 200, 3);   // a and b are busy
  auto d = w->lane(chip, "HBM DMA", 80, 90, 3);    // b is free again at its end
  auto e = w->lane(chip, "HBM DMA", 100, 110, 3);  // a is free again
  auto other = w->lane(chip, "ICI +x", 0, 100, 4);  // another group starts its own lanes
  EXPECT_NE(a, b);
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  EXPECT_EQ(d, b);
  EXPECT_EQ(e, a);
  EXPECT_NE(other, a);
  EXPECT_EQ(w->tally().tracks, 5u);
}

TEST_F(TraceWriterTest, NestingRules) {
  Small s = small();
  s.w->slice(s.ops, 0, 100, "outer");
  s.w->slice(s.ops, 0, 100, "same extent");     // nests inside outer
  s.w->slice(s.ops, 10, 10, "zero length");
  s.w->slice(s.ops, 10, 20, "starts where it ended");
  s.w->slice(s.ops, 100, 100, "at outer's end");  // outside: outer ended at 100
  expect_bug([&] { s.w->slice(s.ops, 90, 95, "late"); }, "begins before the previous slice");
  s.w->slice(s.ops, 200, 300, "a");
  expect_bug([&] { s.w->slice(s.ops, 250, 350, "b"); }, "overlaps [200, 300]");
  expect_bug([&] { s.w->slice(s.ops, 260, 250, "c"); }, "ends before it begins");
  s.w->slice(s.other, 250, 350, "b");  // another track is fine
  EXPECT_EQ(s.w->tally().slices, 7u);  // rejected slices are not counted, nor written
  s.w->close();
}

TEST_F(TraceWriterTest, TracksMustBeDeclaredAndOfTheRightKind) {
  Small s = small();
  expect_bug([&] { s.w->slice(999, 0, 1, "x"); }, "never declared");
  expect_bug([&] { s.w->slice(0, 0, 1, "x"); }, "never declared");  // the root is Perfetto's, not ours
  expect_bug([&] { s.w->counter_value(999, 0, 1.0); }, "never declared");
  expect_bug([&] { s.w->child(999, "x", 0); }, "never declared");
  expect_bug([&] { s.w->lane(999, "x", 0, 1, 0); }, "never declared");
  expect_bug([&] { s.w->counter_value(s.ops, 0, 1.0); }, "not a counter track");
  expect_bug([&] { s.w->slice(s.util, 0, 1, "x"); }, "takes only counter values");
  expect_bug([&] { s.w->child(s.util, "x", 0); }, "under counter track");
  expect_bug([&] { s.w->counter_value(s.util, 0, NAN); }, "not finite");
  expect_bug([&] { s.w->process("chip 0 again", 1, 1); }, "reuses pid 1");
  expect_bug([&] { s.w->process("chip -1", 0, 1); }, "not in [1, 2^30)");
  s.w->counter_value(s.util, 0, 12.5);
  EXPECT_EQ(s.w->tally().counter_values, 1u);
  s.w->close();
  expect_bug([&] { s.w->slice(s.ops, 0, 1, "x"); }, "after close()");
}

TEST_F(TraceWriterTest, FlowRules) {
  Small s = small();
  s.w->slice(s.ops, 0, 10, "send 1", {}, {1});
  expect_bug([&] { s.w->slice(s.ops, 20, 30, "send 1 again", {}, {1}); }, "which another slice started");
  s.w->slice(s.other, 5, 15, "recv 1", {}, {}, {1});
  expect_bug([&] { s.w->slice(s.other, 20, 30, "recv 1 again", {}, {}, {1}); }, "which another slice ended");
  // The end of a flow may be reported first, but may not lie before its start.
  s.w->slice(s.other, 40, 50, "recv 2", {}, {}, {2});
  expect_bug([&] { s.w->slice(s.ops, 45, 46, "send 2 too late", {}, {2}); }, "after its end (40)");
  expect_bug([&] { s.w->slice(s.ops, 40, 41, "send 2 tied", {}, {2}); }, "report the sending slice first");
  s.w->slice(s.ops, 39, 41, "send 2", {}, {2});
  s.w->slice(s.ops, 60, 70, "send 3", {}, {3});
  expect_bug([&] { s.w->slice(s.other, 55, 56, "recv 3 early", {}, {}, {3}); }, "before its start (60)");
  expect_bug([&] { s.w->slice(s.other, 60, 61, "self", {}, {4}, {4}); }, "names flow 4 twice");
  expect_bug([&] { s.w->slice(s.other, 60, 61, "dup", {}, {5, 5}); }, "names flow 5 twice");
  s.w->slice(s.other, 60, 61, "recv 3 tied", {}, {}, {3});  // same time, reported after the send: fine
  EXPECT_EQ(s.w->tally().flows, 3u);
  s.w->close();
}

TEST_F(TraceWriterTest, OutputErrorsAreOutputUnwritable) {
  try {
    TraceWriter::create(path("no/such/dir/trace.pftrace"), TraceFormat::Pftrace, false);
    ADD_FAILURE() << "created a trace in a missing folder";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::OutputUnwritable) << e.what();
  }
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to simulate a full disk";
  for (bool gzip : {false, true}) {
    auto w = TraceWriter::create("/dev/full", TraceFormat::Json, gzip);
    write_tiny_trace(*w);
    try {
      w->close();
      ADD_FAILURE() << "closing a trace on a full disk succeeded (gzip " << gzip << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), Err::OutputUnwritable) << e.what();
    }
  }
}
