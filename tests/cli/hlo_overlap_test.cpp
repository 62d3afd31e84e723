// An unscheduled module's collectives of one kind run one at a time (hlo/issue_order.h, add_overlap_limits): two
// weights' all-gathers that are ready together run one after the other, each in the time one all-gather takes alone
// (the collective workload's figure for the same group and size), instead of sharing the links.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

namespace {

json run_json(const std::string& config, const std::string& out) {
  CliResult r = run_podsim({"run", config, "--out", out});
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(out + "/summary.json"));
}

const json& op_named(const json& s, const std::string& name) {
  for (const json& o : s["ops"])
    if (o["name"] == name) return o;
  throw std::runtime_error("no op " + name);
}

}  // namespace

TEST(HloOverlapTest, TwoReadyAllGathersRunOneAfterTheOtherEachInItsTimeAlone) {
  const std::string hlo = write_file("two_gathers.hlo", R"(HloModule two_gathers
ENTRY %e (w1: f32[64,256], w2: f32[64,256]) -> (f32[256,256], f32[256,256]) {
  %w1 = f32[64,256] parameter(0)
  %w2 = f32[64,256] parameter(1)
  %g1 = f32[256,256] all-gather(%w1), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %g2 = f32[256,256] all-gather(%w2), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ROOT %out = (f32[256,256], f32[256,256]) tuple(%g1, %g2)
}
)");
  const std::string pod = "hardware:\n  preset: tpu-v4\n  pod: {dims: [4, 1, 1], wrap: [true, true, true]}\n";
  json s = run_json(write_file("two.yaml", pod + "workload:\n  model: hlo\n  module: " + hlo + "\n"),
                    test_dir() + "/two");
  // The same all-gather alone: 64 KiB of fp32 per chip over the ring of 4.
  json one = run_json(write_file("one.yaml", pod + "workload:\n  model: collective\n  op: all_gather\n  bytes: 64KiB\n"
                                                   "  axes: [x]\nrun:\n  trace: {format: \"off\"}\n"),
                      test_dir() + "/one");
  const double alone = one["collectives"][0]["time_s"].get<double>();
  const json& a = op_named(s, "g1");
  const json& b = op_named(s, "g2");
  const json& first = a["start_ns"].get<double>() <= b["start_ns"].get<double>() ? a : b;
  const json& second = &first == &a ? b : a;
  EXPECT_GE(second["start_ns"].get<double>(), first["end_ns"].get<double>());
  for (const json* o : {&first, &second})
    EXPECT_NEAR((*o)["end_ns"].get<double>() - (*o)["start_ns"].get<double>(), alone * 1e9, 1e-6 * alone * 1e9)
        << (*o)["name"];
  // Uncontended on the ring of 4, each all-gather is two halves (one per direction) of 3 steps of 32 KiB: at least
  // 3 * 32 KiB / 45 GB/s of serialisation and 3 hops of 1 us.
  EXPECT_GT(alone, 3 * 32768.0 / 45e9 + 3e-6);
}
