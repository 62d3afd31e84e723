// The issue order of run.scheduler (hw/compiler/issue_order.h): each op's bottom level, its estimated time plus the
// longest estimated path after it, counted by hand on a five-op program; program order keeps the step's order.
#include <gtest/gtest.h>

#include "hw/compiler/issue_order.h"

using namespace podsim;

namespace {

ExecOp mxu(double flops, std::vector<int32_t> deps) {
  ExecOp e;
  e.unit = Unit::Mxu;
  e.mxu_flops = flops;
  e.deps = std::move(deps);
  return e;
}

// A layer's backward: 0 makes the upstream gradient; 1 the weight gradient (nothing waits on it), 2 the input
// gradient, 3 its all-reduce, 4 the layer before's backward.
struct Fixture {
  ChipConfig chip;
  ExecProgram p;
  std::vector<std::vector<int32_t>> dependents;
  const double link = 50e9;
  Fixture() {
    chip.clock = 1e9;
    chip.tensorcores = 1;
    chip.mxu.count = 1;
    chip.mxu.rows = chip.mxu.cols = 100;  // peak 2e13 FLOP/s
    chip.hbm.bandwidth = 1e12;
    p.ops.push_back(mxu(2e10, {}));   // 1 ms
    p.ops.push_back(mxu(4e10, {0}));  // 2 ms
    p.ops.push_back(mxu(2e10, {0}));  // 1 ms
    ExecOp ar;
    ar.unit = Unit::Ici;
    ar.logical_bytes = 3e8;  // over one link's two directions: 3 ms
    ar.deps = {2};
    p.ops.push_back(ar);
    p.ops.push_back(mxu(1e10, {3}));  // 0.5 ms
    dependents.resize(p.ops.size());
    for (size_t i = 0; i < p.ops.size(); ++i)
      for (int32_t d : p.ops[i].deps) dependents[d].push_back(static_cast<int32_t>(i));
  }
};

}  // namespace

TEST(IssueOrder, BottomLevelsByHand) {
  Fixture f;
  EXPECT_DOUBLE_EQ(estimated_seconds(f.p.ops[0], f.chip, f.link), 1e-3);
  EXPECT_DOUBLE_EQ(estimated_seconds(f.p.ops[3], f.chip, f.link), 3e-3);
  const IssueOrder o = issue_order(f.p, f.dependents, f.chip, f.link, true);
  EXPECT_NEAR(o.bottom_level[4], 0.5e-3, 1e-12);
  EXPECT_NEAR(o.bottom_level[3], 3.5e-3, 1e-12);
  EXPECT_NEAR(o.bottom_level[2], 4.5e-3, 1e-12);
  EXPECT_NEAR(o.bottom_level[1], 2e-3, 1e-12);
  EXPECT_NEAR(o.bottom_level[0], 5.5e-3, 1e-12);  // 1 ms + the input gradient's path, not the weight gradient's
  // The input gradient (2) before the weight gradient (1): 0, 2, 3, 1, 4.
  EXPECT_EQ(o.op_at_rank, (std::vector<int32_t>{0, 2, 3, 1, 4}));
  for (int32_t r = 0; r < 5; ++r) EXPECT_EQ(o.rank[o.op_at_rank[r]], r);
}

TEST(IssueOrder, ProgramOrderKeepsTheStepsOrder) {
  Fixture f;
  const IssueOrder o = issue_order(f.p, f.dependents, f.chip, f.link, false);
  EXPECT_EQ(o.op_at_rank, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(o.rank, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}
