#include "hw/ici/router.h"

#include <algorithm>

#include "hw/chip/sim_time.h"
#include "sim/common/error.h"

namespace podsim {

IciRouter::IciRouter(sc_core::sc_module_name name, int64_t chip, const Torus& torus, MessagePool& pool,
                     ChipLog& log, StallInjector& stalls, Deliver deliver)
    : sc_core::sc_module(name),
      m_chip(chip),
      m_torus(torus),
      m_pool(pool),
      m_log(log),
      m_stalls(stalls),
      m_deliver(std::move(deliver)),
      m_out(torus.directions(), nullptr) {
  SC_METHOD(wake);
  sensitive << m_queue.event();
  dont_initialize();
}

void IciRouter::inject(Message&& m) {
  m.tail = now_seconds();
  route(std::move(m));
}

void IciRouter::arrive(Message&& m, double head_time) {
  // Move the message into the action (shared_ptr keeps the std::function small and copyable).
  uint32_t slot = m_pool.put(std::move(m));
  m_queue.schedule(at_seconds(head_time), [this, slot] { route(m_pool.take(slot)); });
}

void IciRouter::route(Message&& m) {
  double now = now_seconds();
  if (m.dst == m_chip) {
    double tail = std::max(now, m.tail);
    if (!reached(tail)) {
      uint32_t slot = m_pool.put(std::move(m));
      m_queue.schedule(at_seconds(tail), [this, slot] { m_deliver(m_pool.take(slot)); });
    } else {
      m_deliver(std::move(m));
    }
    return;
  }
  int dir = m_torus.next_hop(m_chip, m.dst);
  IciLink* link = dir >= 0 ? m_out[dir] : nullptr;
  if (!link)
    throw Error(Err::Internal, "no ICI link from chip " + std::to_string(m_chip) + " toward chip " +
                                   std::to_string(m.dst));
  double ser = m.bytes / link->bandwidth;
  double start = std::max(now, link->free) + m_stalls.draw();
  double end = std::max(start + ser, m.tail);
  link->free = end;
  m_log.link_bytes[dir] += m.bytes;
  m_log.link_busy[dir] += end - start;
  // Every message on a traced chip (the trace's link tracks) and on the result chip (its timeline's links sending;
  // its ops' busy time in summary.json counts those it sends itself). A message the chip forwards belongs to
  // another chip's op: op -1.
  const bool own = m.hops == 0;
  if ((m_log.traced || m_log.keep_compute) && m.bytes > 0)
    m_log.links.push_back({start, end, own ? m.op : -1, static_cast<uint8_t>(dir), m.bytes});
  ++m.hops;
  m.tail = end + link->latency;
  // A message on its last hop has nothing to forward: it can wake its destination when its tail arrives instead of
  // when its head does (one event less per message).
  double wake = m.dst == link->to ? m.tail : start + link->latency;
  if (link->shift_dim >= 0) {
    m.src = m_torus.shift(m.src, link->shift_dim, link->shift);
    m.dst = m_torus.shift(m.dst, link->shift_dim, link->shift);
    if (m.kind != MsgKind::Traffic) m.key.src = m_torus.shift(m.key.src, link->shift_dim, link->shift);
  }
  link->sink->arrive(std::move(m), wake);
}

}  // namespace podsim
