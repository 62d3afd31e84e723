#include "hw/chip/dma.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "hw/chip/sim_time.h"
#include "plan/shard_data.h"
#include "sim/common/error.h"
#include "sim/common/text.h"

namespace podsim {
namespace {

constexpr uint64_t kP2pInstance = 0x7032702070327032ull;
constexpr uint64_t kTrafficInstance = 0x7472616666696321ull;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Visits the (offset, length) blocks of a region.
template <class F>
void for_blocks(const Region& r, F f) {
  r.for_blocks(f);
}

}  // namespace

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

uint64_t collective_instance(const std::string& op_name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : op_name) h = (h ^ c) * 1099511628211ull;
  return h;
}

Dma::Dma(sc_core::sc_module_name name, int64_t chip, PodContext& ctx, const ModelGraph* graph,
         const ExecProgram* prog, Hbm& hbm, IciRouter& router, ChipLog& log, TensorStore& store, Done on_done)
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
      m_on_done(std::move(on_done)) {
  SC_METHOD(wake);
  sensitive << m_queue.event();
  dont_initialize();
  m_out.resize(static_cast<size_t>(ctx.torus.directions()));
}

void Dma::send(Message&& m, uint64_t flow, int32_t priority, bool read_hbm) {
  int dir = m_ctx.torus.next_hop(m_chip, m.dst);
  if (dir < 0) throw Error(Err::Internal, "a chip sends a message to itself");
  m_out[dir].flows[{priority, flow}].push_back({m_pool.put(std::move(m)), read_hbm});
  if (!m_out[dir].armed) pump(dir);
}

void Dma::pump(int dir) {
  Direction& d = m_out[dir];
  d.armed = false;
  const IciLink* link = m_router.link(dir);
  if (!link) throw Error(Err::Internal, "no ICI link in direction " + Torus::direction_name(dir));
  while (!d.flows.empty()) {
    const int32_t best = d.flows.begin()->first.first;
    auto it = d.flows.lower_bound({best, d.next});
    if (it == d.flows.end() || it->first.first != best) it = d.flows.begin();
    const double now = now_seconds();
    const Message& front = m_pool.at(it->second.front().slot);
    const double ser = front.bytes / link->bandwidth;
    // Launch when the link will be free within one chunk's time (a fixed horizon, so one wake-up per message).
    const double horizon = m_ctx.exp->hardware.ici.chunk / link->bandwidth;
    const double busy_until = std::max(link->free, d.committed);
    if (busy_until > now + horizon + kTimeEpsilon) {
      d.armed = true;
      m_queue.schedule(at_seconds(busy_until - horizon), [this, dir] { pump(dir); });
      return;
    }
    Outgoing o = it->second.front();
    it->second.pop_front();
    d.next = it->first.second + 1;
    if (it->second.empty()) d.flows.erase(it);
    const Message& m = m_pool.at(o.slot);
    double ready = o.read_hbm ? m_hbm.access(m.bytes, 0, HbmClient::Dma, m.op, false) : now;
    d.committed = std::max(busy_until, ready) + ser;
    if (m_log.traced)  // the send as the trace shows it: from launch to injection
      m_log.messages.push_back({m.op, now, ready, m.dst, m.bytes, m.flow, true, "send to " + std::to_string(m.dst)});
    uint32_t slot = o.slot;
    if (reached(ready)) launch(slot);
    else m_queue.schedule(at_seconds(ready), [this, slot] { launch(slot); });
  }
}

void Dma::launch(uint32_t slot) {
  Message m = m_pool.take(slot);
  int32_t op = m.op_here, task = m.task_here;
  m.op_here = m.task_here = -1;
  m_router.inject(std::move(m));
  if (op < 0) return;
  if (task == -2) {
    auto it = m_running.find(op);
    if (it != m_running.end()) finish_op(it->second);
  } else {
    finish_task(op, task);
  }
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

// ---- collectives -----------------------------------------------------------------------------------------------

void Dma::start_collective(Running& r, const Op& op) {
  const TensorInfo& in = m_graph->tensor(op.inputs.front());
  r.instance = collective_instance(op.name);
  r.group = m_ctx.group(m_chip, op.attrs.axes);
  r.req.kind = collective_of(op.kind);
  r.req.group = r.group.shape;
  r.req.elements = in.elements();
  r.req.elem_bytes = dtype_bytes(in.dtype);
  r.req.chunk_elements = std::max<int64_t>(1, static_cast<int64_t>(m_ctx.exp->hardware.ici.chunk) / r.req.elem_bytes);
  r.req.shift = op.attrs.shift;
  r.req.root = op.attrs.root;
  // An all-reduce of a count the group does not divide runs on the count padded with zeros (its blocks are
  // equal), and the padding is dropped at the end.
  const int64_t group = r.req.group.size();
  if (r.req.kind == CollectiveKind::AllReduce && group > 1 && r.req.elements % group != 0)
    r.req.elements = (r.req.elements + group - 1) / group * group;
  std::string algo_name = op.attrs.algorithm.empty() ? default_algorithm(r.req.kind) : op.attrs.algorithm;
  std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make(algo_name);
  if (!algo) throw Error(Err::Internal, "collective algorithm '" + algo_name + "' is not registered");
  r.sched = algo->schedule(r.req, r.group.rank);
  const size_t n = r.sched.tasks.size();
  r.deps_left.resize(n);
  r.done.assign(n, 0);
  // Dependents in compressed rows.
  std::vector<int32_t> count(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = r.sched.tasks[i];
    r.deps_left[i] = t.dep_count;
    for (int32_t d = 0; d < t.dep_count; ++d) ++count[r.sched.deps[t.dep_begin + d] + 1];
  }
  for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  r.dep_ptr = count;
  r.dep_list.assign(count[n], 0);
  std::vector<int32_t> fill(count.begin(), count.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = r.sched.tasks[i];
    for (int32_t d = 0; d < t.dep_count; ++d) r.dep_list[fill[r.sched.deps[t.dep_begin + d]]++] = static_cast<int32_t>(i);
  }
  if (m_ctx.numeric) {
    const Tensor& data = m_store.get(op.inputs.front());
    r.buf[0] = pack_collective(op, data, r.req.group.size());  // a dimension's parts outermost (plan/shard_data.h)
    r.buf[0].resize(static_cast<size_t>(r.req.elements), 0.0f);
    int64_t out = r.sched.output_elements;
    r.buf[1] = out == r.req.elements ? r.buf[0] : std::vector<float>(static_cast<size_t>(out), 0.0f);
    r.buf[2].assign(static_cast<size_t>(r.sched.scratch_elements), 0.0f);
  }
  m_instance_op[r.instance] = r.op;
  if (n == 0) {
    finish_op(r);
    return;
  }
  for (size_t i = 0; i < n; ++i)
    if (r.deps_left[i] == 0) ready(r, static_cast<int32_t>(i));
}

void Dma::ready(Running& r, int32_t i) {
  const Task& t = r.sched.tasks[i];
  const double eb = elem_bytes(r);
  const int32_t op = r.op;
  switch (t.type) {
    case Task::Type::Send: {
      double bytes = static_cast<double>(t.src.elements()) * eb;
      Message m;
      m.src = m_chip;
      m.dst = r.group.chip_of(t.peer, m_ctx.torus);
      m.bytes = bytes;
      m.key = {r.instance, r.group.rank, t.tag};
      m.created = now_seconds();
      m.op = op;
      m.flow = mix(mix(r.instance, static_cast<uint64_t>(m_chip)), static_cast<uint64_t>(t.tag)) | 1;
      if (m_ctx.numeric) {
        auto payload = std::make_shared<std::vector<float>>();
        payload->reserve(static_cast<size_t>(t.src.elements()));
        const std::vector<float>& src = r.buf[static_cast<int>(t.src_buf)];
        for_blocks(t.src, [&](int64_t off, int64_t len) {
          payload->insert(payload->end(), src.begin() + off, src.begin() + off + len);
        });
        m.payload = std::move(payload);
      }
      m.op_here = op;
      m.task_here = i;
      send(std::move(m), mix(r.instance, static_cast<uint64_t>(t.flow)), t.priority, !t.on_chip);
      break;
    }
    case Task::Type::Recv: {
      MsgKey key{r.instance, t.peer, t.tag};
      auto it = m_mailbox.find(key);
      if (it != m_mailbox.end() && !it->second.empty()) {
        Message m = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) m_mailbox.erase(it);
        complete_recv(r, i, std::move(m), true);
      } else {
        r.waiting_recv[key] = i;
      }
      break;
    }
    case Task::Type::Copy: {
      double bytes = static_cast<double>(t.src.elements()) * eb;
      double done = m_hbm.access(2 * bytes, 0, HbmClient::Dma, op, true);
      m_queue.schedule(at_seconds(done), [this, op, i] {
        Running& rr = m_running.at(op);
        const Task& tt = rr.sched.tasks[i];
        if (m_ctx.numeric) {
          std::vector<float> tmp;
          const std::vector<float>& src = rr.buf[static_cast<int>(tt.src_buf)];
          for_blocks(tt.src, [&](int64_t off, int64_t len) { tmp.insert(tmp.end(), src.begin() + off, src.begin() + off + len); });
          std::vector<float>& dst = rr.buf[static_cast<int>(tt.dst_buf)];
          size_t k = 0;
          for_blocks(tt.dst, [&](int64_t off, int64_t len) {
            for (int64_t j = 0; j < len; ++j, ++k) {
              if (tt.combine == Task::Combine::Add) dst[off + j] += tmp[k];
              else dst[off + j] = tmp[k];
            }
          });
        }
        finish_task(op, i);
      });
      break;
    }
  }
}

void Dma::complete_recv(Running& r, int32_t i, Message&& m, bool staged) {
  const Task& t = r.sched.tasks[i];
  if (m_log.traced)
    m_log.messages.push_back({r.op, now_seconds(), now_seconds(), m.src, m.bytes, m.flow, false,
                              "recv from " + std::to_string(m.src) + " tag " + std::to_string(t.tag)});
  // HBM traffic of landing the data: in place on arrival a write (or, reducing, a read of the local data and a
  // write of the sum) unless the result stays on chip; from the staging buffer one more read.
  double factor = (t.combine == Task::Combine::Add ? 1.0 : 0.0) + (t.on_chip ? 0.0 : 1.0) + (staged ? 1.0 : 0.0);
  double done = factor > 0 ? m_hbm.access(factor * m.bytes, 0, HbmClient::Dma, r.op, true) : now_seconds();
  m.op_here = r.op;
  m.task_here = i;
  uint32_t slot = m_pool.put(std::move(m));
  // Finish at the earliest in the next delta, never from inside another task's completion.
  m_queue.schedule(at_seconds(std::max(done, now_seconds())), [this, slot] { land(slot); });
}

void Dma::land(uint32_t slot) {
  Message m = m_pool.take(slot);
  const int32_t op = m.op_here, i = m.task_here;
  auto it = m_running.find(op);
  if (it == m_running.end()) return;
  Running& r = it->second;
  const Task& t = r.sched.tasks[i];
  if (m_ctx.numeric && m.payload) {
    std::vector<float>& dst = r.buf[static_cast<int>(t.dst_buf)];
    const std::vector<float>& data = *m.payload;
    size_t k = 0;
    for_blocks(t.dst, [&](int64_t off, int64_t len) {
      for (int64_t j = 0; j < len; ++j, ++k) {
        if (t.combine == Task::Combine::Add) dst[off + j] += data[k];
        else dst[off + j] = data[k];
      }
    });
  }
  finish_task(op, i);
}

void Dma::finish_task(int32_t op, int32_t i) {
  auto it = m_running.find(op);
  if (it == m_running.end()) return;
  Running& r = it->second;
  if (r.done[i]) throw Error(Err::Internal, "collective task finished twice");
  r.done[i] = 1;
  ++r.finished;
  for (int32_t k = r.dep_ptr[i]; k < r.dep_ptr[i + 1]; ++k) {
    int32_t j = r.dep_list[k];
    if (--r.deps_left[j] == 0) ready(r, j);
  }
  if (r.finished == r.sched.tasks.size() && m_running.count(op)) finish_op(r);
}

// ---- point to point ----------------------------------------------------------------------------------------

void Dma::start_send(Running& r, const Op& op) {
  const TensorInfo& in = m_graph->tensor(op.inputs.front());
  Message m;
  m.src = m_chip;
  m.dst = op.attrs.peer;
  m.bytes = in.bytes();
  m.key = {kP2pInstance, m_chip, op.attrs.tag};
  m.created = now_seconds();
  m.op = r.op;
  m.flow = mix(mix(kP2pInstance, static_cast<uint64_t>(m_chip)), static_cast<uint64_t>(op.attrs.tag)) | 1;
  if (m_ctx.numeric) m.payload = std::make_shared<std::vector<float>>(m_store.get(op.inputs.front()).data);
  m.op_here = r.op;
  m.task_here = -2;
  send(std::move(m), kP2pInstance ^ static_cast<uint64_t>(r.op), 0, true);
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
  (void)op;
}

// ---- synthetic traffic -------------------------------------------------------------------------------------------

void Dma::start_traffic(Running& r, const Op& op) {
  r.rng.seed(m_ctx.exp->run.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(m_chip) + 1);
  r.traffic_end = now_seconds() + op.attrs.duration;
  traffic_tick(r.op);
}

void Dma::traffic_tick(int32_t id) {
  Running& r = m_running.at(id);
  const Op& op = m_graph->op(m_prog->ops[id].members.front());
  const OpAttrs& a = op.attrs;
  const Torus& torus = m_ctx.torus;
  auto unit = [&r] { return static_cast<double>(r.rng() >> 11) * (1.0 / 9007199254740992.0); };
  double now = now_seconds();
  if (now >= r.traffic_end) {
    finish_op(r);
    return;
  }
  // Destination by pattern.
  int64_t dst = -1;
  if (a.pattern == "uniform") {
    if (torus.chips() > 1) {
      dst = static_cast<int64_t>(unit() * static_cast<double>(torus.chips() - 1));
      if (dst >= m_chip) ++dst;
    }
  } else if (a.pattern == "transpose") {
    std::vector<int64_t> c = torus.coords(m_chip);
    std::swap(c[0], c[1]);
    dst = torus.chip(c);
    if (dst == m_chip) dst = -1;  // chips on the diagonal send nothing
  } else {  // neighbor
    std::vector<int64_t> options;
    for (int d = 0; d < torus.directions(); ++d)
      if (torus.neighbor(m_chip, d) >= 0) options.push_back(torus.neighbor(m_chip, d));
    if (!options.empty()) dst = options[static_cast<size_t>(unit() * static_cast<double>(options.size()))];
  }
  if (dst >= 0) {
    Message m;
    m.src = m_chip;
    m.dst = dst;
    m.bytes = a.message_bytes;
    m.key = {kTrafficInstance, m_chip, 0};
    m.created = now;
    m.op = id;
    send(std::move(m), kTrafficInstance, 0, false);
  }
  double rate = a.rate * m_ctx.exp->hardware.ici.link_bandwidth / a.message_bytes;  // packets per second
  double gap = -std::log(1.0 - unit()) / rate;
  m_queue.schedule(at_seconds(now + gap), [this, id] { traffic_tick(id); });
}

// ---- arrivals ---------------------------------------------------------------------------------------------------

void Dma::deliver(Message&& m) {
  double now = now_seconds();
  if (m.key.instance == kTrafficInstance) {
    ++m_log.traffic_messages;
    m_log.traffic_bytes += m.bytes;
    if (now <= m_ctx.traffic_window) m_log.traffic_bytes_in_window += m.bytes;
    double lat = now - m.created;
    m_log.traffic_latency_sum += lat;
    m_log.traffic_latency_max = std::max(m_log.traffic_latency_max, lat);
    m_log.last_delivery = std::max(m_log.last_delivery, now);
    return;
  }
  on_message(std::move(m));
}

void Dma::on_message(Message&& m) {
  if (m.key.instance == kP2pInstance) {
    for (auto& [id, r] : m_running) {
      if (r.kind == OpKind::Recv && r.p2p_key == m.key) {
        land_p2p(r.op, std::move(m), false);
        return;
      }
    }
    stage(std::move(m));
    return;
  }
  auto op_it = m_instance_op.find(m.key.instance);
  if (op_it != m_instance_op.end()) {
    Running& r = m_running.at(op_it->second);
    auto w = r.waiting_recv.find(m.key);
    if (w != r.waiting_recv.end()) {
      int32_t task = w->second;
      r.waiting_recv.erase(w);
      complete_recv(r, task, std::move(m), false);
      return;
    }
  }
  stage(std::move(m));
}

void Dma::stage(Message&& m) {
  m_hbm.access(m.bytes, 0, HbmClient::Dma, -1, true);  // written to a staging buffer as it arrives
  m_mailbox[m.key].push_back(std::move(m));
}

void Dma::land_p2p(int32_t id, Message&& m, bool staged) {
  Running& r = m_running.at(id);
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
  (void)r;
}

void Dma::finish_op(Running& r) {
  int32_t op = r.op;
  double start = r.start;
  if (m_ctx.numeric && r.kind != OpKind::Send && r.kind != OpKind::Recv && r.kind != OpKind::Traffic) {
    const Op& gop = m_graph->op(m_prog->ops[op].members.front());
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
  if (r.instance) m_instance_op.erase(r.instance);
  m_running.erase(op);
  m_on_done(op, start, now_seconds());
}

std::vector<std::string> Dma::waiting() const {
  std::vector<std::string> out;
  for (const auto& [id, r] : m_running) {
    const Op& op = m_graph->op(m_prog->ops[id].members.front());
    std::string s = "'" + op.name + "' (" + op_kind_name(op.kind) + ")";
    if (r.kind == OpKind::Recv) {
      s += " waits for a message from chip " + std::to_string(r.p2p_key.src) + " with tag " +
           std::to_string(r.p2p_key.tag);
    } else if (!r.waiting_recv.empty()) {
      std::set<int64_t> chips;
      for (const auto& [key, task] : r.waiting_recv) chips.insert(r.group.chip_of(key.src, m_ctx.torus));
      std::vector<std::string> peers;
      for (int64_t c : chips) peers.push_back("chip " + std::to_string(c));
      s += strprintf(" has %zu of %zu transfers done and waits for data from ", r.finished, r.sched.tasks.size()) +
           join(peers, ", ");
    } else {
      s += strprintf(" has %zu of %zu transfers done", r.finished, r.sched.tasks.size());
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace podsim
