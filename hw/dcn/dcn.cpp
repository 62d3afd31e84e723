#include "hw/dcn/dcn.h"

#include <algorithm>

#include "base/error.h"
#include "hw/chip/sim_time.h"

namespace podsim {

// ---- a chip's port ---------------------------------------------------------------------------------------------

DcnPort::DcnPort(int64_t chip, DcnNetwork& net, HostLink& host_link, ChipLog& log, Deliver deliver)
    : m_chip(chip), m_net(net), m_host_link(host_link), m_log(log), m_deliver(std::move(deliver)) {}

void DcnPort::send(Message&& m, bool read_hbm, const Injected& injected) {
  const int32_t op = m.op_here, task = m.task_here;
  m.op_here = m.task_here = -1;
  const double bytes = m.bytes, start = now_seconds();
  m_log.dcn_bytes_out += bytes;
  MessagePool& pool = m_net.pool();
  const uint32_t slot = pool.put(std::move(m));
  m_host_link.transfer(HostLink::Way::ToHost, bytes, pool.at(slot).op, read_hbm,
                       [this, slot, op, task, start, &injected] {
                         MessagePool& p = m_net.pool();
                         Message msg = p.take(slot);
                         if (m_log.traced)
                           m_log.dcn.push_back({start, now_seconds(), msg.op, 0, msg.bytes});
                         if (m_log.keep_messages)
                           m_log.messages.push_back({msg.op, start, now_seconds(), msg.dst, msg.bytes, msg.flow, true,
                                                     "DCN send to " + std::to_string(msg.dst)});
                         m_net.from_host(m_chip, std::move(msg));
                         if (op >= 0) injected(op, task);
                       });
}

void DcnPort::receive(Message&& m) {
  const double bytes = m.bytes, start = now_seconds();
  m_log.dcn_bytes_in += bytes;
  MessagePool& pool = m_net.pool();
  const uint32_t slot = pool.put(std::move(m));
  m_host_link.transfer(HostLink::Way::FromHost, bytes, -1, false, [this, slot, start] {
    Message msg = m_net.pool().take(slot);
    if (m_log.traced) m_log.dcn.push_back({start, now_seconds(), -1, 1, msg.bytes});
    m_deliver(std::move(msg));
  });
}

// ---- the network -----------------------------------------------------------------------------------------------

namespace {
constexpr uint64_t kDcnKey = uint64_t{1} << 63;  // after every ICI arrival of the same instant
}

DcnNetwork::DcnNetwork(PodContext& ctx, std::function<int64_t(int64_t)> representative)
    : m_ctx(ctx),
      m_torus(ctx.torus),
      m_hosts(ctx.torus, ctx.exp->hardware.host.block),
      m_cfg(ctx.exp->hardware.dcn),
      m_rep(std::move(representative)),
      m_ports(static_cast<size_t>(ctx.torus.chips()), nullptr),
      m_out(static_cast<size_t>(m_hosts.hosts())),
      m_in(static_cast<size_t>(m_hosts.hosts())),
      m_stats(static_cast<size_t>(m_hosts.hosts())) {
  if (!(m_cfg.bandwidth > 0)) throw Error(Err::Internal, "a data-center network without a bandwidth");
  if (m_cfg.oversubscription > 1) {
    m_slice_bw = m_cfg.bandwidth * static_cast<double>(m_hosts.hosts_per_slice()) / m_cfg.oversubscription;
    m_slice_out.resize(static_cast<size_t>(m_torus.slices()));
    m_slice_in.resize(static_cast<size_t>(m_torus.slices()));
  }
}

uint64_t DcnNetwork::key(int64_t at, int64_t from) const {
  // The position of `from` relative to `at`, coordinate by coordinate round each ring: the same for every
  // translation of the pair.
  int64_t rel = 0, scale = 1, a = at, f = from;
  for (int d = 0; d < m_torus.ndims(); ++d) {
    const int64_t n = m_torus.dims()[d];
    rel += ((f % n - a % n) % n + n) % n * scale;
    scale *= n;
    a /= n;
    f /= n;
  }
  return kDcnKey | (static_cast<uint64_t>(at) << 24) | static_cast<uint64_t>(rel);
}

void DcnNetwork::arrive(double at, uint32_t slot, int64_t at_chip, void (DcnNetwork::*stage)(uint32_t)) {
  const Message& m = m_ctx.messages.at(slot);
  m_queue.schedule_arrival(at_seconds(at), key(at_chip, m.src), [this, slot, stage] { (this->*stage)(slot); }, &m);
}

void DcnNetwork::enter_box(Message& m) const {
  const int64_t rep = m_rep(m.dst);
  if (rep == m.dst) return;
  const std::vector<int64_t> a = m_torus.coords(rep), b = m_torus.coords(m.dst);
  for (int d = 0; d < m_torus.ndims(); ++d) {
    const int64_t delta = a[d] - b[d];
    if (delta == 0) continue;
    m.src = m_torus.shift(m.src, d, delta);
    m.dst = m_torus.shift(m.dst, d, delta);
    if (m.kind != MsgKind::Traffic) m.key.src = m_torus.shift(m.key.src, d, delta);
  }
}

double DcnNetwork::pass(Stage& s, uint32_t slot, double bw, double* busy) {
  Message& m = m_ctx.messages.at(slot);
  const double start = std::max(now_seconds(), s.free);
  const double end = std::max(start + m.bytes / bw, m.tail);
  s.free = end;
  if (busy) *busy += end - start;
  m.tail = end;
  return start;
}

void DcnNetwork::from_host(int64_t from, Message&& m) {
  m.tail = now_seconds();  // the whole message is in host memory
  const uint32_t slot = m_ctx.messages.put(std::move(m));
  arrive(now_seconds(), slot, from, &DcnNetwork::egress);
}

void DcnNetwork::egress(uint32_t slot) {
  Message& m = m_ctx.messages.at(slot);
  const int64_t host = m_hosts.host_of(m.src);
  HostStats& st = m_stats[static_cast<size_t>(host)];
  st.bytes_out += m.bytes;
  const double head = pass(m_out[static_cast<size_t>(host)], slot, m_cfg.bandwidth, &st.busy_out);
  if (m_cfg.oversubscription > 1) {
    arrive(head, slot, m.src, &DcnNetwork::slice_out);
    return;
  }
  enter_box(m);
  m.tail += m_cfg.latency;
  arrive(head + m_cfg.latency, slot, m.dst, &DcnNetwork::ingress);
}

void DcnNetwork::slice_out(uint32_t slot) {
  Message& m = m_ctx.messages.at(slot);
  const double head = pass(m_slice_out[static_cast<size_t>(m_torus.slice_of(m.src))], slot, m_slice_bw, nullptr);
  enter_box(m);
  m.tail += m_cfg.latency;
  arrive(head + m_cfg.latency, slot, m.dst, &DcnNetwork::slice_in);
}

void DcnNetwork::slice_in(uint32_t slot) {
  Message& m = m_ctx.messages.at(slot);
  const double head = pass(m_slice_in[static_cast<size_t>(m_torus.slice_of(m.dst))], slot, m_slice_bw, nullptr);
  arrive(head, slot, m.dst, &DcnNetwork::ingress);
}

void DcnNetwork::ingress(uint32_t slot) {
  Message& m = m_ctx.messages.at(slot);
  const int64_t host = m_hosts.host_of(m.dst);
  HostStats& st = m_stats[static_cast<size_t>(host)];
  st.bytes_in += m.bytes;
  pass(m_in[static_cast<size_t>(host)], slot, m_cfg.bandwidth, &st.busy_in);
  // Into host memory whole, then on to the chip.
  m_queue.schedule(at_seconds(m.tail), [this, slot] {
    Message msg = m_ctx.messages.take(slot);
    DcnPort* port = m_ports[static_cast<size_t>(msg.dst)];
    if (!port) throw Error(Err::Internal, "a DCN message for chip " + std::to_string(msg.dst) + ", which is not simulated");
    port->receive(std::move(msg));
  }, &m);
}

}  // namespace podsim
