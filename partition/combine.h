// Gradient bucketing, as XLA's all-reduce and reduce-scatter combiners do it: a pass over a partitioned program
// (after partition/partitioner.h gave each gradient its own reduction, which starts when the gradient is ready)
// that merges the small reductions of parameter gradients into collectives of up to `threshold` bytes, each moving
// its members' tensors as one buffer (plan/shard_data.h CombinedLayout; partition/combine.cpp says which ops
// qualify and where the combined op goes). Sums are elementwise, so combining changes no value; it changes how
// many collectives queue on the links, and when each gradient's reduction ends.
//
//   CombineStats s = combine_gradient_reductions(program, 30.0 * 1024 * 1024);
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace podsim {

// XLA's default combine threshold (its debug options xla_gpu_all_reduce_combine_threshold_bytes and
// xla_gpu_reduce_scatter_combine_threshold_bytes): 30 MiB. docs/config.md run.combine_threshold.
constexpr double kDefaultCombineThresholdBytes = 30.0 * 1024 * 1024;

struct CombineStats {
  int64_t collectives = 0;  // combined collectives made
  int64_t members = 0;      // gradient reductions they replaced
};

// Rewrites `prog` in place (its graph is rebuilt: tensor ids are kept, op ids are not). `unit_of_op`, when given
// (a pipeline stage's, PlanPipeline::unit_of_op), is remapped to the new op ids; only reductions of the same
// unit are combined. A threshold of 0 (or less) combines nothing.
CombineStats combine_gradient_reductions(Program& prog, double threshold_bytes,
                                         std::vector<int32_t>* unit_of_op = nullptr);

}  // namespace podsim
