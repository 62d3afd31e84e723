// The batch padding of each policy's engine, counted by hand (docs/serving.md, "Batch padding"): continuous
// batching's generate step over every decode slot (JetStream), static batching's batch kept whole to its end,
// chunked prefill's requests and tokens padded to vLLM TPU's buckets; none with serving.engine.batch_padding: none;
// the iteration shapes keyed on the padded shape, their stand-ins padded to the same totals.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/serving/engine.h"
#include "sim/serving/iteration_time.h"
#include "tests/unit/serving_fakes.h"

using namespace podsim;
using namespace podsim::serving;
using namespace podsim::serving::fakes;

namespace {

EngineResult run(const std::string& policy, EngineConfig c, const std::vector<Request>& rs) {
  Engine e(c, ServingPolicyRegistry::instance().make(policy), by_kind);
  return e.run(rs);
}

// Per iteration of a kind: (sequences, padded sequences, padded tokens).
using Row = std::tuple<int64_t, int64_t, int64_t>;
std::vector<Row> rows(const EngineResult& r, IterationKind k) {
  std::vector<Row> out;
  for (const IterationRecord& it : r.iterations)
    if (it.kind == k) out.emplace_back(it.sequences, it.pad_sequences, it.pad_tokens);
  return out;
}

// Three requests of 4 prompt tokens generating 2, 5 and 3 tokens (the first by the prefill), sent at once.
std::vector<Request> three() { return {{0, 0.0, 4, 2}, {1, 0.0, 4, 5}, {2, 0.0, 4, 3}}; }

EngineConfig slots(int64_t n, bool pad = true) {
  EngineConfig c;
  c.slots = n;
  c.slot_tokens = 64;
  c.batch_padding = pad;
  return c;
}

TEST(ServingPadding, ContinuousGeneratesOverEverySlot) {
  const EngineResult r = run("continuous", slots(4), three());
  // Three prefills (no padding: JetStream prefills a prompt alone), then generate steps over the 4 slots: 3
  // occupied (1 empty), r0 done after 1; 2 occupied; r2 done after 2; r1 alone for its last 2.
  EXPECT_EQ(rows(r, IterationKind::Prefill), (std::vector<Row>{{1, 0, 0}, {1, 0, 0}, {1, 0, 0}}));
  EXPECT_EQ(rows(r, IterationKind::Decode), (std::vector<Row>{{3, 1, 1}, {2, 2, 2}, {1, 3, 3}, {1, 3, 3}}));
  // The schedule itself does not change.
  const EngineResult none = run("continuous", slots(4, false), three());
  EXPECT_EQ(rows(none, IterationKind::Decode), (std::vector<Row>{{3, 0, 0}, {2, 0, 0}, {1, 0, 0}, {1, 0, 0}}));
  EXPECT_EQ(none.duration, r.duration);
}

TEST(ServingPadding, StaticKeepsItsBatchToTheEnd) {
  const EngineResult r = run("static", slots(4), three());
  // One prefill of the 3 (a batch of 3, not the 4 slots), then 4 decodes of a batch of 3 rows: r0 leaves after the
  // first, r2 after the second, r1 runs two more.
  EXPECT_EQ(rows(r, IterationKind::Prefill), (std::vector<Row>{{3, 0, 0}}));
  EXPECT_EQ(rows(r, IterationKind::Decode), (std::vector<Row>{{3, 0, 0}, {2, 1, 1}, {1, 2, 2}, {1, 2, 2}}));
  EXPECT_EQ(rows(run("static", slots(4, false), three()), IterationKind::Decode),
            (std::vector<Row>{{3, 0, 0}, {2, 0, 0}, {1, 0, 0}, {1, 0, 0}}));
}

TEST(ServingPadding, ChunkedPadsToVllmsRequestAndTokenBuckets) {
  EngineConfig c = slots(64);
  c.max_batched_tokens = 512;
  // 5 prompts of 100 tokens generating 3: one iteration of 500 prompt tokens (5 requests -> 8, the least bucket;
  // 500 tokens -> 512), then two of 5 decodes (5 -> 8 requests, 5 tokens -> 16, the least token bucket).
  std::vector<Request> five;
  for (int i = 0; i < 5; ++i) five.push_back({i, 0.0, 100, 3});
  const EngineResult r = run("chunked", c, five);
  EXPECT_EQ(rows(r, IterationKind::Prefill), (std::vector<Row>{{5, 3, 12}}));
  EXPECT_EQ(rows(r, IterationKind::Decode), (std::vector<Row>{{5, 3, 11}, {5, 3, 11}}));
  // 20 prompts of 10 tokens generating 2: 20 requests -> 32, 200 tokens -> 256; then 20 decodes: 32 and 32.
  std::vector<Request> twenty;
  for (int i = 0; i < 20; ++i) twenty.push_back({i, 0.0, 10, 2});
  const EngineResult t = run("chunked", c, twenty);
  EXPECT_EQ(rows(t, IterationKind::Prefill), (std::vector<Row>{{20, 12, 56}}));
  EXPECT_EQ(rows(t, IterationKind::Decode), (std::vector<Row>{{20, 12, 12}}));
  // The request buckets stop at max-num-seqs (or 8): 20 slots, 10 prompts of 10 -> 16 requests (not past 20);
  // with 12 slots 10 -> 12. 100 tokens -> 128.
  EngineConfig d = slots(12);
  d.max_batched_tokens = 512;
  const std::vector<Request> ten(twenty.begin(), twenty.begin() + 10);
  EXPECT_EQ(rows(run("chunked", d, ten), IterationKind::Prefill), (std::vector<Row>{{10, 2, 28}}));
  d.slots = 20;
  EXPECT_EQ(rows(run("chunked", d, ten), IterationKind::Prefill), (std::vector<Row>{{10, 6, 28}}));
  d.batch_padding = false;
  EXPECT_EQ(rows(run("chunked", d, ten), IterationKind::Prefill), (std::vector<Row>{{10, 0, 0}}));
}

// A fake simulator linear in the sequences computed and the tokens cached.
IterationCost linear(const Shape& s) {
  IterationCost c;
  double cached = 0;
  for (const Chunk& k : s) cached += static_cast<double>(k.cached);
  c.seconds = 1e-2 + 1e-4 * static_cast<double>(s.size() + s.pad_sequences) + 1e-7 * cached;
  return c;
}

TEST(ServingPadding, ShapesKeyOnThePaddedShapeAndStandInsKeepItsTotals) {
  std::vector<Shape> seen;
  IterationTimer t({false, 256, "none"}, [&](const std::vector<Shape>& shapes) {
    std::vector<IterationCost> out;
    for (const Shape& s : shapes) out.push_back(linear(s)), seen.push_back(s);
    return out;
  });
  // 50 decodes of mean context 1000 in 64 slots: 14 empty ones.
  Shape exact;
  for (int i = 0; i < 50; ++i) exact.push_back({1, 990 + i % 21});
  std::sort(exact.begin(), exact.end());
  exact.pad_sequences = exact.pad_tokens = 14;
  const auto parts = t.stand_ins(exact);
  ASSERT_EQ(parts.size(), 4u);  // 48 and 64 sequences, 768 and 1024 tokens
  for (const auto& [s, w] : parts) {
    // Each stand-in computes the 64 slots: 48 decodes and 16 empty slots, or 64 decodes.
    EXPECT_EQ(static_cast<int64_t>(s.size()) + s.pad_sequences, 64);
    EXPECT_EQ(s.pad_tokens, s.pad_sequences);
    EXPECT_TRUE(s.pad_sequences == 16 || s.pad_sequences == 0) << s.pad_sequences;
  }
  EXPECT_NEAR(t.cost(exact).seconds, linear(exact).seconds, 1e-4 * linear(exact).seconds);
  EXPECT_EQ(t.simulated(), 4);
  // The same decodes unpadded: the corners of 48 sequences are other shapes (48 rows, not 64), those of 64, which
  // fill the slots, the same.
  Shape bare = exact;
  bare.pad_sequences = bare.pad_tokens = 0;
  t.cost(bare);
  EXPECT_EQ(t.simulated(), 6);
  EXPECT_EQ(shape_text(Shape{{1, 5}}), "1+5");
  Shape p{{1, 5}};
  p.pad_sequences = 3;
  p.pad_tokens = 11;
  EXPECT_EQ(shape_text(p), "1+5 + 3 padded sequences, 11 padded tokens");
}

}  // namespace
