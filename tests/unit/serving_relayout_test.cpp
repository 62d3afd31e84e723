// The KV cache's relayout from the prefill layout into the decode layout (sim/serving/relayout.h), against hand
// counts of what each chip holds before and needs after.
#include <gtest/gtest.h>

#include "sim/serving/relayout.h"

using namespace podsim::serving;

namespace {

// One layer's cache [sequences, capacity, kv_heads, head_dim] of 4 sequences, 16 places, 4 heads of 8, on 4 chips.
// Split by heads: chip c holds head c of every sequence; by the batch: chip c holds sequence c, every head.
Held by_heads() {
  Held h;
  for (int64_t c = 0; c < 4; ++c) h.push_back({{0, 4}, {0, 16}, {c, c + 1}, {0, 8}});
  return h;
}
Held by_batch() {
  Held h;
  for (int64_t c = 0; c < 4; ++c) h.push_back({{c, c + 1}, {0, 16}, {0, 4}, {0, 8}});
  return h;
}
Held whole() {
  Held h;
  for (int64_t c = 0; c < 4; ++c) h.push_back({{0, 4}, {0, 16}, {0, 4}, {0, 8}});
  return h;
}

}  // namespace

TEST(ServingRelayout, HeadsToBatchFetchesTheOtherHeadsOfEachChipsSequences) {
  // Two prompts of 10 and 6 tokens in rows 0 and 1, 3 layers of bf16: chip 0 needs row 0's 4 heads and holds 1, so
  // it fetches 3 heads x 10 tokens x 8 x 2 B per key or value per layer: 480 x 2 x 3 = 2880 B; chip 1 likewise for
  // its 6 tokens (1728 B); chips 2 and 3 hold no prompt's row under the decode layout.
  const RelayoutCount c = relayout_count(by_heads(), by_batch(), {10, 6}, {3, 2.0, 0.0});
  ASSERT_EQ(c.received.size(), 4u);
  EXPECT_DOUBLE_EQ(c.received[0], 3.0 * 10 * 8 * 2 * 2 * 3);
  EXPECT_DOUBLE_EQ(c.received[1], 3.0 * 6 * 8 * 2 * 2 * 3);
  EXPECT_DOUBLE_EQ(c.received[2], 0);
  EXPECT_DOUBLE_EQ(c.received[3], 0);
  EXPECT_DOUBLE_EQ(c.total, 2880 + 1728);
  EXPECT_DOUBLE_EQ(c.max_per_chip, 2880);
  EXPECT_EQ(c.chips, 2);
}

TEST(ServingRelayout, Int8CachesMoveTheirScalesWithThem) {
  // int8: 1 B an element and an fp32 scale per token and head: chip 0 fetches 3 heads x 10 tokens x (8 + 4) B per
  // key or value of the one layer.
  const RelayoutCount c = relayout_count(by_heads(), by_batch(), {10}, {1, 1.0, 4.0});
  EXPECT_DOUBLE_EQ(c.received[0], 3.0 * 10 * (8 + 4) * 2);
  EXPECT_DOUBLE_EQ(c.total, c.received[0]);
}

TEST(ServingRelayout, ACacheWholeOnEveryChipMovesNothing) {
  // A multi-query cache under a heads layout is whole on every chip: each keeps its decode rows, nothing moves.
  const RelayoutCount c = relayout_count(whole(), by_batch(), {16, 16, 16, 16}, {2, 2.0, 0.0});
  EXPECT_DOUBLE_EQ(c.total, 0);
  EXPECT_EQ(c.chips, 0);
  EXPECT_DOUBLE_EQ(relayout_seconds(c, 1e11, 1e-6), 0);
  // The same layout on both sides: nothing either; batch to heads: each chip fetches its head of the other rows.
  EXPECT_DOUBLE_EQ(relayout_count(by_batch(), by_batch(), {16, 16}, {1, 2.0, 0.0}).total, 0);
  const RelayoutCount back = relayout_count(by_batch(), by_heads(), {16, 16, 16, 16}, {1, 2.0, 0.0});
  EXPECT_DOUBLE_EQ(back.received[2], 3.0 * 16 * 8 * 2 * 2);  // rows 0, 1, 3 of head 2
  EXPECT_DOUBLE_EQ(relayout_seconds(back, 1e9, 1e-6), 1e-6 + back.max_per_chip / 1e9);
}
