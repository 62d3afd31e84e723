// The DMA engines executing a collective's schedule: tasks become ready when their dependencies are done; sends
// inject a message, receives land theirs (in place, or from the staging buffer if it came early), copies move data
// within HBM.
#include <algorithm>

#include "hw/chip/dma.h"
#include "plan/shard_data.h"
#include "hw/chip/dma_numerics.h"
#include "hw/chip/sim_time.h"
#include "base/error.h"

namespace podsim {

void Dma::start_collective(Running& r, const Op& op) {
  const TensorInfo& in = m_graph->tensor(op.inputs.front());
  r.instance = collective_instance(op.name);
  r.group = m_ctx.group(m_chip, op.attrs.axes, op.attrs.group_block);
  r.req.kind = collective_of(op.kind);
  r.req.group = r.group.shape;
  r.req.elements = in.elements() * std::max<int64_t>(1, op.attrs.chip_copies);
  if (op.inputs.size() > 1) {
    // A combined collective (partition/combine.h) moves its tensors as one buffer, each tensor's elements in the
    // blocks and pieces the algorithm would give them on their own.
    std::vector<int64_t> counts;
    for (TensorId t : op.inputs) counts.push_back(m_graph->tensor(t).elements());
    std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make(comm_algorithm(op));
    const int64_t pieces = algo ? algo->reduction_pieces(r.req) : 0;
    r.combined = std::make_shared<const CombinedLayout>(combined_layout(op.kind, counts, r.req.group.size(), pieces));
    r.req.elements = r.combined->total();
  }
  r.req.elem_bytes = dtype_bytes(in.dtype);
  r.elem_bytes = r.req.elem_bytes;
  r.bf16 = in.dtype == DType::BF16;
  r.max = op.kind == OpKind::AllReduce && op.attrs.reduce_max;
  r.req.chunk_elements = std::max<int64_t>(1, static_cast<int64_t>(m_ctx.exp->hardware.ici.chunk) / r.req.elem_bytes);
  r.req.max_chunks = m_ctx.exp->hardware.ici.max_chunks;
  // Over the data-center network, chunks of hardware.dcn.chunk (hw/dcn/dcn.h); a group wholly across slices
  // moves nothing else.
  if (r.req.group.spans_dcn()) {
    r.req.dcn_chunk_elements =
        std::max<int64_t>(1, static_cast<int64_t>(m_ctx.exp->hardware.dcn.chunk) / r.req.elem_bytes);
    bool only_dcn = true;
    for (size_t i = 0; i < r.req.group.dims.size(); ++i)
      only_dcn = only_dcn && (r.req.group.dims[i] == 1 || r.req.group.is_dcn(i));
    if (only_dcn) {
      r.req.chunk_elements = r.req.dcn_chunk_elements;
      r.req.max_chunks = 0;
    }
  }
  r.req.shift = op.attrs.shift;
  r.req.targets = op.attrs.targets;
  r.req.root = op.attrs.root;
  // An all-reduce of a count the group does not divide runs on the count padded with zeros (its blocks are
  // equal), and the padding is dropped at the end.
  const int64_t group = r.req.group.size();
  if (r.req.kind == CollectiveKind::AllReduce && group > 1 && r.req.elements % group != 0)
    r.req.elements = (r.req.elements + group - 1) / group * group;
  r.shared = m_ctx.schedules.get(comm_algorithm(op), r.req, r.group.rank, m_ctx.numeric);
  const Schedule& sched = r.shared->sched;
  r.tasks = sched.tasks.data();
  r.task_count = sched.tasks.size();
  const size_t n = r.task_count;
  r.state.resize(n);
  for (size_t i = 0; i < n; ++i) r.state[i] = r.tasks[i].dep_count;
  if (m_ctx.numeric) {
    if (r.combined) {
      std::vector<std::vector<float>> parts;
      for (TensorId t : op.inputs) parts.push_back(pack_collective(op, m_store.get(t), r.req.group.size()));
      r.buf[0] = pack_combined(*r.combined, parts);
    } else {
      r.buf[0] = pack_collective(op, m_store.get(op.inputs.front()), r.req.group.size());  // a dimension's parts outermost (plan/shard_data.h)
    }
    r.buf[0].resize(static_cast<size_t>(r.req.elements), 0.0f);
    int64_t out = sched.output_elements;
    r.buf[1] = out == r.req.elements ? r.buf[0] : std::vector<float>(static_cast<size_t>(out), 0.0f);
    r.buf[2].assign(static_cast<size_t>(sched.scratch_elements), 0.0f);
  }
  auto same = std::find_if(m_instance_op.begin(), m_instance_op.end(),
                           [&](const auto& e) { return e.first == r.instance; });
  if (same != m_instance_op.end()) same->second = &r;
  else m_instance_op.emplace_back(r.instance, &r);
  if (n == 0) {
    finish_op(r);
    return;
  }
  for (size_t i = 0; i < n; ++i)
    if (r.state[i] == kPending) ready(r, static_cast<int32_t>(i));
}

void Dma::ready(Running& r, int32_t i) {
  const Task& t = r.tasks[i];
  const double eb = elem_bytes(r);
  const int32_t op = r.op;
  switch (t.type) {
    case Task::Type::Send: {
      double bytes = static_cast<double>(t.src.elements()) * eb;
      Message m;
      m.src = m_chip;
      m.dst = peer_chip(r, t);
      m.bytes = bytes;
      m.key = {r.instance, m_chip, t.tag};
      m.created = now_seconds();
      m.op = op;
      m.flow = next_flow();
      if (m_ctx.numeric)
        m.payload = std::make_shared<std::vector<float>>(gather_region(r.buf[static_cast<int>(t.src_buf)], t.src));
      m.op_here = op;
      m.task_here = i;
      m_links.send(std::move(m), FlowId{op, t.flow}, t.priority, !t.on_chip);
      break;
    }
    case Task::Type::Recv: {
      MsgKey key{r.instance, peer_chip(r, t), t.tag};
      auto it = m_mailbox.find(key);
      if (it != m_mailbox.end() && !it->second.empty()) {
        Message m = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) m_mailbox.erase(it);
        complete_recv(r, i, std::move(m), true);
      } else {
        r.state[i] = kAwaiting;
        ++r.awaiting;
      }
      break;
    }
    case Task::Type::Copy: {
      double bytes = static_cast<double>(t.src.elements()) * eb;
      auto copy = [this, op, i] {
        Running& rr = m_running.at(op);
        const Task& tt = rr.tasks[i];
        if (m_ctx.numeric)
          land_region(rr.buf[static_cast<int>(tt.dst_buf)], tt.dst,
                      gather_region(rr.buf[static_cast<int>(tt.src_buf)], tt.src), tt.combine, rr.bf16, rr.max);
        finish_task(op, i);
      };
      if (t.combine == Task::Combine::Add) {
        // The vector units read both addends and write the sum.
        m_vector_job(op, static_cast<double>(t.src.elements()), 2 * bytes, bytes,
                     [this, copy] { m_queue.schedule(sim_now(), copy); });
      } else {
        m_queue.schedule(at_seconds(m_hbm.access(2 * bytes, 0, HbmClient::Dma, op, true)), copy);
      }
      break;
    }
  }
}

void Dma::complete_recv(Running& r, int32_t i, Message&& m, bool staged) {
  const Task& t = r.tasks[i];
  if (m_log.keep_messages)
    m_log.messages.push_back({r.op, now_seconds(), now_seconds(), m.src, m.bytes, m.flow, false,
                              "recv from " + std::to_string(m.src) + " tag " + std::to_string(t.tag)});
  const double bytes = m.bytes, elements = bytes / elem_bytes(r);
  m.op_here = r.op;
  m.task_here = i;
  uint32_t slot = m_pool.put(std::move(m));
  if (t.combine == Task::Combine::Add) {
    // A reduction: the vector units read the local addend (and the arrival, if it was staged in HBM), add, and
    // write the sum unless it stays on chip to be forwarded. They run it in their queue, after the vector ops
    // already waiting there, so reductions and compute slow each other down.
    // The vector units call back from their own process, never from inside a task's completion: land at once.
    m_vector_job(r.op, elements, bytes * (staged ? 2.0 : 1.0), t.on_chip ? 0.0 : bytes, [this, slot] { land(slot); });
    return;
  }
  // Overwriting: the arrival is written to HBM unless it stays on chip; from the staging buffer, read once more.
  double factor = (t.on_chip ? 0.0 : 1.0) + (staged ? 1.0 : 0.0);
  double done = factor > 0 ? m_hbm.access(factor * bytes, 0, HbmClient::Dma, r.op, true) : now_seconds();
  // Finish at the earliest in the next delta, never from inside another task's completion.
  m_queue.schedule(at_seconds(std::max(done, now_seconds())), [this, slot] { land(slot); }, &m_pool.at(slot));
}

void Dma::land(uint32_t slot) {
  Message m = m_pool.take(slot);
  const int32_t op = m.op_here, i = m.task_here;
  auto it = m_running.find(op);
  if (it == m_running.end()) return;
  Running& r = it->second;
  const Task& t = r.tasks[i];
  if (m_ctx.numeric && m.payload) land_region(r.buf[static_cast<int>(t.dst_buf)], t.dst, *m.payload, t.combine, r.bf16, r.max);
  finish_task(op, i);
}

void Dma::finish_task(int32_t op, int32_t i) {
  auto it = m_running.find(op);
  if (it == m_running.end()) return;
  Running& r = it->second;
  if (r.state[i] == kDone) throw Error(Err::Internal, "collective task finished twice");
  r.state[i] = kDone;
  ++r.finished;
  const SharedSchedule& s = *r.shared;
  for (int32_t k = s.dep_ptr[i]; k < s.dep_ptr[i + 1]; ++k) {
    int32_t j = s.dep_list[k];
    if (r.state[j] <= 0) throw Error(Err::Internal, "collective task ready before its dependencies finished");
    if (--r.state[j] == kPending) {
      ready(r, j);
      // ready() may inject at once, and a nested finish_task may complete the op and free `r` (and `s`).
      if (!m_running.count(op)) return;
    }
  }
  if (r.finished == r.task_count) finish_op(r);
}

}  // namespace podsim
