#include "hw/chip/dma.h"
#include "plan/shard_data.h"

#include <algorithm>
#include <set>

#include "hw/chip/sim_time.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {

CollectiveKind collective_of(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return CollectiveKind::AllReduce;
    case OpKind::ReduceScatter: return CollectiveKind::ReduceScatter;
    case OpKind::AllGather: return CollectiveKind::AllGather;
    case OpKind::AllToAll: return CollectiveKind::AllToAll;
    case OpKind::CollectivePermute: return CollectiveKind::CollectivePermute;
    case OpKind::Broadcast: return CollectiveKind::Broadcast;
    default: throw Error(Err::Internal, "op kind is not a collective");
  }
}

std::string comm_algorithm(const Op& op) {
  if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return "point_to_point";
  return op.attrs.algorithm.empty() ? default_algorithm(collective_of(op.kind)) : op.attrs.algorithm;
}

uint64_t collective_instance(const std::string& op_name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : op_name) h = (h ^ c) * 1099511628211ull;
  return h;
}

Dma::Dma(sc_core::sc_module_name name, int64_t chip, PodContext& ctx, const ModelGraph* graph,
         const ExecProgram* prog, Hbm& hbm, IciRouter& router, ChipLog& log, TensorStore& store, Done on_done,
         VectorJob vector_job)
    : sc_core::sc_module(name),
      m_chip(chip),
      m_ctx(ctx),
      m_pool(ctx.messages),
      m_graph(graph),
      m_prog(prog),
      m_hbm(hbm),
      m_router(router),
      m_log(log),
      m_store(store),
      m_on_done(std::move(on_done)),
      m_vector_job(std::move(vector_job)),
      m_links(chip, ctx, ctx.messages, hbm, router, log, m_queue,
              [this](int32_t op, int32_t task) { injected(op, task); }) {
}

void Dma::start(int32_t exec_op) {
  const ExecOp& e = m_prog->ops[exec_op];
  const Op& op = m_graph->op(e.members.front());
  Running& r = m_running[exec_op];
  r.op = exec_op;
  r.kind = op.kind;
  r.start = now_seconds();
  switch (op.kind) {
    case OpKind::Send: start_send(r, op); break;
    case OpKind::Recv: start_recv(r, op); break;
    case OpKind::Traffic: start_traffic(r, op); break;
    default: start_collective(r, op); break;
  }
}

uint64_t Dma::next_flow() {
  constexpr int kCountBits = 40;
  if (m_chip >= (int64_t{1} << (64 - kCountBits - 1)) || m_messages_sent + 1 >= (uint64_t{1} << kCountBits))
    throw Error(Err::Internal, "trace flow ids exhausted on chip " + std::to_string(m_chip));
  return (static_cast<uint64_t>(m_chip) << kCountBits) | ++m_messages_sent;
}

void Dma::injected(int32_t op, int32_t task) {
  if (task == -2) {
    auto it = m_running.find(op);
    if (it != m_running.end()) finish_op(it->second);
  } else {
    finish_task(op, task);
  }
}

// ---- arrivals ---------------------------------------------------------------------------------------------------

void Dma::deliver(Message&& m) {
  double now = now_seconds();
  switch (m.kind) {
    case MsgKind::Traffic:
      ++m_log.traffic_messages;
      m_log.traffic_bytes += m.bytes;
      if (now <= m_ctx.traffic_window) m_log.traffic_bytes_in_window += m.bytes;
      m_log.traffic_latency_sum += now - m.created;
      m_log.traffic_latency_max = std::max(m_log.traffic_latency_max, now - m.created);
      m_log.last_delivery = std::max(m_log.last_delivery, now);
      return;
    case MsgKind::Ack: on_ack(m); return;
    case MsgKind::PointToPoint:
      for (auto& [id, r] : m_running) {
        if (r.kind == OpKind::Recv && r.p2p_key == m.key) {
          land_p2p(r.op, std::move(m), false);
          return;
        }
      }
      stage(std::move(m));
      return;
    case MsgKind::Collective: on_message(std::move(m)); return;
  }
}

void Dma::on_message(Message&& m) {
  auto found = std::find_if(m_instance_op.begin(), m_instance_op.end(),
                            [&](const auto& e) { return e.first == m.key.instance; });
  if (found != m_instance_op.end()) {
    Running& r = *found->second;
    const int64_t peer0 = r.sender_peer0.get(m.key.src, [&] {
      return r.shared->peer0(r.group.rank_of(m.key.src, m_ctx.torus), r.group.rank);
    });
    const int32_t task = r.shared->recv_task0(peer0, m.key.tag);
    if (task >= 0 && r.state[task] == kAwaiting) {
      r.state[task] = kPending;
      --r.awaiting;
      complete_recv(r, task, std::move(m), false);
      return;
    }
  }
  stage(std::move(m));
}

void Dma::stage(Message&& m) {
  m_hbm.access(m.bytes, 0, HbmClient::Dma, -1, true);  // written to a staging buffer as it arrives
  auto& box = m.kind == MsgKind::PointToPoint ? m_p2p_mailbox : m_mailbox;
  box[m.key].push_back(std::move(m));
}

// ---- completion -------------------------------------------------------------------------------------------------

void Dma::finish_op(Running& r) {
  int32_t op = r.op;
  double start = r.start;
  if (m_ctx.numeric && r.kind != OpKind::Send && r.kind != OpKind::Recv && r.kind != OpKind::Traffic) {
    const Op& gop = m_graph->op(m_prog->ops[op].members.front());
    if (r.combined) {
      // A combined collective (partition/combine.h): each output from its blocks and pieces of the buffer.
      const bool scattered = r.kind == OpKind::ReduceScatter;
      const int64_t want = scattered ? r.combined->block_elements() : r.combined->total();
      if (!scattered && static_cast<int64_t>(r.buf[1].size()) > want)
        r.buf[1].resize(static_cast<size_t>(want));  // drop the padding to equal blocks
      if (static_cast<int64_t>(r.buf[1].size()) != want)
        throw Error(Err::Internal, "combined collective '" + gop.name + "' produced " +
                                       std::to_string(r.buf[1].size()) + " elements for a buffer of " +
                                       std::to_string(want));
      std::vector<std::vector<float>> parts = unpack_combined(*r.combined, r.buf[1], scattered);
      for (size_t k = 0; k < parts.size(); ++k) {
        Tensor t(m_graph->tensor(gop.outputs[k]).shape);
        if (static_cast<int64_t>(parts[k].size()) != t.elements())
          throw Error(Err::Internal, "combined collective '" + gop.name + "' produced " +
                                         std::to_string(parts[k].size()) + " elements for an output of " +
                                         std::to_string(t.elements()));
        t.data = std::move(parts[k]);
        m_store.put(gop.outputs[k], std::move(t));
      }
    } else {
      TensorId out = gop.outputs.front();
      Tensor t(m_graph->tensor(out).shape);
      if (r.kind == OpKind::AllReduce && static_cast<int64_t>(r.buf[1].size()) > t.elements())
        r.buf[1].resize(static_cast<size_t>(t.elements()));  // drop the padding
      if (static_cast<int64_t>(r.buf[1].size()) != t.elements())
        throw Error(Err::Internal, "collective '" + gop.name + "' produced " + std::to_string(r.buf[1].size()) +
                                       " elements for an output of " + std::to_string(t.elements()));
      t = unpack_collective(gop, std::move(r.buf[1]), t.shape, r.req.group.size());
      m_store.put(out, std::move(t));
    }
  }
  if (r.instance)
    m_instance_op.erase(std::remove_if(m_instance_op.begin(), m_instance_op.end(),
                                       [&](const auto& e) { return e.first == r.instance; }),
                        m_instance_op.end());
  m_running.erase(op);
  m_on_done(op, start, now_seconds());
}

std::vector<std::string> Dma::waiting() const {
  std::vector<std::string> out;
  for (const auto& [id, r] : m_running) {
    const Op& op = m_graph->op(m_prog->ops[id].members.front());
    std::string s = "'" + op.name + "' (" + op_kind_name(op.kind) + ")";
    if (r.kind == OpKind::Recv) {
      s += " waits for a message from chip " + std::to_string(r.p2p_peer) + " with tag " +
           std::to_string(r.p2p_key.tag);
    } else if (r.kind == OpKind::Send) {
      s += " waits for chip " + std::to_string(r.p2p_peer) + " to receive its data (tag " +
           std::to_string(r.p2p_key.tag) + ")";
    } else if (r.awaiting > 0) {
      std::set<int64_t> chips;
      for (size_t i = 0; i < r.task_count; ++i)
        if (r.state[i] == kAwaiting) chips.insert(r.group.chip_of(r.shared->peer(r.tasks[i], r.group.rank), m_ctx.torus));
      std::vector<std::string> peers;
      for (int64_t c : chips) peers.push_back("chip " + std::to_string(c));
      s += strprintf(" has %zu of %zu transfers done and waits for data from ", r.finished, r.task_count) +
           join(peers, ", ");
    } else {
      s += strprintf(" has %zu of %zu transfers done", r.finished, r.task_count);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace podsim
