// Point-to-point Send and Recv ops: a Send injects its tensor toward the peer chip, the Recv with the same
// (source chip, tag) lands it.
#include "hw/chip/dma.h"
#include "hw/chip/sim_time.h"

namespace podsim {

void Dma::start_send(Running& r, const Op& op) {
  const TensorInfo& in = m_graph->tensor(op.inputs.front());
  Message m;
  m.src = m_chip;
  m.dst = op.attrs.peer;
  m.bytes = in.bytes();
  m.key = {kP2pInstance, m_chip, op.attrs.tag};
  m.created = now_seconds();
  m.op = r.op;
  m.flow = next_flow();
  if (m_ctx.numeric) m.payload = std::make_shared<std::vector<float>>(m_store.get(op.inputs.front()).data);
  m.op_here = r.op;
  m.task_here = -2;
  m_links.send(std::move(m), FlowId{r.op, 0}, 0, true);
}

void Dma::start_recv(Running& r, const Op& op) {
  r.p2p_key = {kP2pInstance, op.attrs.peer, op.attrs.tag};
  auto it = m_mailbox.find(r.p2p_key);
  if (it != m_mailbox.end() && !it->second.empty()) {
    Message m = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) m_mailbox.erase(it);
    land_p2p(r.op, std::move(m), true);
  }
}

void Dma::land_p2p(int32_t id, Message&& m, bool staged) {
  const Op& op = m_graph->op(m_prog->ops[id].members.front());
  if (m_ctx.numeric && m.payload) {
    Tensor t(m_graph->tensor(op.outputs.front()).shape);
    t.data = *m.payload;
    m_store.put(op.outputs.front(), std::move(t));
  }
  if (m_log.traced)
    m_log.messages.push_back({id, now_seconds(), now_seconds(), m.src, m.bytes, m.flow, false, "recv"});
  double done = m_hbm.access((staged ? 2.0 : 1.0) * m.bytes, 0, HbmClient::Dma, id, true);
  m_queue.schedule(at_seconds(done), [this, id] {
    auto it = m_running.find(id);
    if (it != m_running.end()) finish_op(it->second);
  });
}

}  // namespace podsim
