// The DMA engines of one chip: they execute its communication ops over ICI.
//  - Collectives: the op's algorithm (collectives/) gives this chip's schedule; sends read their region from HBM
//    and inject a message, receives wait for theirs and land it (writing HBM on arrival; a reduction reads and
//    writes HBM again), copies move data within HBM. Tasks start when their dependencies are done, so chunks of a
//    ring pipeline through it. In numeric mode messages carry the real data and reductions run in the order the
//    schedule performs them.
//  - Point-to-point Send/Recv ops (paired by peer and tag).
//  - Synthetic traffic: Poisson injection of packets to destinations drawn from a pattern.
// Injection has backpressure: a message is launched (read from HBM, then put on its first link) only when the link
// will be free within the time the message itself takes to serialise, so concurrent flows out of a chip share a
// link chunk by chunk (round robin between flows) instead of one of them reserving it far ahead, and HBM reads
// happen just in time. Messages wait in a queue per outgoing direction meanwhile.
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
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"
#include "workloads/tensor.h"

namespace podsim {

class Dma : public sc_core::sc_module {
 public:
  using Done = std::function<void(int32_t op, double start, double end)>;

  Dma(sc_core::sc_module_name name, int64_t chip, PodContext& ctx, const ModelGraph* graph,
      const ExecProgram* prog, Hbm& hbm, IciRouter& router, ChipLog& log, TensorStore& store, Done on_done);

  void start(int32_t exec_op);
  // A message has fully arrived at this chip (called by the router).
  void deliver(Message&& m);

  // For deadlock reports: what each running communication op waits for.
  std::vector<std::string> waiting() const;
  bool idle() const { return m_running.empty(); }

 private:
  SC_HAS_PROCESS(Dma);
  void wake() { m_queue.run_due(); }

  struct Running {
    int32_t op = -1;
    OpKind kind = OpKind::AllReduce;
    double start = 0;
    uint64_t instance = 0;
    // Collectives
    CollectiveGroup group;
    CollectiveRequest req;
    Schedule sched;
    std::vector<int32_t> deps_left;
    std::vector<int32_t> dep_ptr;   // CSR of dependents
    std::vector<int32_t> dep_list;
    std::vector<uint8_t> done;
    size_t finished = 0;
    std::vector<float> buf[3];  // Input, Output, Scratch (numeric)
    std::unordered_map<MsgKey, int32_t, MsgKeyHash> waiting_recv;
    // Point-to-point Recv
    MsgKey p2p_key;
    // Traffic
    double traffic_end = 0;
    std::mt19937_64 rng;
  };

  void start_collective(Running& r, const Op& op);
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
  // Queues `m` for its first link in flow `flow`; when the link is about to need it, reads it from HBM (unless it
  // is still on chip) and injects it. Injection completes m.op_here / m.task_here (task -2: the whole op).
  void send(Message&& m, uint64_t flow, int32_t priority, bool read_hbm);
  void launch(uint32_t slot);
  void land(uint32_t slot);  // a receive's data is in place: apply it and finish the task
  void pump(int dir);
  void stage(Message&& m);
  void land_p2p(int32_t op, Message&& m, bool staged);

  double elem_bytes(const Running& r) const { return r.req.elem_bytes; }

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
  ActionQueue m_queue;
  std::map<int32_t, Running> m_running;
  std::unordered_map<MsgKey, std::deque<Message>, MsgKeyHash> m_mailbox;
  std::unordered_map<uint64_t, int32_t> m_instance_op;  // running collective instance -> exec op
  struct Outgoing {
    uint32_t slot = 0;  // in the message pool
    bool read_hbm = true;
  };
  struct Direction {
    // Waiting messages per (priority, flow): the lowest priority value is served first, flows of equal priority in
    // turn.
    std::map<std::pair<int32_t, uint64_t>, std::deque<Outgoing>> flows;
    uint64_t next = 0;  // round robin: serve the first flow >= next among the best priority
    double committed = 0;  // when the link will have sent everything launched so far
    bool armed = false;
  };
  std::vector<Direction> m_out;  // per outgoing direction
};

// The collective kind of a communication op kind (AllReduce..Broadcast).
CollectiveKind collective_of(OpKind k);
// A stable id for the collective instance of an op (same on every chip that runs it).
uint64_t collective_instance(const std::string& op_name);

}  // namespace podsim
