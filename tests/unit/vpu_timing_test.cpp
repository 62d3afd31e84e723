// The vector unit's cycle model (hw/timing/vpu_timing.h) by hand count: simple operations over the ALUs,
// transcendentals and cross-lane reductions at their costs, and a reduction along rows longer than the lanes, which
// combines a row's vectors elementwise and crosses lanes once per row group.
#include <gtest/gtest.h>

#include "hw/timing/vpu_timing.h"

using namespace podsim;

namespace {

VpuConfig tpu_vpu() {
  VpuConfig v;
  v.lanes = 128;
  v.sublanes = 8;
  v.alus = 2;
  v.transcendental_cost = 4;
  v.reduce_cost = 2;
  return v;
}

}  // namespace

TEST(VpuTimingTest, CountsEachKindOfWorkPerVector) {
  // 1024 vectors of 1024 elements: 3 simple operations over 2 ALUs, one exp at 4 cycles, one reduction at 2.
  VectorWork w;
  w.elements = 1024.0 * 1024;
  w.simple = 3;
  w.transcendental = 1;
  w.reduce = 1;
  EXPECT_EQ(vpu_cycles(tpu_vpu(), w), 1024 * (3 / 2.0 + 4 + 2));
}

TEST(VpuTimingTest, RowsLongerThanTheLanesCrossLanesOncePerRowGroup) {
  // Rows of 512 elements fill 4 vectors of a row group: 3 elementwise combines (half a cycle each on 2 ALUs) and one
  // cross-lane step (2 cycles) per 4 vectors, 0.875 cycles a vector against 2 for a reduction per vector.
  VectorWork w;
  w.elements = 1024.0 * 1024;
  w.reduce = 2;  // a row max and a row sum
  EXPECT_EQ(vpu_cycles(tpu_vpu(), w), 1024 * 2 * 2);
  w.reduce_row = 512;
  EXPECT_EQ(vpu_cycles(tpu_vpu(), w), 1024 * 2 * (3.0 / 4 * 0.5 + 1.0 / 4 * 2));
  // A row of one vector's lanes or fewer: one cross-lane step per vector, as without a row length.
  w.reduce_row = 128;
  EXPECT_EQ(vpu_cycles(tpu_vpu(), w), 1024 * 2 * 2);
  w.reduce_row = 64;
  EXPECT_EQ(vpu_cycles(tpu_vpu(), w), 1024 * 2 * 2);
}
