// The ICI router of one chip and the links leaving it.
//
// Links serialise what crosses them: a chunk occupies its link for bytes / bandwidth from when the link is free,
// so concurrent transfers sharing a link slow each other down. Forwarding is cut-through: the head reaches the
// next router one hop latency after it started on the link, and the tail cannot leave a link before it arrived.
// A lone message over h hops therefore arrives after h * hop_latency + bytes / bandwidth. Routing is
// dimension-order over the torus (topology/torus.h). One event per chunk per hop; the router's inbox is an
// ActionQueue, and routers reach each other only through IciLink sinks.
//
// Detours (hardware.faults): when the link dimension-order routing picks is down, the message goes the other way
// round that dimension's ring and keeps that direction until its coordinate in the dimension is the destination's,
// then continues in dimension order. A second down link on the detour, or a down link in a dimension without
// wrap-around, leaves no route: the run stops with Error(Unroutable) naming the op that sent the message.
#pragma once

#include <functional>
#include <string>
#include <systemc>
#include <vector>

#include "hw/chip/action_queue.h"
#include "hw/chip/chip_log.h"
#include "hw/chip/slots.h"
#include "hw/chip/stall.h"
#include "hw/ici/message.h"
#include "topology/torus.h"

namespace podsim {

class IMessageSink {
 public:
  virtual ~IMessageSink() = default;
  // The head of `m` reaches this router at `head_time` (seconds, >= now) over the link leaving its previous
  // router in direction `dir`.
  virtual void arrive(Message&& m, double head_time, int dir) = 0;
};

struct IciLink {
  int64_t from = -1, to = -1;
  int dir = 0;
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // seconds per hop
  double free = 0;       // when the link can start the next chunk
  IMessageSink* sink = nullptr;
  bool down = false;     // hardware.faults: carries nothing; routes detour around it
  // A link out of a pod reduced by symmetry (hw/pod/symmetry.h) to the chip that stands for `to`: the chips a
  // message names (src, dst, key.src) move by shift[d] along each dimension d as it crosses.
  bool shifted = false;
  int64_t shift[4] = {0, 0, 0, 0};  // per dimension, the slices' included
};

class IciRouter : public sc_core::sc_module, public IMessageSink {
 public:
  // Called at the time a message's tail has fully arrived at its destination chip.
  using Deliver = std::function<void(Message&&)>;
  // Called when no route is left for a message (`why`: where it is stuck): records Error(Unroutable) and stops the
  // simulation, since an exception must not cross the SystemC kernel.
  using Unroutable = std::function<void(const Message&, const std::string& why)>;

  IciRouter(sc_core::sc_module_name name, int64_t chip, const Torus& torus, MessagePool& pool, ChipLog& log,
            StallInjector& stalls, Deliver deliver, Unroutable unroutable = {});

  void connect(int dir, IciLink* link) { m_out[dir] = link; }
  IciLink* link(int dir) const { return m_out[dir]; }

  // Sends `m` (its data is ready in HBM now).
  void inject(Message&& m);
  void arrive(Message&& m, double head_time, int dir) override;
  // The direction `m` leaves this chip in (dimension order, or its detour around down links); updates m.detour.
  // When every way is down it reports the message (Unroutable) and returns some link, the simulation stopping.
  int direction(Message& m) const;

 private:
  void route(Message&& m);

  int64_t m_chip;
  const Torus& m_torus;
  MessagePool& m_pool;
  ChipLog& m_log;
  StallInjector& m_stalls;
  Deliver m_deliver;
  Unroutable m_unroutable;
  std::vector<IciLink*> m_out;
  ActionQueue m_queue;
  mutable Memo m_next_hop;  // destination -> dimension-order next hop
};

}  // namespace podsim
