// ToHost and FromHost: a tensor moved between the chip's HBM and its host's memory over the host link
// (hw/chip/host_link.h), as XLA's host offloading moves a value to host memory and back (a copy-start/copy-done
// pair into and out of the host memory space). Host offload of activations saves a value to the host after the
// forward pass and brings it back for the backward.
//   to_host:   h = x, h held in host memory (it takes no HBM: hw/compiler/memory_plan.cpp)
//   from_host: y = h, y back in HBM
// The values do not change (the output's element type is the input's). The cost is the transfer: the tensor's
// bytes read from HBM (to_host) or written to it (from_host), and the host link's time; no vector or matrix work.
// No gradient rule: transfers are placed in a step after its backward pass is built (re-materialization policies).
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost host_cost(const ModelGraph& g, const Op& op) {
  OpCost c;
  c.unit = Unit::Host;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;  // never fused: a DMA of its own
}

void host_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  ops::check(g.tensor(op.inputs.at(0)).dtype == g.tensor(op.outputs.at(0)).dtype &&
                 g.tensor(op.inputs.at(0)).elements() == g.tensor(op.outputs.at(0)).elements(),
             op, "a host transfer keeps its tensor's element type and size");
  Tensor y = ops::out_like(g, op);
  y.data = in(s, op, 0).data;
  ops::put(g, op, s, std::move(y));
}

// Each device moves its own shard: the output takes the input's spec (a partial sum stays partial).
OpSharding host_rule(const OpShardingQuery& q) { return sharding::elementwise(q, true); }

const bool registered =
    register_op_kind({OpKind::ToHost, "to_host", Unit::Host, host_cost, host_kernel, nullptr, host_rule}) &&
    register_op_kind({OpKind::FromHost, "from_host", Unit::Host, host_cost, host_kernel, nullptr, host_rule});

}  // namespace
}  // namespace podsim
