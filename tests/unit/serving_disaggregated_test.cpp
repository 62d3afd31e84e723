// Disaggregated serving's schedule counted by hand (docs/serving.md, "Disaggregated serving"): the prefill slice's
// iterations, the KV caches crossing the link one after another, and the decode slice's iterations. A prefill
// iteration takes 10 s, a decode 1 s, a mixed one 5 s, so that every timestamp is a small sum.
#include <gtest/gtest.h>

#include "sim/serving/disaggregated.h"
#include "tests/unit/serving_fakes.h"

using namespace podsim;
using namespace podsim::serving;
using namespace podsim::serving::fakes;

namespace {

std::unique_ptr<Engine> engine(const std::string& policy, int64_t slots) {
  EngineConfig c;
  c.slots = slots;
  c.slot_tokens = 16;
  return std::make_unique<Engine>(c, ServingPolicyRegistry::instance().make(policy), by_kind);
}

DisaggregatedResult run(const std::string& decode_policy, double transfer_s, const std::vector<Request>& rs) {
  DisaggregatedEngine d(engine("continuous", 1), engine(decode_policy, 2),
                        [=](const Request&) { return transfer_s; });
  return d.run(rs);
}

}  // namespace

TEST(ServingDisaggregated, PrefillSliceThenTransferThenDecodeSlice) {
  // Prefills r0 [0, 10], r1 [10, 20] (one slot): first tokens at 10 and 20. Caches cross in 3 s: r0 [10, 13],
  // r1 [20, 23]. The decode slice inserts r0 at 13 and decodes it at 14 and 15; r1 at 23, decoded at 24, 25.
  const DisaggregatedResult r = run("continuous", 3, at_once(2, 4, 3));
  ASSERT_EQ(r.sequences.size(), 2u);
  EXPECT_EQ(r.sequences[0].sent, 0);
  EXPECT_EQ(r.sequences[0].first, 10);
  EXPECT_EQ(r.sequences[1].first, 20);
  EXPECT_EQ(r.transfers[0].start, 10);
  EXPECT_EQ(r.transfers[0].seconds, 3);
  EXPECT_EQ(r.transfers[1].start, 20);
  EXPECT_EQ(r.sequences[0].finish, 15);
  EXPECT_EQ(r.sequences[1].finish, 25);
  EXPECT_EQ(r.sequences[0].generated, 3);
  EXPECT_EQ(r.sequences[0].gaps, (std::vector<double>{4, 1}));  // the first gap holds the transfer
  EXPECT_EQ(r.duration, 25);
  ASSERT_EQ(r.prefill.iterations.size(), 2u);
  EXPECT_EQ(r.prefill.iterations[0].kind, IterationKind::Prefill);
  ASSERT_EQ(r.decode.iterations.size(), 4u);  // no prefill on the decode slice
  for (const auto& it : r.decode.iterations) EXPECT_EQ(it.kind, IterationKind::Decode);
  EXPECT_EQ(r.decode.iterations[0].start, 13);
}

TEST(ServingDisaggregated, TransfersQueueOnTheLink) {
  // 15 s a transfer: r0 [10, 25]; r1's prefill ends at 20 but the link is busy until 25: [25, 40].
  // Decodes: r0 at 26, 27; r1 at 41, 42.
  const DisaggregatedResult r = run("continuous", 15, at_once(2, 4, 3));
  EXPECT_EQ(r.transfers[1].start, 25);
  EXPECT_EQ(r.sequences[0].finish, 27);
  EXPECT_EQ(r.sequences[1].finish, 42);
  EXPECT_EQ(r.sequences[1].gaps, (std::vector<double>{21, 1}));
}

TEST(ServingDisaggregated, DecodeSliceBatchesArrivedCachesAndSkipsFirstTokenOnlyRequests) {
  // r0, r1 need 3 tokens, r2 only its first (no transfer). Prefills [0, 10], [10, 20], [20, 30]; caches cross in
  // 1 s: r0 at 11, r1 at 21. Chunked decode slice (2 slots): r0 decodes at 12, 13 (done); r1 at 22, 23.
  std::vector<Request> rs = at_once(3, 4, 3);
  rs[2].output = 1;
  const DisaggregatedResult r = run("chunked", 1, rs);
  EXPECT_EQ(r.transfers[2].start, -1);
  EXPECT_EQ(r.sequences[2].first, 30);
  EXPECT_EQ(r.sequences[2].finish, 30);
  EXPECT_EQ(r.sequences[0].finish, 13);
  EXPECT_EQ(r.sequences[1].finish, 23);
  EXPECT_EQ(r.duration, 30);
  EXPECT_EQ(r.decode.iterations.size(), 4u);
}

TEST(ServingDisaggregated, DecodeSliceDecodesTogetherWhatArrivesTogether) {
  // Instant transfers, 12 tokens each. r0 reaches the decode slice at 10 and decodes [10, 11] .. [20, 21] (its 11
  // decoded tokens); r1, prefilled [10, 20], arrives at 20 and is inserted before the iteration [20, 21], which
  // decodes both; r1's 11 decodes end at 31.
  const DisaggregatedResult r = run("continuous", 0, at_once(2, 4, 12));
  EXPECT_EQ(r.sequences[0].finish, 21);
  EXPECT_EQ(r.sequences[1].first, 20);
  EXPECT_EQ(r.sequences[1].finish, 31);
  ASSERT_EQ(r.decode.iterations.size(), 21u);
  EXPECT_EQ(r.decode.iterations[9].sequences, 1);   // [19, 20]: r0 alone
  EXPECT_EQ(r.decode.iterations[10].sequences, 2);  // [20, 21]: both
}
