// The DMA engines of one chip: they execute its communication ops over ICI. One class, its jobs in their own files:
//  - dma_collective.cpp: collectives. The op's algorithm (collectives/) gives this chip's schedule; sends read
//    their region from HBM and inject a message, receives wait for theirs and land it (writing HBM on arrival; a
//    reduction runs its adds on the chip's vector units, which read the local data and write the sum), copies move
//    data within HBM. Tasks start when their dependencies are
//    done, so chunks of a ring pipeline through it. In numeric mode messages carry the real data and reductions
//    run in the order the schedule performs them (dma_numerics.h).
//  - dma_p2p.cpp: point-to-point Send/Recv ops (paired by peer and tag), chunked like collectives; a Send completes
//    when the receiver's acknowledgement comes back over the ICI, after its data has all landed.
//  - dma_traffic.cpp: synthetic traffic, Poisson injection of packets to destinations drawn from a pattern.
//  - link_injector.h: injection onto the links, with backpressure and round robin between flows.
//  - dma.cpp: starting ops, routing arrivals to the op that waits for them, finishing ops, deadlock reports.
// A message whose receive is ready when it arrives lands in place (a reduction reads the local data and writes the
// sum as it streams in); one that arrives early is staged in HBM and moved or reduced from there later.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <systemc>
#include <unordered_map>
#include <vector>

#include "hw/chip/action_queue.h"
#include "hw/chip/hbm.h"
#include "hw/chip/link_injector.h"
#include "hw/chip/schedule_cache.h"
#include "hw/chip/slots.h"
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"
#include "workloads/tensor.h"

namespace podsim {

struct CombinedLayout;  // plan/shard_data.h


class Dma : public sc_core::sc_module {
 public:
  using Done = std::function<void(int32_t op, double start, double end)>;
  // Runs the adds of a reduction on the chip's vector units, queued behind the vector ops already waiting there:
  // (op, elements, HBM bytes read, HBM bytes written, called when done).
  using VectorJob = std::function<void(int32_t op, double elements, double read, double write, std::function<void()>)>;

  Dma(sc_core::sc_module_name name, int64_t chip, PodContext& ctx, const ModelGraph* graph,
      const ExecProgram* prog, Hbm& hbm, IciRouter& router, ChipLog& log, TensorStore& store, Done on_done,
      VectorJob vector_job);

  void start(int32_t exec_op);
  // A message has fully arrived at this chip (called by the router).
  void deliver(Message&& m);

  // For deadlock reports: what each running communication op waits for.
  std::vector<std::string> waiting() const;
  bool idle() const { return m_running.empty(); }
  // Messages for other slices leave through the data-center network (hw/dcn/dcn.h).
  void set_dcn(DcnPort* port) { m_links.set_dcn(port); }

 private:

  // A trace flow id for a new message (pairs its send slice with its receive slice): unique by construction, the
  // chip in the high bits and a count of the chip's messages in the low ones; never a hash.
  uint64_t next_flow();

  // A task's state in one word: the dependencies it still waits for (> 0), then kPending (ready: running, or a
  // receive whose message is being landed), kAwaiting (a ready receive waiting for its message), kDone. One array,
  // so a completion reads and updates one cache line where it read two.
  static constexpr int32_t kPending = 0, kAwaiting = -1, kDone = -2;
  struct Running {
    // What arrivals and completions of tasks touch comes first, together in a few cache lines.
    int32_t op = -1;
    OpKind kind = OpKind::AllReduce;
    bool bf16 = false;  // the buffers hold bf16 values: every value written is rounded
    bool max = false;   // a max all-reduce: reductions keep the larger value
    int32_t elem_bytes = 4;  // req.elem_bytes
    uint64_t instance = 0;
    const Task* tasks = nullptr;  // shared->sched.tasks
    size_t task_count = 0;
    size_t finished = 0;
    size_t awaiting = 0;  // receives in kAwaiting
    std::vector<int32_t> state;  // per task: dependencies left, or kPending, kAwaiting, kDone
    std::shared_ptr<const SharedSchedule> shared;  // the schedule, shared with the other chips that run it
    Memo peer_chip;     // a task's peer (rank 0's view, Task::peer) -> its chip
    Memo sender_peer0;  // a sender's chip -> its rank as rank 0 sees it (SharedSchedule::recv_task0)
    double start = 0;
    // Collectives
    CollectiveGroup group;
    CollectiveRequest req;
    std::vector<float> buf[3];  // Input, Output, Scratch (numeric)
    std::shared_ptr<const CombinedLayout> combined;  // a collective of several tensors (plan/shard_data.h)
    // Point to point: the transfer's key, the peer chip, and (Recv) the chunks still to land
    MsgKey p2p_key;
    int64_t p2p_peer = -1;
    int64_t p2p_chunks_left = 0;
    // Traffic
    double traffic_end = 0;
    std::mt19937_64 rng;
  };

  void start_collective(Running& r, const Op& op);
  // The chip a Send or Recv exchanges with: attrs.peer, or `shift` steps along its mesh axes when it names some.
  int64_t peer_of(const Op& op) const;
  void start_send(Running& r, const Op& op);
  void start_recv(Running& r, const Op& op);
  void start_traffic(Running& r, const Op& op);
  void traffic_tick(int32_t op);

  void ready(Running& r, int32_t task);
  void finish_task(int32_t op, int32_t task);
  // `staged`: the message arrived before its receive was ready and waited in a staging buffer in HBM.
  void complete_recv(Running& r, int32_t task, Message&& m, bool staged);
  void finish_op(Running& r);
  void on_message(Message&& m);
  // A message left on its first link: completes its op_here / task_here (task -2: the whole op).
  void injected(int32_t op, int32_t task);
  void land(uint32_t slot);  // a receive's data is in place: apply it and finish the task
  void stage(Message&& m);  // an early arrival waits in a staging buffer in HBM
  // A chunk of a point-to-point transfer lands in the Recv `op`'s output; the last one acknowledges the Send.
  void land_p2p(int32_t op, Message&& m, bool staged);
  void on_ack(const Message& m);

  double elem_bytes(const Running& r) const { return r.elem_bytes; }
  // The chip of task t's peer.
  int64_t peer_chip(Running& r, const Task& t) const {
    return r.peer_chip.get(t.peer, [&] { return r.group.chip_of(r.shared->peer(t, r.group.rank), m_ctx.torus); });
  }

  int64_t m_chip;
  const PodContext& m_ctx;
  MessagePool& m_pool;
  const ModelGraph* m_graph;
  const ExecProgram* m_prog;
  Hbm& m_hbm;
  IciRouter& m_router;
  ChipLog& m_log;
  TensorStore& m_store;
  Done m_on_done;
  VectorJob m_vector_job;
  ActionQueue m_queue;
  std::map<int32_t, Running> m_running;
  std::unordered_map<MsgKey, std::deque<Message>, MsgKeyHash> m_mailbox;      // collective chunks that came early
  std::unordered_map<MsgKey, std::deque<Message>, MsgKeyHash> m_p2p_mailbox;  // point-to-point chunks that came early
  // Point-to-point transfers so far per (peer chip, tag): the k-th Send to a peer with a tag pairs with the peer's
  // k-th Recv from this chip with that tag.
  std::map<std::pair<int64_t, int64_t>, int64_t> m_p2p_sends, m_p2p_recvs;
  // Running collectives by instance: a few at a time, so a vector (its entries point into m_running, whose
  // elements stay where they are).
  std::vector<std::pair<uint64_t, Running*>> m_instance_op;
  LinkInjector m_links;
  uint64_t m_messages_sent = 0;
};

// The collective kind of a communication op kind (AllReduce..Broadcast).
CollectiveKind collective_of(OpKind k);
// The algorithm a communication op runs: the one it names, else its collective's default; "point_to_point" for
// Send and Recv.
std::string comm_algorithm(const Op& op);
// A stable id for the collective instance of an op (same on every chip that runs it).
uint64_t collective_instance(const std::string& op_name);

}  // namespace podsim
