#include "hw/ici/router.h"

#include <algorithm>

#include "hw/chip/sim_time.h"
#include "base/error.h"

namespace podsim {

IciRouter::IciRouter(sc_core::sc_module_name name, int64_t chip, const Torus& torus, MessagePool& pool,
                     ChipLog& log, StallInjector& stalls, Deliver deliver, Unroutable unroutable)
    : sc_core::sc_module(name),
      m_chip(chip),
      m_torus(torus),
      m_pool(pool),
      m_log(log),
      m_stalls(stalls),
      m_deliver(std::move(deliver)),
      m_unroutable(std::move(unroutable)),
      m_out(torus.directions(), nullptr) {
}

void IciRouter::inject(Message&& m) {
  m.tail = now_seconds();
  route(std::move(m));
}

void IciRouter::arrive(Message&& m, double head_time, int dir) {
  // The message waits in the pool; the action carries its slot. Messages that reach this router at one instant
  // are taken in the order of the links they came over (the calendar's arrivals).
  uint32_t slot = m_pool.put(std::move(m));
  const uint64_t key = static_cast<uint64_t>(m_chip) * 64 + static_cast<uint64_t>(dir);
  m_queue.schedule_arrival(at_seconds(head_time), key, [this, slot] { route(m_pool.take(slot)); }, &m_pool.at(slot),
                           &m_chip);
}

int IciRouter::direction(Message& m) const {
  int dir = static_cast<int>(m_next_hop.get(m.dst, [&] { return m_torus.next_hop(m_chip, m.dst); }));
  if (dir < 0) throw Error(Err::Internal, "chip " + std::to_string(m_chip) + " routes a message to itself");
  if (m.detour >= 0) {
    if (dir / 2 == m.detour / 2) dir = m.detour;  // still on the detour's dimension: keep its direction
    else m.detour = -1;                           // the detour's dimension is done
  }
  const IciLink* link = m_out[dir];
  if (link && !link->down) return dir;
  // The link is down (or missing): the other way round this dimension's ring, once.
  const int other = dir ^ 1;
  const IciLink* back = m_out[other];
  if (m.detour < 0 && link && m_torus.wrap()[dir / 2] && back && !back->down) {
    m.detour = static_cast<int8_t>(other);
    return other;
  }
  const std::string why =
      "its message from " + m_torus.chip_label(m.src) + " to " + m_torus.chip_label(m.dst) + " finds the link " +
      Torus::direction_name(dir) + " of " + m_torus.chip_label(m_chip) +
      (link ? " down" : " missing (no wrap-around)") +
      (m.detour >= 0 || !link || !m_torus.wrap()[dir / 2]
           ? " and no way round it"
           : " and the detour " + Torus::direction_name(other) + " down too");
  if (!m_unroutable) throw Error(Err::Unroutable, why);
  m_unroutable(m, why);
  for (int d = 0; d < m_torus.directions(); ++d)  // the simulation stops; any link keeps the caller going
    if (m_out[d]) return d;
  return dir;
}

void IciRouter::route(Message&& m) {
  double now = now_seconds();
  if (m.dst == m_chip) {
    double tail = std::max(now, m.tail);
    if (!reached(tail)) {
      uint32_t slot = m_pool.put(std::move(m));
      m_queue.schedule(at_seconds(tail), [this, slot] { m_deliver(m_pool.take(slot)); }, &m_pool.at(slot));
    } else {
      m_deliver(std::move(m));
    }
    return;
  }
  const int dir = direction(m);
  IciLink* link = m_out[dir];
  double ser = m.bytes / link->bandwidth;
  double start = std::max(now, link->free) + m_stalls.draw();
  double end = std::max(start + ser, m.tail);
  link->free = end;
  m_log.link_bytes[dir] += m.bytes;
  m_log.link_busy[dir] += end - start;
  // Every message on a chip traced at detail units or links (the trace's link tracks) and on the result chip (its
  // timeline's links sending; its ops' busy time in summary.json counts those it sends itself). A message the chip
  // forwards belongs to another chip's op: op -1.
  const bool own = m.hops == 0;
  if (m_log.keep_compute && m.bytes > 0)
    m_log.log_link({start, end, own ? m.op : -1, static_cast<uint8_t>(dir), m.bytes});
  ++m.hops;
  m.tail = end + link->latency;
  // A message on its last hop has nothing to forward: it can wake its destination when its tail arrives instead of
  // when its head does (one event less per message).
  double wake = m.dst == link->to ? m.tail : start + link->latency;
  if (link->shifted)
    for (int d = 0; d < m_torus.ndims(); ++d) {
      if (link->shift[d] == 0) continue;
      m.src = m_torus.shift(m.src, d, link->shift[d]);
      m.dst = m_torus.shift(m.dst, d, link->shift[d]);
      if (m.kind != MsgKind::Traffic) m.key.src = m_torus.shift(m.key.src, d, link->shift[d]);
    }
  link->sink->arrive(std::move(m), wake, dir);
}

}  // namespace podsim
