#include "hw/chip/host_link.h"

#include <algorithm>

#include "base/error.h"
#include "hw/chip/sim_time.h"

namespace podsim {

HostLink::HostLink(const HostLinkConfig& cfg, Hbm& hbm, ChipLog& log) : m_cfg(cfg), m_hbm(hbm), m_log(log) {}

void HostLink::transfer(Way way, double bytes, int32_t op, bool hbm, Done done) {
  if (!(m_cfg.bandwidth > 0) || !(m_cfg.chunk > 0))
    throw Error(Err::Internal, "a host transfer on a chip whose host link has no bandwidth or chunk size");
  const uint32_t id = m_transfers.add({std::max(0.0, bytes), 0, op, hbm, std::move(done)});
  Channel& ch = m_way[static_cast<int>(way)];
  ch.turn.push_back(id);
  if (!ch.busy) next(way);
}

void HostLink::next(Way way) {
  Channel& ch = m_way[static_cast<int>(way)];
  ch.busy = false;
  // The transfer whose chunk just left takes its next turn after the others', those that came meanwhile included.
  if (ch.current != kNone && m_transfers[ch.current].left > 0) ch.turn.push_back(ch.current);
  ch.current = kNone;
  if (ch.turn.empty()) return;
  const uint32_t id = ch.turn.front();
  ch.turn.pop_front();
  ch.current = id;
  Transfer& t = m_transfers[id];
  const double bytes = std::min(t.left, m_cfg.chunk);
  t.left -= bytes;
  ++t.chunks;
  const double start = now_seconds();
  double end = start + bytes / m_cfg.bandwidth;
  // To the host, the DMA streams the chunk out of HBM as it sends it: the channel is held until both are done.
  if (way == Way::ToHost && t.hbm) end = std::max(end, m_hbm.access(bytes, 0, HbmClient::Dma, t.op, false));
  const int w = static_cast<int>(way);
  m_log.host_bytes[w] += bytes;
  m_log.host_busy[w] += end - start;
  if (m_log.keep_compute && bytes > 0) m_log.log_host({start, end, t.op, static_cast<uint8_t>(w), bytes});
  ch.busy = true;
  m_queue.schedule(at_seconds(end), [this, way] { next(way); }, &ch);
  m_queue.schedule(at_seconds(end + m_cfg.latency), [this, way, id, bytes] { arrived(way, id, bytes); });
}

void HostLink::arrived(Way way, uint32_t id, double bytes) {
  Transfer& t = m_transfers[id];
  if (way == Way::FromHost && t.hbm && bytes > 0) {
    // Written to HBM on arrival: the chunk is in place when the write is done.
    const double written = m_hbm.access(bytes, 0, HbmClient::Dma, t.op, true);
    if (!reached(written)) {
      m_queue.schedule(at_seconds(written), [this, id] { landed(id); }, &m_transfers[id]);
      return;
    }
  }
  landed(id);
}

void HostLink::landed(uint32_t id) {
  Transfer& t = m_transfers[id];
  if (--t.chunks > 0 || t.left > 0) return;
  Done d = std::move(t.done);
  m_transfers.release(id);
  if (d) d();
}

}  // namespace podsim
