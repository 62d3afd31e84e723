// XLA's reduce-scatter creator on imported modules (hlo/reduce_scatter.h): an all-reduce whose only reader slices each
// device's block of its group, with offsets from a table indexed by the partition id as the SPMD partitioner writes
// them, runs as a reduce-scatter (and the slice as a view of it); a table that is not the ranks' blocks, a second
// reader or a scheduled module keeps the pair. Checked by the ops the import makes and in numeric mode, where the
// result chip's block equals the hand-summed tiles.
#include <gtest/gtest.h>

#include <string>

#include "base/npy.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;

namespace {

// f32[8,4] a device (a tile of f32[32,4] split over 4 devices), all-reduced over `groups`, then the block of 2 rows
// at table[partition-id] (table: 4 offsets). `extra` adds instructions before the root.
std::string module(const std::string& groups, const std::string& table, int64_t rows = 2, bool scheduled = false,
                   const std::string& extra = "", const std::string& root = "%y") {
  const std::string r = std::to_string(rows);
  return std::string("HloModule m, num_partitions=4") + (scheduled ? ", is_scheduled=true" : "") + R"(
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (x: f32[8,4]) -> f32[)" + r + R"(,4] {
  %x = f32[8,4] parameter(0), sharding={devices=[4,1]0,1,2,3}
  %ar = f32[8,4] all-reduce(%x), channel_id=1, replica_groups=)" + groups + R"(, use_global_device_ids=true, to_apply=%sum
  %table = s32[4] constant()" + table + R"()
  %pid = u32[] partition-id()
  %row = s32[1] dynamic-slice(%table, %pid), dynamic_slice_sizes={1}
  %off = s32[] reshape(%row)
  %zero = s32[] constant(0)
  %y = f32[)" + r + R"(,4] dynamic-slice(%ar, %off, %zero), dynamic_slice_sizes={)" + r + R"(,4}
)" + extra + "  ROOT %out = f32[" + r + ",4] copy(" + root + ")\n}\n";
}

int count(const hlo::Imported& im, OpKind k) {
  int n = 0;
  for (const Op& op : im.graph.ops()) n += op.kind == k;
  return n;
}

}  // namespace

TEST(HloReduceScatterTest, AnAllReduceSlicedByRankIsAReduceScatter) {
  // One group of 4, blocks of 2 rows at 0, 2, 4, 6.
  const hlo::Imported im = hlo::import_module(hlo::parse_module(module("{{0,1,2,3}}", "{0, 2, 4, 6}"), "t.hlo"), {});
  EXPECT_EQ(count(im, OpKind::ReduceScatter), 1);
  EXPECT_EQ(count(im, OpKind::AllReduce), 0);
  ASSERT_EQ(im.notes.size(), 1u);
  EXPECT_NE(im.notes[0].find("1 all-reduce whose only reader keeps each device's block"), std::string::npos);
  // Two groups of 2 ([2,2]<=[4]: {0,1}, {2,3}), blocks of 4 rows by rank within the group.
  const hlo::Imported two = hlo::import_module(hlo::parse_module(module("[2,2]<=[4]", "{0, 4, 0, 4}", 4), "t.hlo"), {});
  EXPECT_EQ(count(two, OpKind::ReduceScatter), 1);
  EXPECT_EQ(count(two, OpKind::AllReduce), 0);
}

TEST(HloReduceScatterTest, AnythingElseKeepsTheAllReduce) {
  auto kept = [](const std::string& text) {
    const hlo::Imported im = hlo::import_module(hlo::parse_module(text, "t.hlo"), {});
    return count(im, OpKind::AllReduce) == 1 && count(im, OpKind::ReduceScatter) == 0 && im.notes.empty();
  };
  EXPECT_TRUE(kept(module("{{0,1,2,3}}", "{0, 2, 4, 4}")));           // device 3 takes device 2's block
  EXPECT_TRUE(kept(module("{{0,1,2,3}}", "{6, 4, 2, 0}")));           // blocks not in rank order
  EXPECT_TRUE(kept(module("{{0,1,2,3}}", "{0, 2, 4, 6}", 2, true)));  // scheduled: run as given
  EXPECT_TRUE(kept(module("{{0,1,2,3}}", "{0, 2, 4, 6}", 2, false,    // a second reader of the whole sum
                          "  %w = f32[8,4] negate(%ar)\n")));
  EXPECT_TRUE(kept(module("[2,2]<=[4]", "{0, 2, 4, 6}")));            // groups of 2 cannot give blocks of 2 of 8 rows
}

TEST(HloReduceScatterTest, NumericModeGivesEachChipItsBlockOfTheSum) {
  write_file("rs.hlo", module("{{0,1,2,3}}", "{0, 2, 4, 6}"));
  const std::string exp = write_file("rs.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [4, 1, 1]}\n"
                                                "workload:\n  model: hlo\n  module: rs.hlo\n"
                                                "run: {numeric: true, seed: 5}\n");
  const std::string out = test_dir() + "/rs";
  const CliResult r = run_podsim({"run", exp, "--out", out, "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ran as reduce-scatters"), std::string::npos) << r.out;
  std::vector<int64_t> shape;
  std::vector<float> x, y;
  read_npy(out + "/tensors/x.npy", shape, x);
  ASSERT_EQ(shape, (std::vector<int64_t>{32, 4}));
  read_npy(out + "/tensors/out.npy", shape, y);
  ASSERT_EQ(y.size(), 8u);  // chip 0's block: rows 0 and 1 of the sum of the four tiles
  for (int i = 0; i < 8; ++i) {
    float want = 0;
    for (int d = 0; d < 4; ++d) want += x[static_cast<size_t>(d * 32 + i)];
    EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-5f * (1 + std::abs(want))) << i;
  }
}
