// The SPMD partitioner (GSPMD's design): one logical training step + sharding specs for some of its tensors ->
// one program every device runs on its shards, with the communication the specs imply.
//
//   PartitionInput in{logical, mesh};
//   in.annotations[logical.find_tensor("fc0.w")] = ShardSpec::parse("[-, model]");
//   Program prog = partition_step(in).program;
//
// Walking the step in topological order, the partitioner asks each op's rule (plan/op_sharding.h) which specs it
// runs on, reshards the inputs to them (partial -> reduce-scatter into each dimension the target splits further
// by the pending axes, all-reduce over those left; split -> whole, or split over fewer (outer) axes: all-gather of
// the axes dropped; split on one dimension -> split on another over the same axes: all-to-all; whole, or split
// over the target's outer axes -> split: a local slice), emits the op on local shapes, and reshards outputs that a
// spec annotates. Tensors without a spec take
// what the rules give them (propagation). Dimensions that do not divide evenly are padded (plan/sharding.h).
// Reshards of a tensor are made once and reused. Collectives are placed right after the op whose output they
// move, so a gradient's reduction starts as soon as the gradient is ready and overlaps the rest of the backward
// pass.
//
// Fully sharded parameters (ZeRO-3 / FSDP; strategies/fsdp.cpp): a parameter listed in `gathered_for_use` is held
// in its annotated (sharded) spec, and forward and backward ops read it in the listed spec. Its gathered copy is
// made once per pass and not reused across passes: the forward's copy dies after its last forward use and the
// backward gathers again (unless `keep_gathered`). With `prefetch`, the gathers of each cell (layer) are issued one cell ahead, just
// before the previous cell's first op of the same pass, and wait (a control dependency) for the op issued before
// that one, so each gather overlaps one cell's compute and at most two cells' gathered weights are live.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace podsim {

struct PartitionInput {
  const ModelGraph& logical;
  const Mesh& mesh;
  // Logical tensor -> the spec it must have. Optimizer state without one takes its parameter's.
  std::map<TensorId, ShardSpec> annotations = {};
  std::string role = "spmd";
  // Collective algorithm by collective name ("all_reduce" -> "ring"); unnamed ones use the library's default.
  std::map<std::string, std::string> algorithms = {};
  double flops_per_comm_byte = 300;  // for rules that weigh compute against communication
  // Parameters stored sharded and gathered into this spec before each forward and each backward use (FSDP).
  std::map<TensorId, ShardSpec> gathered_for_use = {};
  bool prefetch = false;  // issue each cell's gathers one cell ahead (see above)
  // The forward pass's gathered copy also serves the backward pass (no second gather; PyTorch FSDP's
  // reshard_after_forward=False): fewer bytes moved, every gathered weight the backward reads live until it does.
  bool keep_gathered = false;
};

struct PartitionResult {
  Program program;
  // For every local tensor: the logical tensor it holds a piece or copy of (-1: a scratch value between the steps
  // of a reshard) and how (its spec; meaningless for scratch values).
  std::vector<TensorId> local_logical;
  std::vector<ShardSpec> local_spec;
  // For every annotated logical tensor: the local tensor holding it in its annotated spec.
  std::map<TensorId, TensorId> annotated_local;
  std::vector<std::string> notes;  // padded dimensions, fallbacks to whole tensors
  double padding_bytes = 0;        // bytes of padding one device holds in its step inputs
  // Each gather of a fully sharded parameter (gathered_for_use): its ops (the all-gather, then the crop of its
  // padding), in issue order.
  std::vector<std::vector<OpId>> gathers;
};

// Throws Error(BadSharding) for an annotation that does not fit its tensor or the mesh.
PartitionResult partition_step(const PartitionInput& in);

}  // namespace podsim
