// The result chip's timeline and op table in summary.json do not depend on what the trace draws: traced at detail
// units or links the chip keeps every interval whole and the timeline reads those; at detail ops, or untraced, it
// keeps only the spans the timeline reads (hw/chip/chip_log.h, ChipLog::keep_units). Both ways the same values in
// the same order, so the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

json summary_of(const std::string& config, const std::string& name, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"run", source_dir() + "/" + config, "--out", test_dir() + "/" + name, "-q"};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

double largest(const json& bins) {
  double m = 0;
  for (const json& b : bins) m = std::max(m, b.get<double>());
  return m;
}

void expect_same_whatever_the_trace(const std::string& config, bool links) {
  const json ops = summary_of(config, "ops", {"run.trace.detail=ops"});
  ASSERT_TRUE(ops.contains("timeline"));
  // The timeline is drawn from intervals (not all zero), and the op table has busy times.
  EXPECT_GT(largest(ops["timeline"]["mxu_busy"]), 0);
  EXPECT_GT(largest(ops["timeline"]["hbm_Bps"]), 0);
  if (links) {
    EXPECT_GT(largest(ops["timeline"]["ici_busy"]), 0);
  }
  double busy = 0;
  for (const json& op : ops["ops"]) busy = std::max(busy, op["busy_s"].get<double>());
  EXPECT_GT(busy, 0);
  for (const char* detail : {"units", "links"}) {
    const json other = summary_of(config, detail, {std::string("run.trace.detail=") + detail});
    EXPECT_EQ(other["timeline"], ops["timeline"]) << detail;
    EXPECT_EQ(other["ops"], ops["ops"]) << detail;
    EXPECT_EQ(other["step_time_s"], ops["step_time_s"]) << detail;
  }
  const json off = summary_of(config, "off", {"run.trace.format=off"});
  EXPECT_EQ(off["timeline"], ops["timeline"]);
  EXPECT_EQ(off["ops"], ops["ops"]);
}

}  // namespace

TEST(TimelineDetail, OneChipStepIsTheSameWhateverTheTraceDraws) {
  expect_same_whatever_the_trace("configs/quickstart.yaml", false);
}

TEST(TimelineDetail, ModuleWithCollectivesIsTheSameWhateverTheTraceDraws) {
  expect_same_whatever_the_trace("configs/hlo/stablehlo_mlp_tp_gspmd.yaml", true);
}
