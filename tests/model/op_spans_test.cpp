// An op's busy time folded as its intervals come (hw/chip/op_spans.h) against a hand count and against the union
// of the intervals themselves, clipped to the op's span one by one (sim/engine/busy_time.h's union_length, what the
// summary counted from the whole interval lists); and the blocks of the chip's logs (hw/chip/log_list.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "hw/chip/log_list.h"
#include "hw/chip/op_spans.h"
#include "sim/engine/busy_time.h"

using namespace podsim;

TEST(OpSpans, UnionWithinTheSpanByHand) {
  OpSpans s;
  // Out of order, overlapping, touching and empty intervals; op 1's do not count for op 0.
  s.add(0, 3, 4);
  s.add(0, 0, 1);
  s.add(1, 0, 10);
  s.add(0, 0.5, 2);
  s.add(0, 4, 5);      // touches [3, 4]: one span [3, 5]
  s.add(0, 2.5, 2.6);  // between two spans
  s.add(0, 7, 7);      // empty
  s.add(-1, 0, 10);    // no op
  ASSERT_EQ(s.spans(0).size(), 3u);
  EXPECT_EQ(s.spans(0)[0], std::make_pair(0.0, 2.0));
  EXPECT_EQ(s.spans(0)[1], std::make_pair(2.5, 2.6));
  EXPECT_EQ(s.spans(0)[2], std::make_pair(3.0, 5.0));
  // Within [0.5, 4.5]: 1.5 + 0.1 + 1.5.
  EXPECT_NEAR(s.within(0, 0.5, 4.5), 3.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.within(1, 2, 3), 1.0);
  EXPECT_EQ(s.within(2, 0, 10), 0.0);  // an op that logged nothing
  s.add(0, 1.5, 3.2);                  // bridges the three spans
  ASSERT_EQ(s.spans(0).size(), 1u);
  EXPECT_EQ(s.spans(0)[0], std::make_pair(0.0, 5.0));
}

TEST(OpSpans, SameBitsAsTheUnionOfClippedIntervals) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> at(0, 1e-3), len(0, 2e-5);
  std::uniform_int_distribution<int> op(0, 15);
  struct Iv {
    double b, e;
    int op;
  };
  std::vector<Iv> all;
  OpSpans s;
  for (int i = 0; i < 20000; ++i) {
    // Mostly forward in time, as units log them, with some out of order.
    const double b = i % 7 == 0 ? at(rng) : 1e-3 * i / 20000.0, e = b + len(rng);
    const int o = op(rng);
    all.push_back({b, e, o});
    s.add(o, b, e);
  }
  for (int o = 0; o < 16; ++o) {
    const double from = at(rng) * 0.5, to = from + at(rng);
    std::vector<std::pair<double, double>> in_span;
    for (const Iv& x : all)
      if (x.op == o && std::min(x.e, to) > std::max(x.b, from))
        in_span.push_back({std::max(x.b, from), std::min(x.e, to)});
    EXPECT_EQ(s.within(o, from, to), union_length(in_span)) << "op " << o;
  }
}

TEST(LogList, KeepsOrderAcrossBlocks) {
  LogList<std::pair<int, double>> l;
  const size_t n = 3 * LogList<std::pair<int, double>>::kBlock + 5;
  for (size_t i = 0; i < n; ++i) l.push_back({static_cast<int>(i), 0.5 * static_cast<double>(i)});
  ASSERT_EQ(l.size(), n);
  size_t i = 0;
  for (const auto& x : l) {
    ASSERT_EQ(x.first, static_cast<int>(i));
    ++i;
  }
  EXPECT_EQ(i, n);
  EXPECT_EQ(l[n - 1].first, static_cast<int>(n - 1));
  EXPECT_EQ(l.back().second, 0.5 * static_cast<double>(n - 1));
}
