// Communication ops: executed by the chips' DMA engines over the simulated ICI (hw/chip/dma.h), so they have a
// cost entry (their bytes) but no kernel and no gradient rule here.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

OpCost comm_cost(const ModelGraph& g, const Op& op) {
  OpCost c;
  c.unit = Unit::Ici;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

const bool registered =
    register_op_kind({OpKind::AllReduce, "all_reduce", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::ReduceScatter, "reduce_scatter", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::AllGather, "all_gather", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::AllToAll, "all_to_all", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::CollectivePermute, "collective_permute", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::Broadcast, "broadcast", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::Send, "send", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::Recv, "recv", Unit::Ici, comm_cost, nullptr, nullptr}) &&
    register_op_kind({OpKind::Traffic, "traffic", Unit::Ici, comm_cost, nullptr, nullptr});

}  // namespace
}  // namespace podsim
