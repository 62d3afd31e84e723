// What the plan-figure tests share (plan_figures_test, sequence_parallel_test, pipeline_figures_test, fsdp_test,
// remat_test): a step planned from experiment text, its collectives written as one line each for hand counts, and
// the check that a plan run in memory on every device reproduces the single-device step.
//
//   const Step s = plan_step(hardware("[4, 1]") + workload + "strategy: {name: fsdp}\n");
//   EXPECT_EQ(collectives(s.plan.programs[0]), sorted({ag("fc0.w", "fsdp", 0, 256, 1024), ...}));
//   expect_reproduces_the_step(s);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "partition/interpreter.h"
#include "plan/shard_data.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

namespace podsim::plan_steps {

struct Step {
  Experiment exp;
  ModelGraph graph;
  Plan plan;
};

// The step of `yaml`, planned and validated. Without `combine`, gradient bucketing is off, so that the plan holds the
// partitioner's collectives, one per gradient (bucketing has its own tests: combine_test.cpp).
inline Step plan_step(const std::string& yaml, bool combine = false) {
  Experiment e = load_experiment_text(yaml, "plan.yaml");
  if (!combine) e.run.combine_threshold = 0;
  ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  Plan p = make_plan(g, e);
  validate_plan(p, g, e.hardware.pod.chips());
  return {e, g, p};
}

inline std::string hardware(const std::string& dims) {
  return "hardware: {preset: tpu-v3, pod: {dims: " + dims + "}}\n";
}

// The graph of `workload` (experiment text without its hardware) on one TPU v3 chip, as the model tests read it.
inline ModelGraph one_chip_graph(const std::string& workload, const std::string& file = "model.yaml") {
  const Experiment e = load_experiment_text(hardware("[1, 1]") + workload, file);
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

// The op that makes the tensor named `tensor` (a failed expectation when there is none).
inline const Op& producer(const ModelGraph& g, const std::string& tensor) {
  const TensorId t = g.find_tensor(tensor);
  EXPECT_GE(t, 0) << tensor;
  return g.op(g.producer(t));
}

// The name of `op`'s input i.
inline std::string input_name(const ModelGraph& g, const Op& op, size_t i) { return g.tensor(op.inputs.at(i)).name; }

// One collective as the tests write it: "reduce_scatter fc0.w.grad [data] dim 0: 1024 -> 256 B".
inline std::string line(const std::string& kind, const std::string& tensor, const std::string& axes, int dim,
                        double in, double out) {
  auto num = [](double bytes) { return std::to_string(static_cast<long long>(bytes)); };
  std::string s = kind + " " + tensor + " [" + axes + "]";
  if (dim >= 0) s += " dim " + std::to_string(dim);
  s += ": " + num(in);
  if (out != in) s += " -> " + num(out);
  return s + " B";
}
inline std::string ar(const std::string& t, const std::string& axes, double bytes) {
  return line("all_reduce", t, axes, -1, bytes, bytes);
}
inline std::string rs(const std::string& t, const std::string& axes, int dim, double in, double out) {
  return line("reduce_scatter", t, axes, dim, in, out);
}
inline std::string ag(const std::string& t, const std::string& axes, int dim, double in, double out) {
  return line("all_gather", t, axes, dim, in, out);
}
inline std::string a2a(const std::string& t, const std::string& axes, int dim, double bytes) {
  return line("all_to_all", t, axes, dim, bytes, bytes);
}
inline std::string send(const std::string& t, double bytes) { return line("send", t, "pipe", -1, bytes, bytes); }
inline std::string recv(const std::string& t, double bytes) { return line("recv", t, "pipe", -1, bytes, bytes); }

// The collectives and point-to-point transfers of a program, in the form above, sorted. The tensor is the op's
// name up to its last '/' (the partitioner names a reshard "<tensor>/<collective>#n", a transfer
// "<tensor>/send to stage k").
inline std::vector<std::string> collectives(const Program& p) {
  std::vector<std::string> lines;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (!is_communication(op.kind)) continue;
    const std::string tensor = op.name.substr(0, op.name.rfind('/'));
    std::string axes;
    for (const auto& a : op.attrs.axes) axes += (axes.empty() ? "" : ",") + a;
    const bool with_dim = op.kind == OpKind::ReduceScatter || op.kind == OpKind::AllGather || op.kind == OpKind::AllToAll;
    // A send's output is a token, a receive has no input: each moves the one tensor it names.
    const double in = op.kind == OpKind::Recv ? p.graph.tensor(op.outputs.front()).bytes()
                                              : p.graph.tensor(op.inputs.front()).bytes();
    const double out = op.kind == OpKind::Send ? in : p.graph.tensor(op.outputs.front()).bytes();
    lines.push_back(line(op_kind_name(op.kind), tensor, axes, with_dim ? static_cast<int>(op.attrs.dim) : -1, in, out));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

inline std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The local tensor of program `p` named `name` (the partitioner names an op's output as its logical tensor).
inline const TensorInfo* local_tensor(const Program& p, const std::string& name) {
  for (size_t t = 0; t < p.graph.num_tensors(); ++t)
    if (p.graph.tensor(static_cast<TensorId>(t)).name == name) return &p.graph.tensor(static_cast<TensorId>(t));
  return nullptr;
}

// The plan run in memory on every device against the single-device step (relative norm error 1e-5). `skip`: tensors
// left out by name (values that are rounding noise in both runs, e.g. a gradient that is zero in exact arithmetic).
inline void expect_reproduces_the_step(const Step& s, bool (*skip)(const std::string&) = nullptr) {
  TensorStore inputs;
  init_step_inputs(s.graph, inputs, 5);
  TensorStore ref = inputs;
  run_reference(s.graph, ref);
  std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 5);
  TensorStore got;
  assemble_results(s.plan, s.graph, [&](int64_t c) { return &chips[c]; }, got);
  int compared = 0;
  for (size_t i = 0; i < s.graph.num_tensors(); ++i) {
    const TensorInfo& t = s.graph.tensor(static_cast<TensorId>(i));
    if ((t.role != TensorRole::Loss && t.role != TensorRole::Updated && !t.result) || (skip && skip(t.name)))
      continue;
    ASSERT_TRUE(got.has(static_cast<TensorId>(i))) << t.name;
    EXPECT_LE(compare_tensors(got.get(static_cast<TensorId>(i)), ref.get(static_cast<TensorId>(i))).rel_norm, 1e-5)
        << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 5);
}

}  // namespace podsim::plan_steps
