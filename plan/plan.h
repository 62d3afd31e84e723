// A Plan: how one logical training step runs on a pod. A logical device Mesh (named axes on the torus,
// plan/mesh.h) and one SPMD Program per distinct role (e.g. a pipeline stage) that every chip of that role runs:
// planning grows with the number of roles, never with the number of chips. Strategies (strategies/) make plans;
// the hardware (hw/) runs them; neither knows the other, they share these types.
//
// A program's graph holds local tensors (each device's shard) and communication ops over mesh axes. Bindings tie
// local tensors to the logical step's tensors: a step input is initialised from its logical value (each device
// takes its slice), and a step result is assembled from the devices' shards into the logical tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "plan/sharding.h"
#include "workloads/graph.h"

namespace podsim {

struct TensorBinding {
  TensorId local = -1;    // in the program's graph
  TensorId logical = -1;  // in the logical step graph
  ShardSpec spec;         // how each device's local tensor holds the logical one (never partial)
};

// Where an op of a program comes from in its source, when the program was imported rather than partitioned (an
// XLA HLO module, hlo/): the instruction's name, its opcode and its category in a TPU profile's "HLO op stats".
struct OpSource {
  std::string name, opcode, category;
};

struct Program {
  std::string role;
  ModelGraph graph;         // the per-device step: local shapes and communication ops
  std::vector<OpId> order;  // issue order, a topological order of `graph`
  std::vector<TensorBinding> inputs;   // step inputs of `graph` and the logical tensors they come from
  std::vector<TensorBinding> results;  // local tensors that hold logical step results
  // Kernels the program's source fused itself (an HLO module after XLA's optimizations), each a run of consecutive
  // ops of `order`: lowering keeps them as they are instead of fusing the program itself. Empty: podsim fuses.
  std::vector<std::vector<OpId>> kernels;
  // An imported program's instructions (hlo_op_stats.csv): sources[source_of_op[op]] for each op; empty otherwise.
  std::vector<int32_t> source_of_op;
  std::vector<OpSource> sources;
};

// A pipeline stage's work on one micro-batch, as its schedule orders it: the micro-batch's forward pass, its
// backward pass, or (re-materialization) the recomputation of its forward activations just before the backward.
enum class PipelinePass : uint8_t { Forward, Recompute, Backward };

inline const char* pipeline_pass_name(PipelinePass p) {
  return p == PipelinePass::Forward ? "forward" : p == PipelinePass::Recompute ? "recompute" : "backward";
}

struct PipelineUnit {
  PipelinePass pass = PipelinePass::Forward;
  int32_t micro_batch = 0;
};

// What a pipeline plan is made of (reported with the run); stages == 0 for plans without a pipeline.
struct PlanPipeline {
  int64_t stages = 0, micro_batches = 0;
  std::string schedule;
  bool remat = false;
  std::vector<std::vector<int32_t>> cells;  // the model cells of each stage (role k runs stage k)
  std::vector<double> stage_seconds;        // estimated cost of each stage, used to balance them
  std::vector<std::vector<PipelineUnit>> units;  // each stage's units in its schedule's order
  // Per stage, per op of its program's graph: the unit (index into units[stage]) the op is part of, or -1 for
  // work of the whole step (transfers between stages, gradient accumulation and reduction, the update).
  std::vector<std::vector<int32_t>> unit_of_op;
};

struct Plan {
  std::string strategy;
  Mesh mesh;
  std::vector<Program> programs;
  std::vector<int32_t> role_of_chip;  // index into programs for each physical chip; -1 = idle
  // The chip whose local tensors are written as they are when a result has no binding (replicate's programs).
  int32_t result_chip = 0;
  std::vector<std::string> notes;  // what the user should know about the plan (padding, placement)
  PlanPipeline pipeline;
  // How many times the logical step's model FLOPs count: 1 for a logical step any strategy partitions; for an
  // imported per-device module, whose logical graph is one device's program, the number of devices running it.
  int64_t logical_copies = 1;
  // Devices per chip: 1, or 2 on TPU v2 and v3 where XLA runs one device per TensorCore (an imported module's):
  // each core then runs the whole program on its own device's data instead of sharing each op with the other.
  int64_t devices_per_chip = 1;
};

// Checks a strategy's plan against the contract (one role per chip or idle, valid issue orders, communication over
// mesh axes that exist, bindings whose local shapes match their specs, a result chip that runs a program); throws
// Error(Internal) naming the strategy and the broken rule. `logical` is the step graph the bindings refer to.
void validate_plan(const Plan& plan, const ModelGraph& logical, int64_t chips);

}  // namespace podsim
