// The models' small helpers (hw/chip/slots.h): a pool whose released ids are reused, and a memo of the last eight
// computed values, each against the sequence written in the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "hw/chip/slots.h"

using namespace podsim;

TEST(SlotsTest, ReleasedIdsAreReusedLastFirstAndKeepTheirNewValue) {
  Slots<std::string> s;
  EXPECT_EQ(s.add("a"), 0u);
  EXPECT_EQ(s.add("b"), 1u);
  EXPECT_EQ(s.add("c"), 2u);
  s.release(0);
  s.release(2);
  EXPECT_EQ(s.add("d"), 2u);  // the last released first
  EXPECT_EQ(s.add("e"), 0u);
  EXPECT_EQ(s.add("f"), 3u);  // none free: a new one
  EXPECT_EQ(s[0], "e");
  EXPECT_EQ(s[1], "b");
  EXPECT_EQ(s[2], "d");
  EXPECT_EQ(s[3], "f");
}

TEST(MemoTest, ComputesEachOfEightKeysOnceThenReplacesTheOldest) {
  Memo m;
  int calls = 0;
  auto twice = [&](int64_t k) { return m.get(k, [&] { ++calls; return 2 * k; }); };
  for (int round = 0; round < 3; ++round)  // six neighbours in turn, as a 3-D torus collective: each computed once
    for (int64_t k : {1, 2, 3, 4, 5, 6}) EXPECT_EQ(twice(k), 2 * k);
  EXPECT_EQ(calls, 6);
  for (int64_t k : {7, 8, 1, 8}) EXPECT_EQ(twice(k), 2 * k);
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(twice(9), 18);  // a ninth key replaces the oldest, 1
  EXPECT_EQ(calls, 9);
  EXPECT_EQ(twice(2), 4);
  EXPECT_EQ(calls, 9);
  EXPECT_EQ(twice(1), 2);  // computed again (replacing 2)
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(twice(2), 4);
  EXPECT_EQ(calls, 11);
}

TEST(MemoTest, KeysOrValuesBeyond32BitsAreComputedEveryTime) {
  Memo m;
  int calls = 0;
  const int64_t big = int64_t{1} << 40;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.get(big, [&] { ++calls; return int64_t{7}; }), 7);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.get(3, [&] { ++calls; return big; }), big);
  EXPECT_EQ(calls, 6);
  // A key that equals a big one's low 32 bits is not confused with it.
  EXPECT_EQ(m.get(0, [&] { return int64_t{9}; }), 9);
}
