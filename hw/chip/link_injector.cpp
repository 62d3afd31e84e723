#include "hw/chip/link_injector.h"

#include <algorithm>
#include <string>

#include "hw/chip/link_turns.h"
#include "hw/chip/sim_time.h"
#include "hw/dcn/dcn.h"
#include "base/error.h"

namespace podsim {

LinkInjector::LinkInjector(int64_t chip, const PodContext& ctx, MessagePool& pool, Hbm& hbm, IciRouter& router,
                           ChipLog& log, ActionQueue& queue, Injected on_injected)
    : m_chip(chip),
      m_ctx(ctx),
      m_pool(pool),
      m_hbm(hbm),
      m_router(router),
      m_log(log),
      m_queue(queue),
      m_on_injected(std::move(on_injected)),
      m_out(static_cast<size_t>(ctx.torus.directions())) {}

void LinkInjector::send(Message&& m, FlowId flow, int32_t priority, bool read_hbm) {
  if (m_dcn && m_ctx.torus.slice_of(m.dst) != m_ctx.torus.slice_of(m_chip)) {
    m_dcn->send(std::move(m), read_hbm, m_on_injected);
    return;
  }
  const int dir = m_router.direction(m);  // dimension order, or a detour around a down link
  const uint32_t w = m_waiting.add({m_pool.put(std::move(m)), read_hbm, kNone});
  Direction& d = m_out[dir];
  Flow key;
  key.priority = priority;
  key.id = flow;
  auto it = std::lower_bound(d.flows.begin(), d.flows.end(), key);
  if (it == d.flows.end() || key < *it) {
    key.first = key.last = w;
    d.flows.insert(it, key);
  } else {
    m_waiting[it->last].next = w;
    it->last = w;
  }
  if (!d.armed) pump(dir);
}

void LinkInjector::pump(int dir) {
  Direction& d = m_out[dir];
  d.armed = false;
  const IciLink* link = m_router.link(dir);
  if (!link) throw Error(Err::Internal, "no ICI link in direction " + Torus::direction_name(dir));
  while (!d.flows.empty()) {
    // Launching a message may send more through this injector (a finished task's successors): nothing here is
    // held across launch().
    const double now = now_seconds();
    const double chunk = m_ctx.exp->hardware.ici.chunk;
    // Launch when the link will be free within one chunk's time (a fixed horizon, so one wake-up per message).
    const double horizon = chunk / link->bandwidth;
    const double busy_until = std::max(link->free, d.committed);
    if (busy_until > now + horizon + kTimeEpsilon) {
      d.armed = true;
      m_queue.schedule(at_seconds(busy_until - horizon), [this, dir] { pump(dir); }, &d);
      return;
    }
    // The flows of the best priority take turns from the first at or after `next`, a chunk's worth per turn
    // (hw/chip/link_turns.h): a message of at most one chunk goes on its flow's turn.
    Flow key;
    key.priority = d.flows.front().priority;
    key.id = d.next;
    auto it = std::lower_bound(d.flows.begin(), d.flows.end(), key);
    if (it == d.flows.end() || it->priority != key.priority) it = d.flows.begin();
    const auto best_end = std::partition_point(d.flows.begin(), d.flows.end(),
                                               [&key](const Flow& f) { return f.priority == key.priority; });
    it = fair_turn(d.flows.begin(), best_end, it, chunk,
                   [this](const Flow& f) { return m_pool.at(m_waiting[f.first].slot).bytes; });
    const Waiting o = m_waiting[it->first];
    const Message& front = m_pool.at(o.slot);
    const double ser = front.bytes / link->bandwidth;
    m_waiting.release(it->first);
    it->first = o.next;
    d.next = FlowId{it->id.op, it->id.flow + 1};
    if (it->first == kNone) d.flows.erase(it);
    const Message& m = front;
    double ready = o.read_hbm ? m_hbm.access(m.bytes, 0, HbmClient::Dma, m.op, false) : now;
    d.committed = std::max(busy_until, ready) + ser;
    if (m_log.keep_messages)  // the send as the trace shows it: from launch to injection
      m_log.messages.push_back({m.op, now, ready, m.dst, m.bytes, m.flow, true,
                                (m.kind == MsgKind::Ack ? "acknowledge to " : "send to ") + std::to_string(m.dst)});
    uint32_t slot = o.slot;
    if (reached(ready)) {
      launch(slot);
      // The launch finished a task whose successor sent through this direction: that send's pump() has run the
      // loop at this same instant and armed the next wake. Going on would arm a second one, and every later wake
      // would re-arm both, so wakes per message grew with each such send (three per message in a 70B step).
      if (d.armed) return;
    } else {
      m_queue.schedule(at_seconds(ready), [this, slot] { launch(slot); }, &m_pool.at(slot));
    }
  }
}

void LinkInjector::launch(uint32_t slot) {
  Message m = m_pool.take(slot);
  int32_t op = m.op_here, task = m.task_here;
  m.op_here = m.task_here = -1;
  m_router.inject(std::move(m));
  if (op >= 0) m_on_injected(op, task);
}

}  // namespace podsim
