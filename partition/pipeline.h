// GPipe pipeline parallelism (Huang et al. 2019) as a plan: the model's cells (layers, workloads/op.h Op::cell)
// are cut into K contiguous stages over the mesh axis `pipe` (balanced by estimated cost unless the boundaries are
// given), the mini-batch runs as M micro-batches (partition/microbatch.h), each stage is one program (a role)
// partitioned SPMD over the other mesh axes, and stages exchange boundary activations forward and their gradients
// backward with Send/Recv to their neighbours along `pipe`. Gradients accumulate over the micro-batches and each
// stage updates its parameters once per mini-batch.
//
// Schedules: "gpipe" runs every micro-batch's forward, then every backward (a control dependency holds each
// stage's first backward until its last forward is done); "1f1b" lets stage k run K - 1 - k forwards ahead and
// then alternates one forward and one backward. Re-materialization: a stage keeps only the values it received and
// recomputes its forward activations for a micro-batch just before that micro-batch's backward.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace podsim {

struct PipelineOptions {
  std::string axis = "pipe";
  int64_t micro_batches = 4;
  bool remat = false;
  std::string schedule = "gpipe";   // gpipe | 1f1b
  std::vector<int64_t> boundaries;  // first cell of stages 1 .. K-1; empty: balanced by cost
};

struct PipelineInput {
  const ModelGraph& logical;
  const Mesh& mesh;
  std::map<TensorId, ShardSpec> annotations;  // over the other mesh axes, for tensors of `logical`
  std::map<std::string, std::string> algorithms;
  double flops_per_comm_byte = 300;
  PipelineOptions options;
  // Estimated seconds of one op of `logical` (for balancing the stages).
  std::function<double(const ModelGraph&, const Op&)> op_seconds;
  // Parameters of `logical` stored sharded and gathered into this spec before each pass reads them (FSDP;
  // partition/partitioner.h). A stage issues each gather one unit of its schedule ahead of the unit that first
  // reads it, waiting for the unit before that (one gathered copy per pass serves every micro-batch).
  std::map<TensorId, ShardSpec> gathered_for_use;
  bool keep_gathered = false;  // the forward's gathered copy serves the backward too (partition/partitioner.h)
};

struct PipelineResult {
  std::vector<Program> programs;               // one per stage
  std::vector<std::vector<int32_t>> cells;     // the cells of each stage
  std::vector<double> stage_seconds;           // estimated cost of each stage (one mini-batch)
  std::vector<std::vector<PipelineUnit>> units;  // each stage's units in its schedule's order
  std::vector<std::vector<int32_t>> unit_of_op;  // per stage, per op of its program: its unit or -1 (PlanPipeline)
  std::vector<std::string> notes;
};

// Throws Error(StrategyMismatch) when the step cannot be cut into the stages asked for.
PipelineResult pipeline_step(const PipelineInput& in);

// The stages' first cells for `costs` (per cell, in order) cut into `k` contiguous stages: the cut with the
// smallest largest stage, and among those the smallest spread of stage costs.
std::vector<int64_t> balance_stages(const std::vector<double>& costs, int64_t k);

}  // namespace podsim
