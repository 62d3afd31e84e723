// Micro-batching (GPipe): the logical step rewritten so that its mini-batch runs as M micro-batches one after the
// other. Every op that works on examples runs M times on a slice of the batch (instance m reads rows
// [m B/M, (m+1) B/M) of the step inputs); values that sum over examples (parameter gradients, the loss) are
// accumulated over the micro-batches with adds, in micro-batch order or the order given; everything else (the optimizer update) runs
// once. The result computes the same step as the original graph: the sums add in another order only.
//
// How: the step is partitioned over a virtual mesh axis `micro` of size M with the inputs split along the batch
// (partition/partitioner.h); the ops left holding `micro` shards are unrolled M times, and each reduction over
// `micro` becomes the accumulation.
//
//   Microbatched u = microbatch(g, 4);
//   u.graph  // ops named "<op>/mb<m>" for instance m; step tensors keep their names
#pragma once

#include <string>
#include <vector>

#include "workloads/graph.h"

namespace podsim {

struct Microbatched {
  ModelGraph graph;
  std::vector<TensorId> origin;   // per tensor of `graph`: the logical tensor it is (-1: a micro-batch's value)
  std::vector<TensorId> slice_of;  // per tensor: the logical tensor whose micro-batch it holds (-1: none)
  std::vector<TensorId> sum_of;    // per tensor: the logical sum it is a running part of (-1: none), for the
                                   // partial sums of the accumulation before the last add
  std::vector<int32_t> instance;  // per op: its micro-batch, or -1 for ops that run once per step
};

// Throws Error(NotDivisible) when M does not divide the batch (dimension 0 of the step inputs and labels), and
// Error(StrategyMismatch) naming an op that does not split along the batch.
// `accumulation_order`: the micro-batches in the order their sums are added (a permutation of 0 .. M-1; empty:
// in order), so that a schedule can add each micro-batch's gradients as soon as its backward pass ends.
// `batch_shards`: the devices the batch is split over after micro-batching (the pipeline's data replicas), each of
// which splits its own rows into the M micro-batches: a per-example result (batch-norm moving averages) is joined
// with each shard's rows outermost, micro-batch m's rows of shard d at rows d B/D + m B/(D M) of the result.
Microbatched microbatch(const ModelGraph& g, int64_t M, std::vector<int64_t> accumulation_order = {},
                        int64_t batch_shards = 1);

}  // namespace podsim
