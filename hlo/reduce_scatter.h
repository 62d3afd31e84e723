// XLA's reduce-scatter creator on an imported module (xla/service/reduce_scatter_creator.h, in the TPU and GPU
// pipelines): an all-reduce whose only reader is a dynamic-slice taking, on every device, the block its rank in the
// all-reduce's group selects (rank x block along one dimension, 0 along the others) is a reduce-scatter. The
// SPMD partitioner writes gradients that way (all-reduce of the whole gradient, then each device's shard); XLA's
// pipeline then moves half the bytes. The offsets are evaluated for every device from the module's own
// partition-id arithmetic (constants, tables indexed by the id, scalar arithmetic); anything else keeps the pair.
#pragma once

#include <cstdint>

#include "hlo/module.h"

namespace podsim::hlo {

// Rewrites every such pair of `m` (modules XLA has not scheduled: a scheduled one is run as given) over `devices`
// partitions: the all-reduce becomes the reduce-scatter (the dynamic-slice's shape, `dimensions={d}`) and the
// dynamic-slice a bitcast of it. Returns the number of pairs rewritten.
int64_t create_reduce_scatters(Module& m, int64_t devices);

}  // namespace podsim::hlo
