// MemoryStream: the HBM traffic of the memory microbenchmark (workload.model: memory). No arithmetic: the op moves
// its input's bytes as its pattern says, so its time is the memory system's alone.
//   read    reads x as one sequential stream          gather  reads x in requests of message_bytes at random rows
//   write   writes x's size sequentially              copy    reads x and writes out, interleaved (50 % writes)
// Extra inputs only order the op after their producers (latency probes run after the stream). Numerically out = x.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost stream_cost(const ModelGraph& g, const Op& op) {
  OpCost c;
  c.unit = Unit::Vpu;
  const double bytes = g.tensor(op.inputs[0]).bytes();
  const std::string& p = op.attrs.pattern;
  c.bytes_read = p == "write" ? 0 : bytes;
  c.bytes_written = p == "write" || p == "copy" ? bytes : 0;
  if (p == "gather") {
    c.pattern = HbmPattern::Gather;
    c.read_run = op.attrs.message_bytes;
  }
  return c;
}

void stream_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor o = in(s, op, 0);
  ops::put(g, op, s, std::move(o));
}

const bool registered =
    register_op_kind({OpKind::MemoryStream, "memory_stream", Unit::Vpu, stream_cost, stream_kernel, nullptr});

}  // namespace
}  // namespace podsim
