// Pipeline parallelism (GPipe) as graph transformations, without SystemC: micro-batching computes the same step
// (every result within a relative norm error of 1e-5 in fp32), and the staged programs run in memory match the
// single-device reference.
#include <gtest/gtest.h>

#include "partition/interpreter.h"
#include "partition/microbatch.h"
#include "plan/shard_data.h"
#include "strategies/planner.h"
#include "sim/config/loader.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

using namespace podsim;

namespace {

ModelGraph build(const std::string& workload_yaml) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload:\n" + workload_yaml, "p.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

const char* kMlp = "  model: mlp\n  batch: 12\n  input: 10\n  hidden: 14\n  layers: 3\n  classes: 6\n  dtype: fp32\n"
                   "  optimizer: adam\n";
const char* kTransformer = "  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 24\n  heads: 4\n  vocab: 20\n"
                           "  seq_len: 6\n  batch: 4\n  dtype: fp32\n";

// Every result of the reference step (loss, updated values, parameter gradients) against the tensor of the same
// name in `other`; returns the worst relative norm error and counts the tensors compared.
double worst_against_reference(const ModelGraph& g, const ModelGraph& other, const TensorStore& got, int& compared) {
  TensorStore ref;
  init_step_inputs(g, ref, 3);
  run_reference(g, ref);
  double worst = 0;
  compared = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<TensorId>(i));
    bool result = t.role == TensorRole::Loss || t.role == TensorRole::Updated;
    for (OpId c : g.consumers(static_cast<TensorId>(i))) result = result || g.op(c).phase == Phase::Optimizer;
    if (!result || g.producer(static_cast<TensorId>(i)) < 0) continue;
    TensorId o = other.find_tensor(t.name);
    EXPECT_GE(o, 0) << t.name;
    if (o < 0 || !got.has(o)) continue;
    worst = std::max(worst, compare_tensors(got.get(o), ref.get(static_cast<TensorId>(i))).rel_norm);
    ++compared;
  }
  return worst;
}

}  // namespace

TEST(MicrobatchTest, FourMicroBatchesComputeTheSameStep) {
  for (const char* w : {kMlp, kTransformer}) {
    ModelGraph g = build(w);
    Microbatched u = microbatch(g, 4);
    int per_op = 0;
    for (const Op& op : u.graph.ops()) per_op += op.name.find("/mb3") != std::string::npos;
    EXPECT_GT(per_op, 10);  // the examples' work runs once per micro-batch
    TensorStore s;
    init_step_inputs(u.graph, s, 3);
    run_reference(u.graph, s);
    int compared = 0;
    EXPECT_LE(worst_against_reference(g, u.graph, s, compared), 1e-5);
    EXPECT_GT(compared, 10);
  }
}

TEST(MicrobatchTest, MicroBatchesMustDivideTheBatch) {
  ModelGraph g = build(kMlp);
  EXPECT_THROW(microbatch(g, 5), Error);
}


namespace {

// Builds the plan `strategy` makes for `workload` on `dims`, runs it in memory and compares with the reference.
struct PlanCheck {
  double worst = 0;
  int compared = 0;
  Plan plan;
};

PlanCheck check_plan(const std::string& workload, const std::string& dims, const std::string& strategy,
                     const std::string& mesh = "") {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3, pod: {dims: " + dims + "}}\nworkload:\n" + workload +
                                          "strategy: " + strategy + "\n" + mesh,
                                      "p.yaml");
  ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  PlanCheck r;
  r.plan = make_plan(g, e);
  validate_plan(r.plan, g, e.hardware.pod.chips());
  TensorStore inputs;
  init_step_inputs(g, inputs, 3);
  std::vector<TensorStore> chips = interpret_plan(r.plan, g, inputs, 3);
  TensorStore got;
  assemble_results(r.plan, g, [&](int64_t c) { return &chips[c]; }, got);
  r.worst = worst_against_reference(g, g, got, r.compared);
  return r;
}

}  // namespace

TEST(PipelineTest, StagesAndMicroBatchesReproduceTheStep) {
  for (const char* w : {kMlp, kTransformer})
    for (int k : {1, 2, 4})
      for (int m : {1, 4}) {
        for (bool remat : {false, true}) {
          SCOPED_TRACE(std::string(w).substr(0, 20) + " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       (remat ? " remat" : ""));
          std::string dims = k == 1 ? "[1, 1]" : k == 2 ? "[2, 1]" : "[2, 2]";
          PlanCheck r;
          try {
            r = check_plan(w, dims, std::string("{name: pipeline, micro_batches: ") + std::to_string(m) +
                                        ", remat: " + (remat ? "true" : "false") + "}");
          } catch (const std::exception& ex) {
            ADD_FAILURE() << ex.what();
            continue;
          }
          EXPECT_EQ(r.plan.programs.size(), static_cast<size_t>(k));
          EXPECT_GT(r.compared, 10);
          EXPECT_LE(r.worst, 1e-5);
        }
      }
}
