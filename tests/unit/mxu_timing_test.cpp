// The MXU cycle model against a small cycle-stepped weight-stationary systolic array written here, and against
// hand counts. The array moves real numbers: activations enter row r of the array skewed by r cycles and move one
// column right per cycle, partial sums move one row down per cycle, each PE multiplies by the weight of the fold
// its activation belongs to; results leave at the bottom. The product is checked too, so the stepper is a
// working array, not a formula. Scheduling is the hardware's: a fold's weights take R cycles to shift in; without
// double buffering they load once the previous fold has drained, with it they load into the shadow registers
// while the previous fold streams, and a fold's first row enters once its weights are in and the previous fold's
// rows have entered.
#include <gtest/gtest.h>

#include <vector>

#include "hw/timing/mxu_timing.h"

using namespace podsim;

namespace {

struct Stepped {
  int64_t cycles = 0;
  bool product_ok = true;
};

// Multiplies A (m x k) by W (k x n), both small integers, on an R x C array; folds go K-block-major within each
// N block. Returns the cycle after the last result of the last fold left the array.
Stepped step_array(int64_t R, int64_t C, bool double_buffer, int64_t m, int64_t k, int64_t n) {
  auto a = [&](int64_t i, int64_t kk) { return static_cast<double>((i * 7 + kk * 3) % 5) - 2; };
  auto w = [&](int64_t kk, int64_t j) { return static_cast<double>((kk * 5 + j * 11) % 7) - 3; };
  const int64_t kf = (k + R - 1) / R, nf = (n + C - 1) / C, folds = kf * nf;
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  struct Cell {
    bool valid = false;
    int64_t fold = 0, row = 0;
    double act = 0, sum = 0;
  };
  std::vector<Cell> pe(static_cast<size_t>(R * C)), next(pe.size());
  std::vector<int64_t> start(folds, -1);  // cycle the fold's first row enters PE(0, 0)
  start[0] = R;                           // the first fold's weights shift in during cycles [0, R)
  int64_t f_done = 0;          // folds whose every result has left
  std::vector<int64_t> left(folds, m * C);  // results still to leave, per fold (padding columns included)
  int64_t t = 0;
  for (; f_done < folds; ++t) {
    // Schedule the next fold once its entry is known.
    for (int64_t f = 1; f < folds; ++f) {
      if (start[f] >= 0 || start[f - 1] < 0) continue;
      if (double_buffer) {
        // Shadow weights load while fold f - 1 streams: from its start, R cycles.
        start[f] = std::max(start[f - 1] + m, start[f - 1] + R);
      } else if (left[f - 1] == 0) {
        start[f] = t + R;  // weights shift in after the previous fold drained
      }
      break;
    }
    // One cycle of the array: everything moves right (activations) and down (sums).
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        Cell in;
        if (c == 0) {
          // Left edge: row i of fold f enters array row r at start[f] + i + r.
          for (int64_t f = 0; f < folds; ++f) {
            if (start[f] < 0) continue;
            int64_t i = t - start[f] - r;
            if (i < 0 || i >= m) continue;
            int64_t kk = (f % kf) * R + r;
            in.valid = true;
            in.fold = f;
            in.row = i;
            in.act = kk < k ? a(i, kk) : 0.0;  // K padded with zeros
          }
        } else {
          in = pe[r * C + c - 1];
        }
        Cell& o = next[r * C + c];
        o = in;
        if (!in.valid) continue;
        double above = r == 0 ? 0.0 : pe[(r - 1) * C + c].sum;
        if (r > 0 && (!pe[(r - 1) * C + c].valid || pe[(r - 1) * C + c].row != in.row ||
                      pe[(r - 1) * C + c].fold != in.fold))
          return {-1, false};  // the wavefront broke: a sum met an activation of another row
        int64_t kk = (in.fold % kf) * R + r, j = (in.fold / kf) * C + c;
        double weight = kk < k && j < n ? w(kk, j) : 0.0;  // N padded with zero weights
        o.sum = above + in.act * weight;
      }
    pe.swap(next);
    // Results leaving the bottom row this cycle.
    for (int64_t c = 0; c < C; ++c) {
      const Cell& b = pe[(R - 1) * C + c];
      if (!b.valid) continue;
      int64_t j = (b.fold / kf) * C + c;
      if (j < n) out[b.row * n + j] += b.sum;
      if (--left[b.fold] == 0) ++f_done;
    }
  }
  Stepped s;
  s.cycles = t;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t kk = 0; kk < k; ++kk) ref += a(i, kk) * w(kk, j);
      if (ref != out[i * n + j]) s.product_ok = false;
    }
  return s;
}

struct Shape {
  int64_t m, k, n;
};

const std::vector<Shape> kShapes = {{1, 1, 1}, {1, 8, 8},  {8, 8, 8},   {9, 9, 9},  {20, 12, 10},
                                    {3, 30, 5}, {2, 9, 1}, {12, 1, 17}, {5, 16, 24}, {16, 4, 4}};

}  // namespace

TEST(MxuTimingTest, ReferenceModeEqualsTheSteppedArray) {
  for (int64_t R : {4, 8})
    for (int64_t C : {4, 8}) {
      MxuShape s{R, C, false};
      for (const Shape& sh : kShapes) {
        Stepped st = step_array(R, C, false, sh.m, sh.k, sh.n);
        ASSERT_TRUE(st.product_ok) << "stepper R=" << R << " C=" << C;
        EXPECT_EQ(gemm_cycles(s, 1, sh.m, sh.k, sh.n, 1), st.cycles)
            << "R=" << R << " C=" << C << " " << sh.m << "x" << sh.k << "x" << sh.n;
      }
    }
}

TEST(MxuTimingTest, DoubleBufferedModeEqualsTheSteppedArray) {
  for (int64_t R : {4, 8})
    for (int64_t C : {4, 8}) {
      MxuShape s{R, C, true};
      for (const Shape& sh : kShapes) {
        Stepped st = step_array(R, C, true, sh.m, sh.k, sh.n);
        ASSERT_TRUE(st.product_ok) << "stepper R=" << R << " C=" << C;
        EXPECT_EQ(gemm_cycles(s, 1, sh.m, sh.k, sh.n, 1), st.cycles)
            << "R=" << R << " C=" << C << " " << sh.m << "x" << sh.k << "x" << sh.n;
      }
    }
}

TEST(MxuTimingTest, HandCountsOnA128Array) {
  MxuShape ref{128, 128, false}, tpu{128, 128, true};
  // One fold, one row: weights 128, fill 127, one row, drain 127.
  EXPECT_EQ(gemm_cycles(ref, 1, 1, 1, 1, 1), 383);
  EXPECT_EQ(gemm_cycles(tpu, 1, 1, 1, 1, 1), 383);
  // Padding: K = 129 and N = 129 are 2 x 2 folds of 128 + 256 + 64 - 2 = 446 cycles each.
  EXPECT_EQ(gemm_cycles(ref, 1, 64, 129, 129, 1), 4 * 446);
  EXPECT_EQ(gemm_cycles(ref, 1, 64, 129, 129, 1), gemm_cycles(ref, 1, 64, 256, 256, 1));
  // Issue examples: 2048 x 1024 x 4096 is 8 x 32 folds of 256 + 128 + 2048 - 2 = 2430: 622,080 cycles.
  EXPECT_EQ(gemm_cycles(ref, 1, 2048, 1024, 4096, 1), 622080);
  EXPECT_EQ(gemm_cycles(ref, 1, 4096, 128, 4096, 1), 143296);  // 32 folds of 4478
  // Weight load that double buffering cannot hide: M = 32 < R, so each of the 16 folds after the first waits for
  // its 128-cycle weight load rather than 32 rows: 128 + 32 + 15 * 128 + 254 = 2334 (it would be 894 if the
  // loads hid); without double buffering 16 * (384 + 30) = 6624.
  EXPECT_EQ(gemm_cycles(tpu, 1, 32, 512, 512, 1), 2334);
  EXPECT_EQ(gemm_cycles(ref, 1, 32, 512, 512, 1), 6624);
  // Long M hides the loads: 128 + 1024 + 15 * 1024 + 254 = 16766.
  EXPECT_EQ(gemm_cycles(tpu, 1, 1024, 512, 512, 1), 16766);
}

TEST(MxuTimingTest, FoldsShareAcrossMxus) {
  MxuShape s{128, 128, false};
  // 64 folds on 4 MXUs: 16 each.
  EXPECT_EQ(gemm_cycles(s, 1, 256, 1024, 1024, 4), 16 * 638);
  // 5 folds on 4 MXUs: the busiest does 2.
  EXPECT_EQ(gemm_cycles(s, 1, 256, 128, 640, 4), 2 * 638);
  EXPECT_EQ(gemm_cycles(s, 3, 256, 128, 128, 1), 3 * 638);  // batch entries are folds too
}

TEST(MxuTimingTest, WeightPushSharesTheInputPort) {
  // R = C = 128, weights pushed through the rows' port for 128 cycles per fold: every fold after the first takes
  // max(M + 128, R); fill and drain once.
  MxuShape s{128, 128, true, 128};
  EXPECT_EQ(mxu_cycles(s, 1, 512), 128 + 512 + 254);
  EXPECT_EQ(mxu_cycles(s, 4, 512), 128 + 512 + 3 * 640 + 254);
  EXPECT_EQ(mxu_cycles(s, 4, 8), 128 + 8 + 3 * 136 + 254);
  MxuShape own{128, 128, true, 0};
  EXPECT_EQ(mxu_cycles(own, 4, 8), 128 + 8 + 3 * 128 + 254);
  MxuShape reference{128, 128, false, 128};  // reference mode: the formula, whatever the push
  EXPECT_EQ(mxu_cycles(reference, 4, 512), 4 * (2 * 128 + 128 + 512 - 2));
}

TEST(MxuTimingTest, AFoldHoldingFewRowsLoadsOnlyThose) {
  // A fold holding h < R weight rows (K's share) loads them in h cycles: with 16 rows held and 64 rows streamed,
  // each later fold takes max(64 + push, 16), not max(64 + push, R). The push of 16 rows is 16 x 64 / 128 = 8.
  MxuShape held{128, 128, true, 8};
  held.weight_rows = 16;
  EXPECT_EQ(mxu_cycles(held, 4, 64), 128 + 64 + 3 * 72 + 254);
  MxuShape full{128, 128, true, 8};  // weight_rows 0: every load takes R cycles
  EXPECT_EQ(mxu_cycles(full, 4, 64), 128 + 64 + 3 * 128 + 254);
  held.weight_rows = 100;  // more rows held than streamed: the load decides
  EXPECT_EQ(mxu_cycles(held, 4, 64), 128 + 64 + 3 * 100 + 254);
  held.weight_rows = 500;  // never more than R
  EXPECT_EQ(mxu_cycles(held, 4, 64), 128 + 64 + 3 * 128 + 254);
}
