// The MXU cycle model against the classic weight-stationary formula, in both modes, over many shapes.
#include <gtest/gtest.h>

#include "hw/timing/mxu_timing.h"

using namespace podsim;

namespace {

// folds * (2R + C + M - 2), partial folds costing a full fold: the formula other systolic simulators use.
int64_t classic(int64_t R, int64_t C, int64_t m, int64_t k, int64_t n) {
  int64_t folds = ((k + R - 1) / R) * ((n + C - 1) / C);
  return folds * (2 * R + C + m - 2);
}

struct Shape {
  int64_t m, k, n;
};

const std::vector<Shape> kShapes = {
    {1, 1, 1},     {1, 128, 128},   {8, 128, 128},   {128, 128, 128}, {129, 129, 129},  {1000, 300, 200},
    {7, 1000, 3},  {512, 256, 1024}, {4096, 4096, 4096}, {33, 17, 513}, {2, 129, 1},     {300, 1, 700},
};

}  // namespace

TEST(MxuTimingTest, NoDoubleBufferEqualsClassicFormulaExactly) {
  for (int64_t R : {128, 256, 32, 8}) {
    for (int64_t C : {128, 256, 16}) {
      MxuShape s{R, C, false};
      for (const Shape& sh : kShapes) {
        EXPECT_EQ(gemm_cycles(s, 1, sh.m, sh.k, sh.n, 1), classic(R, C, sh.m, sh.k, sh.n))
            << "R=" << R << " C=" << C << " m=" << sh.m << " k=" << sh.k << " n=" << sh.n;
      }
    }
  }
}

TEST(MxuTimingTest, PartialFoldCostsAFullFold) {
  MxuShape s{128, 128, false};
  EXPECT_EQ(gemm_cycles(s, 1, 64, 129, 128, 1), gemm_cycles(s, 1, 64, 256, 128, 1));
  EXPECT_EQ(gemm_cycles(s, 1, 64, 1, 1, 1), gemm_cycles(s, 1, 64, 128, 128, 1));
  EXPECT_EQ(gemm_cycles(s, 1, 64, 128, 129, 1), 2 * (2 * 128 + 128 + 64 - 2));
}

TEST(MxuTimingTest, TinyGemmPaysFillAndDrain) {
  MxuShape s{128, 128, true};
  // One fold, one row: weight load R, fill R - 1, one row, drain C - 1.
  EXPECT_EQ(gemm_cycles(s, 1, 1, 1, 1, 1), 2 * 128 + 128 + 1 - 2);
  MxuShape nb{128, 128, false};
  EXPECT_EQ(gemm_cycles(nb, 1, 1, 1, 1, 1), gemm_cycles(s, 1, 1, 1, 1, 1));  // a single fold cannot overlap
}

TEST(MxuTimingTest, DoubleBufferedBetweenIdealAndNoOverlap) {
  for (int64_t R : {128, 256}) {
    MxuShape db{R, R, true}, nb{R, R, false};
    for (const Shape& sh : kShapes) {
      int64_t with = gemm_cycles(db, 1, sh.m, sh.k, sh.n, 1);
      int64_t without = gemm_cycles(nb, 1, sh.m, sh.k, sh.n, 1);
      double ideal = static_cast<double>(sh.m) * sh.k * sh.n / static_cast<double>(R * R);
      EXPECT_GE(static_cast<double>(with), ideal) << sh.m << "x" << sh.k << "x" << sh.n;
      EXPECT_LE(with, without) << sh.m << "x" << sh.k << "x" << sh.n;
      int64_t folds = ((sh.k + R - 1) / R) * ((sh.n + R - 1) / R);
      if (folds > 1) EXPECT_LT(with, without) << "overlap must save cycles when there are several folds";
    }
  }
}

TEST(MxuTimingTest, DoubleBufferedLargeGemmApproachesIdeal) {
  MxuShape s{128, 128, true};
  int64_t c = gemm_cycles(s, 1, 4096, 4096, 4096, 1);
  double ideal = 4096.0 * 4096 * 4096 / (128.0 * 128);
  EXPECT_LT(c / ideal, 1.001);
}

TEST(MxuTimingTest, FoldsShareAcrossMxus) {
  MxuShape s{128, 128, false};
  // 64 folds on 4 MXUs: 16 each.
  EXPECT_EQ(gemm_cycles(s, 1, 256, 1024, 1024, 4), 16 * (2 * 128 + 128 + 256 - 2));
  // 5 folds on 4 MXUs: the busiest does 2.
  EXPECT_EQ(gemm_cycles(s, 1, 256, 128, 640, 4), 2 * (2 * 128 + 128 + 256 - 2));
  EXPECT_EQ(gemm_cycles(s, 3, 256, 128, 128, 1), 3 * (2 * 128 + 128 + 256 - 2));  // batch entries are folds too
}
