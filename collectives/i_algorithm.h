// Collective algorithms as code over point-to-point transfers. An algorithm turns one collective request into a
// Schedule per rank: sends, receives (overwriting or adding into a buffer) and local copies, with dependencies.
// The chip's DMA engine executes the schedule over the simulated ICI (hw/), moving real data in numeric mode, so
// timing reflects link contention and numerics reflect the algorithm's reduction order.
//
// One algorithm per file, registered by name; `supports()` says for which collectives:
//
//   PODSIM_REGISTER_COLLECTIVE(RingAlgorithm, "ring", "Bidirectional ring along each axis in turn");
//
// Contract (checked by tests/unit/collectives_test.cpp for every algorithm and shape):
//  - executing every rank's schedule delivers the collective's result on every rank (collectives/reference.h);
//  - every Send has exactly one Recv with the same (source, destination, tag) and the same element count;
//  - dependencies point backwards (a task depends only on earlier tasks of the same rank);
//  - a schedule's size grows with the rank's own work, never with the group size squared (pods of 4096 chips).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/registry.h"

namespace podsim {

enum class CollectiveKind : uint8_t { AllReduce, ReduceScatter, AllGather, AllToAll, CollectivePermute, Broadcast };
const char* collective_name(CollectiveKind k);  // "all_reduce", ...
bool parse_collective(const std::string& name, CollectiveKind& out);
const std::vector<CollectiveKind>& all_collectives();

// The ranks of one group, laid out on a (sub)torus: rank = c0 + d0 * (c1 + d1 * c2), dimension 0 fastest.
struct GroupShape {
  std::vector<int64_t> dims;  // sizes along the axes the collective spans
  std::vector<bool> wrap;     // wrap-around per axis (a ring) or not (a line)
  // Per axis, whether it runs between slices over the data-center network (empty: none does). Algorithms move the
  // least data over those axes (collectives/torus.cpp: XLA's hierarchical collectives).
  std::vector<bool> dcn;
  bool spans_dcn() const;
  bool is_dcn(size_t axis) const { return axis < dcn.size() && dcn[axis]; }
  int64_t size() const;
  std::vector<int64_t> coords(int64_t rank) const;
  int64_t rank(const std::vector<int64_t>& coords) const;
  // The rank `steps` away along axis `axis` (with wrap-around; -1 when it leaves an open line).
  int64_t neighbor(int64_t rank, int axis, int64_t steps) const;
};

// Buffers: every rank has Input (the collective's input; the algorithm may overwrite it, the executor hands it a
// private copy), Output (starts as a copy of Input when both have the same size, zeros otherwise) and Scratch
// (zeros, schedule.scratch_elements). Simulated cost comes only from the tasks.
struct CollectiveRequest {
  CollectiveKind kind = CollectiveKind::AllReduce;
  GroupShape group;
  // Elements of each rank's input buffer. AllReduce: in = out = n. ReduceScatter: in n, out n / size.
  // AllGather: in n, out n * size. AllToAll: in = out = n, block j of the input goes to rank j and block i of the
  // output comes from rank i. CollectivePermute: in = out = n, rank r sends to rank r + shift (mod size).
  // Broadcast: in = out = n, root's input lands on every rank.
  int64_t elements = 0;
  int elem_bytes = 4;
  int64_t chunk_elements = 0;  // split transfers larger than this (0: no limit)
  // At most this many chunks of chunk_elements per transfer: a larger one is cut into chunks of 1/max_chunks of it
  // (hardware.ici.max_chunks; 0: no limit). Not applied to chunks of dcn_chunk_elements.
  int64_t max_chunks = 0;
  int64_t dcn_chunk_elements = 0;  // the same over the data-center network's axes (0: chunk_elements)
  int64_t shift = 1;           // CollectivePermute
  // CollectivePermute with arbitrary pairs: rank r sends to targets[r] (-1: nothing), a rank that no pair targets
  // gets zeros (XLA's collective-permute). Empty: the shift.
  std::vector<int64_t> targets;
  int64_t root = 0;            // Broadcast
};

// A strided region of a buffer, in two levels: `count` blocks of `block` elements, `stride` apart, the whole
// group repeated `count2` times, `stride2` apart, starting at `offset`. (Two levels express every block set the
// torus algorithms exchange on up to three axes.)
struct Region {
  int64_t offset = 0;
  int64_t block = 0;
  int64_t stride = 0;
  int64_t count = 1;
  int64_t stride2 = 0;
  int64_t count2 = 1;
  int64_t elements() const { return block * count * count2; }
  int64_t end() const;  // one past the last element it touches
  // Calls f(offset, length) for each contiguous block, in order.
  template <class F>
  void for_blocks(F f) const {
    for (int64_t j = 0; j < count2; ++j)
      for (int64_t i = 0; i < count; ++i) f(offset + j * stride2 + i * stride, block);
  }
};
inline Region contiguous(int64_t offset, int64_t n) { return Region{offset, n, n, 1, n, 1}; }

enum class Buffer : uint8_t { Input, Output, Scratch };

struct Task {
  enum class Type : uint8_t { Send, Recv, Copy };
  enum class Combine : uint8_t { Overwrite, Add };  // how a Recv or Copy lands in its destination
  Type type = Type::Send;
  Combine combine = Combine::Overwrite;
  int64_t peer = -1;  // Send: destination rank; Recv: source rank
  int64_t tag = 0;    // pairs a Send with the Recv of the same (source, destination, tag)
  Buffer src_buf = Buffer::Input;  // Send, Copy
  Region src;
  Buffer dst_buf = Buffer::Output;  // Recv, Copy
  Region dst;
  int32_t dep_begin = 0;  // deps[dep_begin, dep_begin + dep_count) of the schedule: tasks to finish first
  int32_t dep_count = 0;
  // The data stays in on-chip memory (VMEM) between a receive and the send that forwards it: a Send marked
  // on_chip reads no HBM (it forwards what the previous receive just landed); a Recv marked on_chip writes no HBM
  // (its result is only forwarded; a reduction still reads the local addend). Ring steps use it so forwarding
  // does not round-trip through HBM.
  bool on_chip = false;
  // Sends of different flows share an outgoing link chunk by chunk: the flow with the lowest `priority` first,
  // round robin among equals; sends of one flow go in order. Ring algorithms give concurrent parts different flows
  // and the phase as priority, so a part that fell behind catches up instead of being slowed by one ahead of it.
  int32_t flow = 0;
  int32_t priority = 0;
};

struct Schedule {
  std::vector<Task> tasks;
  std::vector<int32_t> deps;
  int64_t output_elements = 0;
  int64_t scratch_elements = 0;

  // Appends a task depending on `after`; returns its index.
  int32_t add(Task t, const std::vector<int32_t>& after = {});
};

// How the schedules of a group's ranks relate, so that a pod of thousands of chips can share one schedule per
// (algorithm, request) instead of holding one per chip. What is shared is the timing view of a schedule (task
// types, sizes, tags, flows, priorities, dependencies, and peers relative to the rank); the regions stay per rank.
//  - Torus: rank r's timing view is rank 0's with every peer moved by r's group coordinates (mod the dims);
//  - Cyclic: rank r's timing view is rank 0's with every peer moved by r (mod the group size);
//  - None: every rank has its own.
// An algorithm whose dependencies are derived from buffer offsets may give rank r slightly different
// dependencies than rank 0 (a block set that wraps around the buffer): it declares a symmetry only when they
// are equivalent in effect, and tests/unit/collectives_test.cpp checks that the shared view is a valid schedule.
enum class RankSymmetry : uint8_t { None, Torus, Cyclic };
// Rank `rank`'s peer for rank 0's peer `peer0` under `sym` (peer0 itself for None).
int64_t symmetric_peer(RankSymmetry sym, const GroupShape& g, int64_t peer0, int64_t rank);
// The inverse: rank 0's peer that stands for `peer` of rank `rank`.
int64_t symmetric_peer0(RankSymmetry sym, const GroupShape& g, int64_t peer, int64_t rank);

class ICollectiveAlgorithm {
 public:
  virtual ~ICollectiveAlgorithm() = default;
  virtual std::vector<CollectiveKind> supports() const = 0;
  virtual Schedule schedule(const CollectiveRequest& req, int64_t rank) const = 0;
  virtual RankSymmetry symmetry(const CollectiveRequest&) const { return RankSymmetry::None; }
  // All-reduce and reduce-scatter: the pieces each of the group's N blocks of the buffer is cut into, every
  // element of a piece being added in the same order (the ring of its block and piece); 0 when the order is not a
  // matter of block and piece. A combined collective (several tensors in one buffer, plan/shard_data.h
  // CombinedLayout) puts each tensor's elements in the block and piece they would have on their own, so they add
  // in the same order.
  virtual int64_t reduction_pieces(const CollectiveRequest&) const { return 0; }
};

using CollectiveRegistry = Registry<ICollectiveAlgorithm>;

// The algorithm used when a collective op names none.
std::string default_algorithm(CollectiveKind k);

}  // namespace podsim

#define PODSIM_REGISTER_COLLECTIVE(Impl, name, description) \
  PODSIM_REGISTER(::podsim::ICollectiveAlgorithm, Impl, name, description)
