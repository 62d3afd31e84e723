// The serving engine's schedules, counted by hand (docs/serving.md, "The serving engine"): each policy's order of
// iterations, the latencies benchmark_serving derives from them, paged admission and preemption, the closed loop,
// the request streams and their errors, and the grid the default mode interpolates on. Iteration times come from a
// fake: a prefill iteration takes 10 s, a decode 1 s, a mixed one 5 s, so that every timestamp is a small sum.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "sim/config/loader.h"
#include "sim/serving/engine.h"
#include "sim/serving/iteration_time.h"
#include "sim/serving/request_stream.h"
#include "tests/unit/serving_fakes.h"

using namespace podsim;
using namespace podsim::serving;
using namespace podsim::serving::fakes;

namespace {

EngineResult run(const std::string& policy, EngineConfig c, const std::vector<Request>& rs) {
  Engine e(c, ServingPolicyRegistry::instance().make(policy), by_kind);
  return e.run(rs);
}

std::vector<std::string> kinds(const EngineResult& r) {
  std::vector<std::string> k;
  for (const auto& it : r.iterations) k.push_back(kind_name(it.kind));
  return k;
}

using V = std::vector<std::string>;

TEST(ServingEngine, StaticPrefillsABatchThenDecodesItToItsEnd) {
  EngineConfig c;
  c.slots = 2;
  c.slot_tokens = 16;
  const EngineResult r = run("static", c, at_once(3, 4, 3));
  // r0, r1 prefilled together [0, 10], decoded at 11 and 12; then r2 alone: 22, 23, 24.
  EXPECT_EQ(kinds(r), (V{"prefill", "decode", "decode", "prefill", "decode", "decode"}));
  EXPECT_EQ(r.sequences[0].first, 10);
  EXPECT_EQ(r.sequences[1].finish, 12);
  EXPECT_EQ(r.sequences[2].first, 22);
  EXPECT_EQ(r.sequences[2].finish, 24);
  EXPECT_EQ(r.sequences[0].gaps, (std::vector<double>{1, 1}));
  EXPECT_EQ(r.duration, 24);
  EXPECT_EQ(r.iterations[0].sequences, 2);
  EXPECT_EQ(r.iterations[0].new_tokens, 8);
}

TEST(ServingEngine, ContinuousPrefillsIntoFreeSlotsThenGeneratesOverAll) {
  EngineConfig c;
  c.slots = 2;
  c.slot_tokens = 16;
  const EngineResult r = run("continuous", c, at_once(3, 4, 3));
  // r0 prefilled [0, 10], r1 [10, 20]; both decode at 21, 22 (and finish); r2: 32, 33, 34.
  EXPECT_EQ(kinds(r), (V{"prefill", "prefill", "decode", "decode", "prefill", "decode", "decode"}));
  const Sequence& a = r.sequences[0];
  EXPECT_EQ(a.first, 10);
  EXPECT_EQ(a.finish, 22);
  EXPECT_EQ(a.gaps, (std::vector<double>{11, 1}));  // its first gap waits for r1's prefill
  EXPECT_EQ(r.sequences[1].first, 20);
  EXPECT_EQ(r.sequences[1].finish, 22);
  EXPECT_EQ(r.sequences[2].first, 32);
  EXPECT_EQ(r.sequences[2].finish, 34);
}

TEST(ServingEngine, ChunkedSharesTheTokenBudgetBetweenDecodesAndChunks) {
  EngineConfig c;
  c.slots = 2;
  c.slot_tokens = 16;
  c.max_batched_tokens = 4;
  const EngineResult r = run("chunked", c, at_once(2, 6, 2));
  // 1: r0 4+0 (10 s). 2: r0 2+4, r1 2+0 (prefill, 10 s; r0's first token at 20). 3: r0 1+6, r1 3+2 (mixed, 5 s;
  // r0 done at 25). 4: r1 1+5 (prefill, its first token at 35). 5: r1 1+6 (decode, done at 36).
  EXPECT_EQ(kinds(r), (V{"prefill", "prefill", "mixed", "prefill", "decode"}));
  EXPECT_EQ(r.iterations[1].new_tokens, 4);
  EXPECT_EQ(r.iterations[2].new_tokens, 4);
  EXPECT_EQ(r.sequences[0].first, 20);
  EXPECT_EQ(r.sequences[0].finish, 25);
  EXPECT_EQ(r.sequences[1].first, 35);
  EXPECT_EQ(r.sequences[1].finish, 36);
}

TEST(ServingEngine, PagedCacheAdmitsWhilePagesLastAndPreemptsTheLatest) {
  EngineConfig c;
  c.slots = 2;
  c.slot_tokens = 16;
  c.paged = true;
  c.page_tokens = 2;
  c.pages = 4;
  const EngineResult r = run("continuous", c, at_once(2, 2, 4));
  // r0, r1 prefilled (one page each), decode to 3 and 4 cached tokens (two pages each: all four used); r0's fifth
  // token needs a third page: r1, admitted last, is preempted. r0 finishes at 23; r1 comes back with its 2 + 3
  // tokens as its prompt, whose prefill samples its fourth and last token at 33.
  EXPECT_EQ(kinds(r), (V{"prefill", "prefill", "decode", "decode", "decode", "prefill"}));
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.sequences[1].preemptions, 1);
  EXPECT_EQ(r.sequences[0].finish, 23);
  EXPECT_EQ(r.sequences[1].first, 20);
  EXPECT_EQ(r.sequences[1].finish, 33);
  EXPECT_EQ(r.sequences[1].gaps, (std::vector<double>{1, 1, 11}));
  EXPECT_EQ(r.iterations[5].new_tokens, 5);
  EXPECT_EQ(r.iterations[2].kv_pages, 4);
  EXPECT_EQ(r.iterations[3].kv_tokens, 8);
}

TEST(ServingEngine, ClosedLoopSendsARequestWhenOneFinishes) {
  EngineConfig c;
  c.slots = 4;
  c.slot_tokens = 16;
  c.max_concurrency = 1;
  const EngineResult r = run("continuous", c, at_once(2, 2, 2));
  // r0: prefill [0, 10], decode 11. r1 is sent at 11: prefill to 21, decode 22; its latencies count from 11.
  EXPECT_EQ(r.sequences[1].sent, 11);
  EXPECT_EQ(r.sequences[1].first, 21);
  EXPECT_EQ(r.sequences[1].finish, 22);
}

TEST(ServingEngine, IdleUntilTheNextArrival) {
  EngineConfig c;
  c.slots = 4;
  c.slot_tokens = 16;
  std::vector<Request> rs = {{0, 0.0, 2, 2}, {1, 100.0, 2, 2}};
  const EngineResult r = run("continuous", c, rs);
  EXPECT_EQ(r.sequences[1].sent, 100);
  EXPECT_EQ(r.sequences[1].first, 110);
  EXPECT_EQ(r.duration, 111);
}

TEST(ServingEngine, PercentilesAsNumpy) {
  // numpy.percentile([1, 2, 3, 4], 90) = 3.7, median 2.5.
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
}

TEST(ServingGrid, TwoPointsAnOctaveThenMultiplesOfTheBucket) {
  EXPECT_EQ(grid_bracket(50, 0, false), std::make_pair(int64_t{48}, int64_t{64}));
  EXPECT_EQ(grid_bracket(64, 0, false), std::make_pair(int64_t{64}, int64_t{64}));
  EXPECT_EQ(grid_bracket(5, 0, false), std::make_pair(int64_t{4}, int64_t{6}));
  EXPECT_EQ(grid_bracket(1000, 256, true), std::make_pair(int64_t{768}, int64_t{1024}));
  EXPECT_EQ(grid_bracket(300, 256, true), std::make_pair(int64_t{256}, int64_t{512}));
  EXPECT_EQ(grid_bracket(100, 256, true), std::make_pair(int64_t{96}, int64_t{128}));
  EXPECT_EQ(grid_bracket(0.5, 256, true), std::make_pair(int64_t{0}, int64_t{1}));
}

// A fake simulator whose cost is bilinear in the decodes and their context (a fixed part, one per sequence, one per
// cached token): the default mode's interpolation reproduces it, with four shapes for any decode (within the few
// tokens by which a grid shape's contexts, spread over a kernel block around its point, miss its mean).
IterationCost bilinear(const Shape& s) {
  IterationCost c;
  double cached = 0;
  for (const Chunk& k : s) cached += static_cast<double>(k.cached);
  c.seconds = 1e-2 + 1e-4 * static_cast<double>(s.size()) + 1e-7 * cached;
  return c;
}

TEST(ServingGrid, DecodesStandInForTheirGridCorners) {
  int64_t calls = 0;
  IterationTimer t({false, 256, "none"}, [&](const std::vector<Shape>& shapes) {
    std::vector<IterationCost> out;
    for (const Shape& s : shapes) out.push_back(bilinear(s)), ++calls;
    return out;
  });
  Shape exact;
  for (int i = 0; i < 50; ++i) exact.push_back({1, 990 + i % 21});  // mean context 1000
  std::sort(exact.begin(), exact.end());
  const auto parts = t.stand_ins(exact);
  ASSERT_EQ(parts.size(), 4u);  // 48 and 64 sequences, 768 and 1024 tokens
  double w = 0;
  for (const auto& [s, weight] : parts) {
    w += weight;
    // Contexts spread over the 128 keys of a block around the point: 705 to 830 (831 for 64), or 961 to 1086 (1087).
    EXPECT_TRUE(s.front().cached == 705 || s.front().cached == 961) << s.front().cached;
    const int64_t top = s.size() == 64 ? 1 : 0;
    EXPECT_TRUE(s.back().cached == 830 + top || s.back().cached == 1086 + top) << s.back().cached;
  }
  EXPECT_NEAR(w, 1, 1e-12);
  // The weights: (50 - 48) / 16 for 64 sequences, (1000 - 768) / 256 for 1024 tokens.
  EXPECT_NEAR(t.cost(exact).seconds, bilinear(exact).seconds, 1e-4 * bilinear(exact).seconds);
  EXPECT_EQ(calls, 4);
  Shape other = exact;
  other[0].cached += 1;  // another composition in the same cell: no new simulation
  t.cost(other);
  EXPECT_EQ(calls, 4);
}

TEST(ServingGrid, ExactModeSimulatesEachDistinctIteration) {
  IterationTimer t({true, 256, "none"}, [](const std::vector<Shape>& shapes) {
    std::vector<IterationCost> out;
    for (const Shape& s : shapes) out.push_back(bilinear(s));
    return out;
  });
  t.cost(Shape{{1, 10}, {1, 11}});
  t.cost(Shape{{1, 10}, {1, 12}});
  t.cost(Shape{{1, 10}, {1, 11}});
  EXPECT_EQ(t.simulated(), 2);
}

TEST(ServingGrid, PromptsOfOneLengthAsTheyAre) {
  IterationTimer t({false, 256, "none"}, nullptr);
  const Shape p = {{1000, 0}, {1000, 0}};
  const auto parts = t.stand_ins(p);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].first, p);
}

// --- request streams --------------------------------------------------------------------------------------------

std::string experiment(const std::string& serving) {
  return "hardware: {preset: tpu-v5e, pod: {dims: [1, 1]}}\n"
         "workload: {preset: llama2-7b, batch: 1, max_context: 2048}\n"
         "serving: " + serving + "\n";
}

Experiment load(const std::string& serving) { return load_experiment_text(experiment(serving), "exp.yaml"); }

TEST(ServingRequests, ConstantAndPoissonArrivals) {
  const Experiment c = load("{requests: {count: 3, input_tokens: 10, output_tokens: 5, arrival: constant, rate: 2}}");
  EXPECT_TRUE(serving_run(c.params));
  const auto rs = request_stream(c.params);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[2].arrival, 1.0);
  EXPECT_EQ(rs[1].input, 10);
  const auto ps = request_stream(
      load("{requests: {count: 200, input_tokens: [10, 20], output_tokens: 5, arrival: poisson, rate: 4}}").params);
  // Mean gap 1/4 s, lengths within their range.
  EXPECT_NEAR(ps.back().arrival / 199.0, 0.25, 0.05);
  for (const auto& r : ps) EXPECT_TRUE(r.input >= 10 && r.input <= 20);
}

Err error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.err();
  }
  return Err::Internal;
}

TEST(ServingRequests, LengthsPastTheContext) {
  const Experiment e = load("{requests: {count: 1, input_tokens: 2000, output_tokens: 100}}");
  EXPECT_EQ(error_of([&] { request_stream(e.params); }), Err::ServingLength);
}

TEST(ServingRequests, RateNeededForTimedArrivals) {
  const Experiment e = load("{requests: {count: 1, input_tokens: 20, output_tokens: 10, arrival: poisson}}");
  EXPECT_EQ(error_of([&] { request_stream(e.params); }), Err::ServingPolicy);
}

TEST(ServingRequests, TraceOutOfOrderOrMalformedNamesItsLine) {
  const std::string dir = testing::TempDir() + "/serving_trace";
  std::filesystem::create_directories(dir);
  auto trace = [&](const std::string& text) {
    std::ofstream(dir + "/t.csv") << text;
    return dir + "/t.csv";
  };
  const std::vector<Request> ok = read_trace(trace("arrival_s,input_tokens,output_tokens\n0,10,5\n0.5,20,3\n"));
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[1].arrival, 0.5);
  EXPECT_EQ(ok[1].output, 3);
  try {
    read_trace(trace("arrival_s,input_tokens,output_tokens\n1,10,5\n0.5,20,3\n"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::ServingTrace);
    EXPECT_EQ(e.where().line, 3);
  }
  try {
    read_trace(trace("arrival_s,input_tokens,output_tokens\n0,10,5\n1,abc,3\n"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::ServingTrace);
    EXPECT_EQ(e.where().line, 3);
  }
}

}  // namespace
