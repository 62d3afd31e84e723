// Injection of one chip's outgoing messages onto its ICI links, with backpressure and arbitration.
// A message is launched (read from HBM, then put on its first link) only when the link will be free within one
// chunk's serialisation time, so concurrent flows out of a chip share a link chunk by chunk instead of one of them
// reserving it far ahead, and HBM reads happen just in time. Messages wait in a queue per outgoing direction
// meanwhile; per direction the flow with the lowest priority value goes first, flows of equal priority in turn
// (round robin, a chunk's worth of bytes per turn: hw/chip/link_turns.h), and the messages of one flow in order.
//
//   LinkInjector inj(chip, ctx, pool, hbm, router, log, queue, [](int32_t op, int32_t task) { ... });
//   inj.send(std::move(m), FlowId{op, flow}, priority, /*read_hbm=*/true);   // on_injected(m.op_here, m.task_here) later
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "hw/chip/action_queue.h"
#include "hw/chip/chip_log.h"
#include "hw/chip/hbm.h"
#include "hw/chip/slots.h"
#include "hw/ici/message.h"
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"

namespace podsim {

// A flow of messages out of one chip: the communication op that sends them and a flow number within the op
// (a collective schedule's Task::flow). Distinct ops never share a flow.
struct FlowId {
  int32_t op = -1;
  int32_t flow = 0;
  bool operator<(const FlowId& o) const { return std::tie(op, flow) < std::tie(o.op, o.flow); }
};

class DcnPort;

class LinkInjector {
 public:
  // Called when a message has been put on its first link, with the message's op_here and task_here.
  using Injected = std::function<void(int32_t op, int32_t task)>;

  LinkInjector(int64_t chip, const PodContext& ctx, MessagePool& pool, Hbm& hbm, IciRouter& router, ChipLog& log,
               ActionQueue& queue, Injected on_injected);

  // Queues `m` for its first link; when the link is about to need it, reads it from HBM (unless `read_hbm` is
  // false: the data is still on chip) and injects it.
  void send(Message&& m, FlowId flow, int32_t priority, bool read_hbm);
  // Messages for other slices go to the data-center network through `port` instead (hw/dcn/dcn.h).
  void set_dcn(DcnPort* port) { m_dcn = port; }

 private:
  void pump(int dir);
  void launch(uint32_t slot);

  int64_t m_chip;
  const PodContext& m_ctx;
  MessagePool& m_pool;
  Hbm& m_hbm;
  IciRouter& m_router;
  ChipLog& m_log;
  ActionQueue& m_queue;
  Injected m_on_injected;
  DcnPort* m_dcn = nullptr;

  static constexpr uint32_t kNone = UINT32_MAX;
  // A waiting message: its pool slot, and the next of its flow (kNone: the last).
  struct Waiting {
    uint32_t slot = 0;
    bool read_hbm = true;
    uint32_t next = kNone;
  };
  // A flow with waiting messages: a list through m_waiting, first to last.
  struct Flow {
    int32_t priority = 0;
    FlowId id;
    uint32_t first = kNone, last = kNone;
    double credit = 0;  // bytes of turns taken and not yet used (hw/chip/link_turns.h)
    bool operator<(const Flow& o) const {
      return priority != o.priority ? priority < o.priority : id < o.id;
    }
  };
  struct Direction {
    std::vector<Flow> flows;  // the flows with waiting messages, by (priority, flow): a few at a time
    FlowId next;            // round robin: serve the first flow >= next among the best priority
    double committed = 0;   // when the link will have sent everything launched so far
    bool armed = false;     // a pump is scheduled
  };
  std::vector<Direction> m_out;  // per outgoing direction
  Slots<Waiting> m_waiting;  // waiting messages of every direction: no allocation per message once warm
};

}  // namespace podsim
