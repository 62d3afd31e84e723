// Re-materialization (activation checkpointing) as a transformation of a training step: forward values the step
// does not keep are recomputed during the backward pass, just before the backward of the segment (a layer, or a
// pipeline stage's micro-batch) that reads them. The recomputed ops are copies of the forward ops (Op::recompute,
// names "<op>/remat", outputs "<tensor>/remat") inserted in the op order right before the segment's first backward
// op; the backward ops of the segment read the copies, so the originals die at their last forward use. Whatever
// partitions the step partitions the copies like the originals (a tensor-parallel layer recomputes its forward
// all-reduce too).
//
// Policies (workload.remat, named after JAX's checkpoint policies, docs/model.md):
//   none   everything_saveable: nothing recomputed
//   full   nothing_saveable: keep only each layer's input (values made outside the layer), recompute the layer
//   dots   dots_with_no_batch_dims_saveable: keep the outputs of matmuls without a batch dimension (projections,
//          FFN), recompute attention's batched matmuls and the elementwise and normalisation ops
//   names  save_only_these_names: keep the values whose names match a glob of workload.remat_keep
// and MaxText's remat_policy names (its decoder layers' get_remat_policy), keeping values by their checkpoint names
// (TensorInfo::checkpoint):
//   minimal              checkpoint_dots_with_no_batch_dims: as dots
//   save_qkv_proj        save_only_these_names(query_proj, key_proj, value_proj)
//   save_out_proj        save_only_these_names(out_proj)
//   save_dot_except_mlp  save_only_these_names(query_proj, key_proj, value_proj, out_proj)
//   qkv_proj_offloaded   save_and_offload_only_these_names(offloaded: query_proj, key_proj, value_proj)
//   minimal_offloaded    offload_dot_with_no_batch_dims: the dots' outputs offloaded
//   custom               MaxText's custom policy: for each checkpoint name (RematOptions::custom) device (kept in
//                        HBM), offload (kept in host memory) or remat (recomputed, the default), as
//                        save_and_offload_only_these_names of the names given device and offload; the layer's input
//                        (decoder_layer_input, made by the layer before) is kept on the device unless offloaded
// An offloaded value goes to host memory right after it is made (a to_host op) and comes back (from_host) ahead of
// the backward that reads it: it takes no HBM in between.
//
//   ModelGraph g = ...;  // forward, backward(loss), optimizer
//   g = rematerialize_layers(g, {RematPolicy::Dots, {}});
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "workloads/graph.h"

namespace podsim {

enum class RematPolicy : uint8_t {
  None, Full, Dots, Names, Minimal, SaveQkvProj, SaveOutProj, SaveDotExceptMlp, QkvProjOffloaded, MinimalOffloaded,
  Custom
};

RematPolicy remat_policy(const std::string& name);  // "none" | "full" | "dots" | "names" | MaxText's names above
const char* remat_policy_name(RematPolicy p);
// The checkpoint names a MaxText policy keeps (on the device, or offloaded to the host: qkv_proj_offloaded); empty
// for the others.
std::vector<std::string> remat_checkpoint_names(RematPolicy p);

// Where MaxText's custom policy holds a named value for the backward pass.
enum class RematPlace : uint8_t { Device, Offload, Remat };

// The checkpoint names RematPolicy::Custom takes (MaxText's, TensorInfo::checkpoint): decoder_layer_input,
// query_proj, key_proj, value_proj, context, out_proj, mlpwi_0, mlpwi_1, mlpwi (an ungated FFN's), mlpwo.
const std::vector<std::string>& remat_custom_names();
RematPlace remat_place(const std::string& name);  // "device" | "offload" | "remat"

struct RematOptions {
  RematPolicy policy = RematPolicy::None;
  std::vector<std::string> keep;  // glob patterns of tensor names kept (RematPolicy::Names)
  // RematPolicy::Custom: where each checkpoint name is held; a name not given is recomputed (decoder_layer_input:
  // kept on the device).
  std::vector<std::pair<std::string, RematPlace>> custom;
};

struct Rematerialized {
  ModelGraph graph;
  std::vector<OpId> source_op;        // per op of `graph`: the op of the original step it is (or recomputes)
  std::vector<TensorId> source_tensor;  // per tensor: the original tensor it is (or recomputes); originals keep ids
};

// The general transformation. `segment(op)`: the segment a forward-phase or backward op of `g` belongs to, -1 for
// none (never recomputed, its backward reads the originals). `saved(t)`: a forward value kept for the backward pass.
// A backward op of segment s reading a value made by a forward op of s that is not saved reads a recomputed copy;
// a copy reads copies for the values of s that are not saved, the originals otherwise. (An op with several outputs
// is recomputed when one of them is needed and not saved; its saved outputs are still read from the original.) The copies of segment s
// are placed right before its first backward op. `gate`: order each segment's recomputation after the backward op
// that precedes it (a control edge from that op to the copies without a recomputed input), so that a schedule
// that runs ready ops at once does not run the recomputation early. `offloaded(t)` (may be empty): a forward value
// kept in host memory instead: a to_host op right after its producer, and a from_host op placed where the backward of
// the cell before the segment's (in backward order) begins, gated like the recomputation; the segment's backward
// and copies read what came back. `offloaded_input(t)` (may be empty): a value made by a forward op outside a
// segment (the layer's input, made by the layer before) that the segment's backward or copies read, kept in host
// memory the same way: one to_host after its producer, and a from_host for each segment that reads it, placed and
// gated as above.
Rematerialized rematerialize(const ModelGraph& g, const std::function<int64_t(OpId)>& segment,
                             const std::function<bool(TensorId)>& saved, bool gate,
                             const std::function<bool(TensorId)>& offloaded = {},
                             const std::function<bool(TensorId)>& offloaded_input = {});

// The per-layer policies on a logical step: segments are the model cells (layers), except cells holding the loss
// (their backward starts as soon as their forward ends: nothing to gain). Returns `g` itself for RematPolicy::None.
ModelGraph rematerialize_layers(const ModelGraph& g, const RematOptions& opt);

// Whether `name` matches one of the glob patterns (`*`, `?`, `[...]`, as the shell's).
bool remat_name_kept(const std::string& name, const std::vector<std::string>& patterns);

}  // namespace podsim
