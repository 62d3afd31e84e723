// Point-to-point Send and Recv ops. A Send splits its tensor into chunks of at most hardware.ici.chunk and injects
// them toward the peer chip (each read from HBM just before it leaves); the Recv with the same (source chip, tag)
// lands each chunk in HBM as it arrives (one that came before the Recv started waits in a staging buffer). When the
// last chunk has landed the Recv completes and sends an acknowledgement back; the Send completes when the
// acknowledgement arrives, so a Send's time covers its data's arrival. The acknowledgement carries no data: it pays
// the hop latency of each hop and queues behind data on the links of the way back, but occupies no link time.
// Chips share no state: the only thing that crosses from receiver to sender is the acknowledgement message.
#include <algorithm>

#include "collectives/ring_steps.h"
#include "hw/chip/dma.h"
#include "hw/chip/sim_time.h"
#include "base/error.h"

namespace podsim {
namespace {

// Elements per chunk of a transfer of n `dtype` elements between two chips (hardware.dcn.chunk between slices;
// over the ICI at most hardware.ici.max_chunks of them, collectives/ring_steps.h).
int64_t chunk_elements(const PodContext& ctx, DType dtype, int64_t n, int64_t a, int64_t b) {
  const bool dcn = ctx.torus.slice_of(a) != ctx.torus.slice_of(b);
  const double chunk = dcn ? ctx.exp->hardware.dcn.chunk : ctx.exp->hardware.ici.chunk;
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(chunk) / dtype_bytes(dtype));
  return dcn ? per : ring::capped_chunk(n, per, ctx.exp->hardware.ici.max_chunks);
}

int64_t chunk_count(int64_t elements, int64_t per_chunk) {
  return std::max<int64_t>(1, (elements + per_chunk - 1) / per_chunk);
}

}  // namespace

int64_t Dma::peer_of(const Op& op) const { return m_ctx.p2p_peer(m_chip, op); }

void Dma::start_send(Running& r, const Op& op) {
  const TensorInfo& in = m_graph->tensor(op.inputs.front());
  r.p2p_peer = peer_of(op);
  r.p2p_key = {static_cast<uint64_t>(m_p2p_sends[{r.p2p_peer, op.attrs.tag}]++), m_chip, op.attrs.tag};
  const int64_t n = in.elements(), per = chunk_elements(m_ctx, in.dtype, n, m_chip, r.p2p_peer),
                eb = dtype_bytes(in.dtype);
  const std::vector<float>* data = m_ctx.numeric ? &m_store.get(op.inputs.front()).data : nullptr;
  for (int64_t k = 0, chunks = chunk_count(n, per); k < chunks; ++k) {
    const int64_t first = k * per, len = std::min(per, n - first);
    Message m;
    m.kind = MsgKind::PointToPoint;
    m.src = m_chip;
    m.dst = r.p2p_peer;
    m.bytes = static_cast<double>(len * eb);
    m.key = r.p2p_key;
    m.offset = first;
    m.created = now_seconds();
    m.op = r.op;
    m.flow = next_flow();
    if (data) m.payload = std::make_shared<std::vector<float>>(data->begin() + first, data->begin() + first + len);
    m_links.send(std::move(m), FlowId{r.op, 0}, 0, true);
  }
}

void Dma::on_ack(const Message& m) {
  for (auto& [id, r] : m_running) {
    if (r.kind == OpKind::Send && r.p2p_key == m.key && r.p2p_peer == m.src) {
      finish_op(r);
      return;
    }
  }
  throw Error(Err::Internal, "chip " + std::to_string(m_chip) + " got an acknowledgement from chip " +
                                 std::to_string(m.src) + " for no running send");
}

void Dma::start_recv(Running& r, const Op& op) {
  const TensorInfo& out = m_graph->tensor(op.outputs.front());
  r.p2p_peer = peer_of(op);
  r.p2p_key = {static_cast<uint64_t>(m_p2p_recvs[{r.p2p_peer, op.attrs.tag}]++), r.p2p_peer, op.attrs.tag};
  r.p2p_chunks_left = chunk_count(out.elements(), chunk_elements(m_ctx, out.dtype, out.elements(), m_chip, r.p2p_peer));
  if (m_ctx.numeric) r.buf[1].assign(static_cast<size_t>(out.elements()), 0.0f);
  auto it = m_p2p_mailbox.find(r.p2p_key);
  if (it == m_p2p_mailbox.end()) return;
  std::deque<Message> early = std::move(it->second);
  m_p2p_mailbox.erase(it);
  for (Message& m : early) land_p2p(r.op, std::move(m), true);
}

void Dma::land_p2p(int32_t id, Message&& m, bool staged) {
  if (m_log.keep_messages)
    m_log.messages.push_back({id, now_seconds(), now_seconds(), m.src, m.bytes, m.flow, false,
                              "recv from " + std::to_string(m.src)});
  // Written to HBM as it arrives; from the staging buffer, read and written once more.
  double done = m_hbm.access((staged ? 2.0 : 1.0) * m.bytes, 0, HbmClient::Dma, id, true);
  uint32_t slot = m_pool.put(std::move(m));
  m_queue.schedule(at_seconds(std::max(done, now_seconds())), [this, id, slot] {
    Message chunk = m_pool.take(slot);
    Running& r = m_running.at(id);
    const Op& op = m_graph->op(m_prog->ops[id].members.front());
    if (m_ctx.numeric && chunk.payload) {
      if (chunk.offset + static_cast<int64_t>(chunk.payload->size()) > static_cast<int64_t>(r.buf[1].size()))
        throw Error(Err::Internal, "'" + op.name + "' received more data than its output holds");
      std::copy(chunk.payload->begin(), chunk.payload->end(), r.buf[1].begin() + chunk.offset);
    }
    if (--r.p2p_chunks_left > 0) return;
    Message ack;
    ack.kind = MsgKind::Ack;
    ack.src = m_chip;
    ack.dst = r.p2p_peer;
    ack.key = r.p2p_key;
    ack.created = now_seconds();
    ack.op = id;
    m_links.send(std::move(ack), FlowId{id, 0}, 0, false);
    if (m_ctx.numeric) {
      Tensor t(m_graph->tensor(op.outputs.front()).shape);
      t.data = std::move(r.buf[1]);
      m_store.put(op.outputs.front(), std::move(t));
    }
    finish_op(r);
  });
}

}  // namespace podsim
