// An unscheduled module's collectives run one at a time per kind, in issue order (hlo/issue_order.h,
// add_overlap_limits): each waits for the one of its kind before it; kinds overlap each other; a scheduled module
// keeps its own order.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "hlo/import.h"
#include "hlo/parser.h"

using namespace podsim;
using namespace podsim::hlo;

namespace {

// Two weights' all-gathers that read only parameters (ready at once), a gradient's all-reduce, a third all-gather.
std::string module(bool scheduled) {
  return std::string("HloModule m") + (scheduled ? ", is_scheduled=true" : "") + R"(
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}
ENTRY %e (x: f32[256,256], w1: f32[64,256], w2: f32[64,256], w3: f32[64,256]) -> (f32[256,256], f32[256,256], f32[256,256]) {
  %x = f32[256,256] parameter(0)
  %w1 = f32[64,256] parameter(1)
  %w2 = f32[64,256] parameter(2)
  %w3 = f32[64,256] parameter(3)
  %g1 = f32[256,256] all-gather(%w1), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %g2 = f32[256,256] all-gather(%w2), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %h = f32[256,256] dot(%x, %g1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %r = f32[256,256] all-reduce(%h), channel_id=3, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%sum
  %g3 = f32[256,256] all-gather(%w3), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %y = f32[256,256] dot(%r, %g2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %out = (f32[256,256], f32[256,256], f32[256,256]) tuple(%y, %g3, %r)
}
)";
}

OpId id_of(const Imported& im, const std::string& name) {
  for (size_t i = 0; i < im.graph.num_ops(); ++i)
    if (im.graph.op(static_cast<OpId>(i)).name == name) return static_cast<OpId>(i);
  throw std::runtime_error("no op " + name);
}

bool before(const Imported& im, const std::string& a, const std::string& b) {
  const std::vector<OpId> p = im.graph.predecessors(id_of(im, b));
  return std::find(p.begin(), p.end(), id_of(im, a)) != p.end();
}

size_t position(const Imported& im, const std::string& name) {
  return static_cast<size_t>(std::find(im.order.begin(), im.order.end(), id_of(im, name)) - im.order.begin());
}

}  // namespace

TEST(HloOverlapTest, CollectivesOfOneKindWaitForTheOneBeforeThemInIssueOrder) {
  Imported im = import_module(parse_module(module(false), "m.hlo"), {});
  ASSERT_FALSE(im.scheduled);
  // The all-gathers in issue order, each behind the one before it (none reads another's result).
  std::vector<std::string> gathers = {"g1", "g2", "g3"};
  std::sort(gathers.begin(), gathers.end(),
            [&](const std::string& a, const std::string& b) { return position(im, a) < position(im, b); });
  EXPECT_TRUE(before(im, gathers[0], gathers[1]));
  EXPECT_TRUE(before(im, gathers[1], gathers[2]));
  EXPECT_FALSE(before(im, gathers[0], gathers[2]));  // one edge each: the chain orders the rest
  // The all-reduce is another kind: it waits only for its operand's dot, and no all-gather waits for it.
  EXPECT_EQ(im.graph.predecessors(id_of(im, "r")), std::vector<OpId>{id_of(im, "h")});
  for (const std::string& g : gathers) EXPECT_FALSE(before(im, "r", g)) << g;
}

TEST(HloOverlapTest, AScheduledModuleKeepsItsOwnOrder) {
  // After XLA's scheduler the module's order is the kernels' (add_schedule_edges): the first all-gather is no
  // control predecessor of the second, which follows no compute op.
  Imported im = import_module(parse_module(module(true), "m.hlo"), {});
  ASSERT_TRUE(im.scheduled);
  EXPECT_FALSE(before(im, "g1", "g2"));
}
