// Numeric mode on one chip: the simulated step computes exactly what the single-device reference executor does
// (same kernels in the same dependency order, so bit for bit), and stall injection changes timing, never numbers.
#include <gtest/gtest.h>

#include <cstring>

#include "hw/pod/pod.h"
#include "tests/model/sim_util.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"

using namespace podsim;
using podsim::test::in_child;

namespace {

const char* kMlp = "hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: 32, input: 48, hidden: 64, layers: 3, "
                   "classes: 10, optimizer: adam}\nrun: {numeric: true, trace: {format: \"off\"}}\n";
const char* kTransformer = "hardware: {preset: tpu-v4}\nworkload: {model: transformer, layers: 2, d_model: 64, d_ff: 128, "
                           "heads: 4, vocab: 100, seq_len: 16, batch: 2}\nrun: {numeric: true, trace: {format: \"off\"}}\n";

// Simulates `yaml` and compares every tensor on chip 0 with the reference executor's, bit for bit.
nlohmann::json compare_with_reference(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "t.yaml", {sets});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    const ModelGraph& g = p->plan.programs[0].graph;
    TensorStore ref;
    init_step_inputs(g, ref, e.run.seed);
    run_reference(g, ref);
    TensorStore& sim = s.pod->chips()[0]->store();
    int64_t tensors = 0, differing = 0;
    std::string first;
    for (size_t i = 0; i < g.num_tensors(); ++i) {
      TensorId id = static_cast<TensorId>(i);
      if (!ref.has(id)) continue;
      ++tensors;
      if (!sim.has(id)) {
        ++differing;
        if (first.empty()) first = g.tensor(id).name + " (missing)";
        continue;
      }
      const auto& a = ref.get(id).data;
      const auto& b = sim.get(id).data;
      if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) {
        ++differing;
        if (first.empty()) first = g.tensor(id).name;
      }
    }
    return nlohmann::json({{"tensors", tensors}, {"differing", differing}, {"first", first},
                           {"step_time_s", s.step_time}, {"loss", step_loss(g, sim)}});
  });
}

}  // namespace

TEST(NumericTest, SingleChipMlpStepIsBitIdenticalToTheReference) {
  auto r = compare_with_reference(kMlp);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_GT(r["tensors"].get<int64_t>(), 40);
  EXPECT_EQ(r["differing"].get<int64_t>(), 0) << "first: " << r["first"];
}

TEST(NumericTest, SingleChipTransformerStepIsBitIdenticalToTheReference) {
  auto r = compare_with_reference(kTransformer);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_GT(r["tensors"].get<int64_t>(), 150);
  EXPECT_EQ(r["differing"].get<int64_t>(), 0) << "first: " << r["first"];
  EXPECT_TRUE(std::isfinite(r["loss"].get<double>()));
}

TEST(NumericTest, StallsChangeTimingNeverNumbers) {
  auto base = compare_with_reference(kTransformer);
  auto stalled = compare_with_reference(kTransformer, {"run.stall.probability=0.5", "run.stall.max=3us"});
  ASSERT_FALSE(base.contains("error") || stalled.contains("error"));
  EXPECT_EQ(stalled["differing"].get<int64_t>(), 0) << "first: " << stalled["first"];
  EXPECT_EQ(stalled["loss"].get<double>(), base["loss"].get<double>());
  EXPECT_GT(stalled["step_time_s"].get<double>(), base["step_time_s"].get<double>());
}
