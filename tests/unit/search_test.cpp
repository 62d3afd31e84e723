// podsim search's stages 1 and 2 without simulating: the space's factorisations and placements against hand counts,
// the candidates of a small space counted by hand, the `search` section's bad input at file:line, the memory and
// estimate of a candidate against the plan's own figures, and Spearman's rho on hand-ranked samples.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "sim/config/loader.h"
#include "sim/search/enumerate.h"
#include "sim/search/evaluate.h"
#include "sim/search/search.h"
#include "tests/unit/load_errors.h"

using namespace podsim;

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

const char* kTiny = "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\nworkload: {preset: llm-tiny, batch: 8}\n";

Error load_error(const std::string& text) { return load_failure(text, {}, "s.yaml"); }

Error space_error(const std::string& text) {
  return error_of([&] { search_space(load_experiment_text(text, "s.yaml")); });
}

}  // namespace

TEST(SearchFactorisations, OrderedFactorsOfAtLeastTwo) {
  EXPECT_EQ(factorisations(16, 1), (Shapes{{16}}));
  EXPECT_EQ(factorisations(16, 2), (Shapes{{2, 8}, {4, 4}, {8, 2}}));
  EXPECT_EQ(factorisations(12, 2), (Shapes{{2, 6}, {3, 4}, {4, 3}, {6, 2}}));
  EXPECT_EQ(factorisations(16, 3), (Shapes{{2, 2, 4}, {2, 4, 2}, {4, 2, 2}}));
  EXPECT_TRUE(factorisations(7, 2).empty());  // a prime has no split with both axes >= 2
  EXPECT_TRUE(factorisations(4, 3).empty());
  // 2^k into p ordered factors >= 2: compositions of k into p parts, C(k-1, p-1).
  EXPECT_EQ(factorisations(64, 3).size(), 10u);    // C(5, 2)
  EXPECT_EQ(factorisations(256, 2).size(), 7u);    // C(7, 1)
  EXPECT_EQ(factorisations(256, 3).size(), 21u);   // C(7, 2)
  EXPECT_EQ(factorisations(1024, 4).size(), 84u);  // C(9, 3)
  // 2^3 x 3: ordered pairs (a, b), a b = 24, both >= 2: the divisors 2..12 of 24 = 2, 3, 4, 6, 8, 12.
  EXPECT_EQ(factorisations(24, 2).size(), 6u);
}

TEST(SearchPlacements, OneDimensionOfEachKindThatHoldsTheAxis) {
  using V = std::vector<std::string>;
  EXPECT_EQ(axis_placements(4, {16, 16}, {}), V({"x:4"}));       // x and y are alike: one layout
  EXPECT_EQ(axis_placements(16, {16, 16}, {}), V({"x"}));
  EXPECT_EQ(axis_placements(8, {8, 8, 16}, {}), V({"x", "z:8"}));  // v5p 8 x 8 x 16: the short and the long ring
  EXPECT_EQ(axis_placements(16, {8, 8, 16}, {}), V({"z"}));
  EXPECT_EQ(axis_placements(4, {16, 16}, {true, false}), V({"x:4", "y:4"}));  // a ring and a line differ
  EXPECT_TRUE(axis_placements(32, {16, 16}, {}).empty());  // spans two dimensions: the automatic layout only
  EXPECT_TRUE(axis_placements(3, {16, 16}, {}).empty());
}

TEST(SearchEnumerate, SmallSpaceByHand) {
  Experiment e = load_experiment_text(std::string(kTiny) +
                                          "search: {strategies: [data_parallel, spmd], remat: none, placements: auto}\n",
                                      "s.yaml");
  SearchSpace s = search_space(e);
  EXPECT_EQ(s.strategies, (std::vector<std::string>{"data_parallel", "spmd"}));
  EXPECT_EQ(s.memory_cap, e.hardware.chip.hbm.capacity);
  // data 4; model 4 without and with sequence parallelism; data 2 x model 2 without and with it.
  std::vector<Candidate> c = enumerate_candidates(s, e);
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].name(), "data4-none");
  EXPECT_EQ(c[1].name(), "model4-none");
  EXPECT_EQ(c[2].name(), "model4-none-sp");
  EXPECT_EQ(c[3].name(), "data2-model2-none");
  EXPECT_EQ(c[4].name(), "data2-model2-none-sp");
  EXPECT_EQ(c[4].overrides(), (std::vector<std::string>{"strategy.name=[data_parallel, spmd]", "mesh.axes=[data, model]",
                                                       "mesh.shape=[2, 2]", "workload.remat=none",
                                                       "strategy.sequence_parallel=true"}));

  // placements: all adds model 2 on x (one kind of dimension on 2 x 2) with data on what is left, y, for each of
  // the two data x model candidates; model 4 spans both dimensions and has no other layout.
  s.all_placements = true;
  c = enumerate_candidates(s, e);
  ASSERT_EQ(c.size(), 7u);
  EXPECT_EQ(c[5].placement, (std::vector<std::string>{"y:2", "x"}));
  EXPECT_EQ(c[5].name(), "data2_y.2-model2_x-none");
}

// Over 2 slices of 2 x 2 (8 chips), data_parallel x spmd: each mesh whose data axis is a multiple of 2 puts it over the
// slices, one candidate each; a model axis never spans them (model 8 has no candidate: no data axis to span them).
TEST(SearchEnumerate, SeveralSlicesPutADataFsdpOrPipeAxisOverThem) {
  const std::string hw = "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}, slices: 2}\n"
                         "workload: {preset: llm-tiny, batch: 8}\n";
  Experiment e = load_experiment_text(hw + "search: {strategies: [data_parallel, spmd], remat: none, "
                                           "placements: auto, sequence_parallel: [false]}\n",
                                      "s.yaml");
  std::vector<Candidate> c = enumerate_candidates(search_space(e), e);
  // data 8; data 2 x model 4; data 4 x model 2.
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].name(), "data8.dcn-none");
  EXPECT_EQ(c[1].name(), "data2.dcn-model4-none");
  EXPECT_EQ(c[2].name(), "data4.dcn-model2-none");
  EXPECT_EQ(c[1].mesh_text(), "data 2 (DCN) x model 4");
  const std::vector<std::string> o = c[1].overrides();
  EXPECT_NE(std::find(o.begin(), o.end(), "mesh.dcn_axes=[data]"), o.end());
  // Each is a valid experiment, its data axis over the slices; the DCN's part shows in the estimate.
  Evaluation ev = evaluate_candidate(hw, "s.yaml", c[1].overrides());
  ASSERT_TRUE(ev.ok) << ev.problem;
  Evaluation one = evaluate_candidate("hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
                                      "workload: {preset: llm-tiny, batch: 4}\n",
                                      "s.yaml", {"strategy.name=[spmd]", "mesh.axes=[model]", "mesh.shape=[4]",
                                                 "workload.remat=none", "strategy.sequence_parallel=false"});
  ASSERT_TRUE(one.ok) << one.problem;
  EXPECT_GE(ev.estimate_s, one.estimate_s);
}

TEST(SearchEnumerate, NamesAreFolderNames) {
  Candidate c;
  c.strategies = {"fsdp", "spmd"};
  c.axes = {"fsdp", "model"};
  c.shape = {256, 4};
  c.placement = {"x:8,y:8,z:4", "z:4"};
  c.remat = "full";
  c.sequence_parallel = true;
  // The sweep keeps letters, digits and _ - . + = in a run's folder name: the name needs none changed.
  EXPECT_EQ(c.name(), "fsdp256_x.8_y.8_z.4-model4_z.4-full-sp");
  EXPECT_EQ(c.mesh_text(), "fsdp 256 (x:8,y:8,z:4) x model 4 (z:4)");
  EXPECT_EQ(c.overrides()[3], "mesh.placement=[\"x:8,y:8,z:4\", \"z:4\"]");
}

TEST(SearchEnumerate, PipelineOptionsAndAlgorithms) {
  Experiment e = load_experiment_text(std::string(kTiny) +
                                          "search: {strategies: [pipeline, fsdp], remat: [full, stage], "
                                          "micro_batches: [2, 4], algorithms: [ring, torus], placements: auto}\n",
                                      "s.yaml");
  std::vector<Candidate> c = enumerate_candidates(search_space(e), e);
  // pipe 4: remat full or stage x M 2 or 4 = 4; fsdp 4: remat full (stage is a pipeline's) x 2 algorithms = 2;
  // pipe 2 x fsdp 2: 2 remat x 2 M x 2 algorithms = 8.
  ASSERT_EQ(c.size(), 14u);
  const Candidate& last = c.back();
  EXPECT_EQ(last.name(), "pipe2-fsdp2-stage-mb4-torus");
  EXPECT_EQ(last.overrides(), (std::vector<std::string>{"strategy.name=[pipeline, fsdp]", "mesh.axes=[pipe, fsdp]",
                                                       "mesh.shape=[2, 2]", "workload.remat=none",
                                                       "strategy.remat=true", "strategy.micro_batches=4",
                                                       "strategy.fsdp_algorithm=torus"}));
}

TEST(SearchSection, BadInputIsLocated) {
  Error e = load_error(std::string(kTiny) + "search:\n  remat: [none, bogus]\n");
  EXPECT_EQ(e.err(), Err::BadChoice) << e.what();
  EXPECT_EQ(e.where().line, 4) << e.what();
  EXPECT_NE(e.message().find("dots"), std::string::npos) << e.message();  // says what would be valid

  e = load_error(std::string(kTiny) + "search:\n  strategie: [fsdp]\n");
  EXPECT_EQ(e.err(), Err::UnknownKey) << e.what();
  EXPECT_EQ(e.where().line, 4);
  EXPECT_NE(e.message().find("strategies"), std::string::npos) << e.message();  // did you mean

  e = load_error(std::string(kTiny) + "search:\n  objective: speed\n");
  EXPECT_EQ(e.err(), Err::BadChoice) << e.what();

  e = load_error(std::string(kTiny) + "search:\n  memory_cap: 16\n");  // a size needs its unit
  EXPECT_EQ(e.where().line, 4) << e.what();

  e = space_error(std::string(kTiny) + "search:\n  algorithms: [rign]\n");
  EXPECT_EQ(e.err(), Err::UnknownAlgorithm) << e.what();
  EXPECT_EQ(e.where().line, 4) << e.what();
  EXPECT_NE(e.message().find("'ring'"), std::string::npos) << e.message();

  e = space_error(std::string(kTiny) + "search:\n  strategies: [moe]\n");
  EXPECT_EQ(e.err(), Err::StrategyMismatch) << e.what();
  EXPECT_EQ(e.where().line, 4) << e.what();
}

TEST(SearchSection, RunIgnoresItAndResolvedLeavesItOut) {
  Experiment e = load_experiment_text(std::string(kTiny) + "search: {remat: [full], budget: 3}\n", "s.yaml");
  EXPECT_EQ(e.params.i("search.budget"), 3);
  const std::string resolved = resolved_yaml(e, false);
  EXPECT_EQ(resolved.find("search"), std::string::npos) << resolved;
  Experiment back = load_experiment_text(resolved, "s.yaml");
  EXPECT_EQ(resolved_yaml(back, false), resolved);
}

TEST(SearchEvaluate, InvalidCandidatesSayWhy) {
  // 3 x 1 on 4 chips: the loader's mesh check.
  Evaluation ev = evaluate_candidate(kTiny, "s.yaml", {"strategy.name=[spmd]", "mesh.axes=[model]", "mesh.shape=[3]"});
  EXPECT_FALSE(ev.ok);
  EXPECT_NE(ev.problem.find("PODSIM-PLN-002"), std::string::npos) << ev.problem;
  // 4 stages of a step with 4 cells is fine; 8 chips would not be, but a 2 x 2 pod has 4.
  ev = evaluate_candidate(kTiny, "s.yaml",
                          {"strategy.name=[pipeline]", "mesh.axes=[pipe]", "mesh.shape=[4]", "strategy.micro_batches=3"});
  EXPECT_FALSE(ev.ok);  // 3 micro-batches do not divide the batch of 8
  EXPECT_FALSE(ev.problem.empty());
}

TEST(SearchEvaluate, EstimateHasItsParts) {
  Evaluation dp = evaluate_candidate(kTiny, "s.yaml", {"strategy.name=[data_parallel]", "mesh.axes=[data]", "mesh.shape=[4]"});
  ASSERT_TRUE(dp.ok) << dp.problem;
  EXPECT_GT(dp.peak_bytes, 0);
  EXPECT_GT(dp.compute_s, 0);
  EXPECT_EQ(dp.comm_s, 0);  // the gradient all-reduce runs beside the backward pass, which takes longer here
  EXPECT_EQ(dp.bubble_s, 0);
  EXPECT_DOUBLE_EQ(dp.estimate_s, dp.compute_s + dp.comm_s);
  // A pipeline of K = 2 stages and M = 2 micro-batches: the bubble is (K - 1) / M of the stage's work.
  Evaluation pp = evaluate_candidate(kTiny, "s.yaml", {"strategy.name=[pipeline, data_parallel]", "mesh.axes=[pipe, data]",
                                                      "mesh.shape=[2, 2]", "strategy.micro_batches=2"});
  ASSERT_TRUE(pp.ok) << pp.problem;
  EXPECT_NEAR(pp.bubble_s, (pp.compute_s + pp.comm_s) / 2, 1e-15);
  // Full re-materialization keeps no more (this tiny step peaks at its update, where no activation is live) and
  // recomputes the forward.
  Evaluation full = evaluate_candidate(kTiny, "s.yaml", {"strategy.name=[data_parallel]", "mesh.axes=[data]",
                                                        "mesh.shape=[4]", "workload.remat=full"});
  ASSERT_TRUE(full.ok);
  EXPECT_LE(full.peak_bytes, dp.peak_bytes);
  EXPECT_GT(full.compute_s, dp.compute_s);
}

TEST(SearchSpearman, HandRankedSamples) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // One swap of neighbours twice in five: 1 - 6 x 4 / (5 x 24) = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Ties share their mean rank: ranks (1.5, 1.5, 3) against (1, 2, 3): 1.5 / sqrt(1.5 x 2).
  EXPECT_NEAR(spearman({7, 7, 9}, {1, 2, 3}), 1.5 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(spearman({1}, {1}), 0.0);
}
