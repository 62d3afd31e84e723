#include "hw/chip/chip.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "hw/chip/sim_time.h"
#include "hw/timing/mxu_timing.h"
#include "hw/timing/vpu_timing.h"
#include "base/error.h"
#include "base/text.h"
#include "plan/shard_data.h"
#include "workloads/reference.h"

namespace podsim {

Chip::Chip(sc_core::sc_module_name name, int64_t id, PodContext& ctx)
    : sc_core::sc_module(name),
      m_id(id),
      m_ctx(ctx),
      m_cfg(ctx.exp->hardware.chip),
      m_period(0),
      m_stalls(ctx.exp->run.stall.probability, ctx.exp->run.stall.max,
               ctx.exp->run.seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(id)) {
  if (const ChipFault* f = ctx.exp->hardware.faults.chip(id)) {  // hardware.faults: a slower chip
    m_cfg.clock *= f->clock;
    m_cfg.hbm.bandwidth *= f->hbm;
  }
  m_period = 1.0 / m_cfg.clock;
  m_role = ctx.plan->role_of_chip[id];
  if (m_role >= 0) {
    m_program = &ctx.plan->programs[m_role];
    m_prog = &ctx.programs[m_role];
  }
  m_log.traced = ctx.traced[id];
  m_log.keep_units = m_log.traced && (!ctx.exp || ctx.exp->run.trace.detail != "ops");
  m_log.keep_compute = m_log.keep_units || id == ctx.result_chip;
  m_log.keep_messages = m_log.traced && (!ctx.exp || ctx.exp->run.trace.detail == "links");
  m_log.link_bytes.assign(ctx.torus.directions(), 0.0);
  m_log.link_busy.assign(ctx.torus.directions(), 0.0);

  m_hbm = std::make_unique<Hbm>("hbm", m_cfg.hbm, m_period, m_stalls, m_log);
  m_host_link = std::make_unique<HostLink>(m_cfg.host_link, *m_hbm, m_log);
  const int depth = static_cast<int>(m_cfg.load_depth);
  for (int c = 0; c < m_cfg.tensorcores; ++c) {
    auto done = [this](int32_t op, double s, double e, int64_t cyc) { part_done(op, s, e, cyc); };
    m_mxu.push_back(std::make_unique<ComputeUnit>(("core" + std::to_string(c) + "_mxu").c_str(),
                                                  ComputeUnit::Kind::Mxu, c, m_period, *m_hbm, m_log, done, depth));
    m_vpu.push_back(std::make_unique<ComputeUnit>(("core" + std::to_string(c) + "_vpu").c_str(),
                                                  ComputeUnit::Kind::Vpu, c, m_period, *m_hbm, m_log, done, depth));
  }
  m_router = std::make_unique<IciRouter>("ici", id, ctx.torus, ctx.messages, m_log, m_stalls,
                                         [this](Message&& m) { m_dma->deliver(std::move(m)); },
                                         [this](const Message& m, const std::string& why) { unroutable(m, why); });
  m_dma = std::make_unique<Dma>("dma", id, ctx, m_program ? &m_program->graph : nullptr, m_prog, *m_hbm, *m_router,
                                m_log, m_store, [this](int32_t op, double s, double e) { op_done(op, s, e); },
                                [this](int32_t op, double elements, double read, double write,
                                       std::function<void()> done) {
                                  reduce_on_vpus(op, elements, read, write, std::move(done));
                                });
  if (m_prog) {
    const size_t n = m_prog->ops.size();
    m_log.ops.assign(n, OpRecord{});
    m_pending.resize(n);
    m_state.assign(n, 0);
    for (size_t i = 0; i < n; ++i) m_pending[i] = static_cast<int32_t>(m_prog->ops[i].deps.size());
    if (ctx.numeric) {
      // The pod fills the store with this chip's inputs (hw/pod/pod.h); kernels that depend on where the chip
      // sits in the mesh ask the store.
      m_store.resize(m_program->graph.num_tensors());
      m_store.set_device(std::make_shared<MeshDevice>(ctx.plan->mesh, id));
    }
    SC_METHOD(kick);  // runs once at time 0
  }
}

void Chip::attach_dcn(DcnNetwork& net) {
  m_dcn = std::make_unique<DcnPort>(m_id, net, *m_host_link, m_log, [this](Message&& m) { m_dma->deliver(std::move(m)); });
  net.attach(m_dcn.get());
  m_dma->set_dcn(m_dcn.get());
}

void Chip::unroutable(const Message& m, const std::string& why) {
  if (m_ctx.failure) return;
  const int role = m_ctx.plan->role_of_chip[m.src];  // the op that sent `m`, named on its sender's program
  std::string what = "a message";
  if (role >= 0 && m.op >= 0 && m.op < static_cast<int32_t>(m_ctx.programs[role].ops.size()))
    what = std::string(m.kind == MsgKind::Collective ? "collective '" : "transfer '") +
           m_ctx.programs[role].ops[m.op].name + "'";
  const ParamSet& p = m_ctx.exp->params;
  m_ctx.failure = std::make_exception_ptr(
      Error(Err::Unroutable, p.has("hardware.faults") ? p.where("hardware.faults") : SourceLocation{},
            what + " cannot complete: " + why + " (hardware.faults)", "hardware.faults"));
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);  // no "stopped by user"
  sc_core::sc_stop();
}

void Chip::kick() {
  for (size_t i = 0; i < m_prog->ops.size(); ++i)
    if (m_pending[i] == 0) m_ready.push(m_ctx.issue_rank[m_role][i]);
  drain();
}

void Chip::drain() {
  if (m_draining) return;  // an outer drain() is already issuing
  m_draining = true;
  while (!m_ready.empty()) {
    int32_t op = m_ctx.op_at_rank[m_role][m_ready.top()];
    m_ready.pop();
    dispatch(op);
  }
  m_draining = false;
}

void Chip::dispatch(int32_t op) {
  const ExecOp& e = m_prog->ops[op];
  m_state[op] = 1;
  switch (e.unit) {
    case Unit::Mxu: {
      // A fold pushes only the weight rows it holds, one per cycle: with K below R (attention's 64-deep heads) or a
      // partial last K fold, fewer than R. The folds of an op share the push evenly (rounded up).
      auto gemm = [&](int64_t k, int64_t core_folds, int64_t rows) {
        MxuShape shape{m_cfg.mxu.rows, m_cfg.mxu.cols, m_cfg.mxu.weight_double_buffer, m_cfg.mxu.weight_push};
        const int64_t k_folds = ceil_div(k, m_cfg.mxu.rows);
        if (k_folds > 0) {
          shape.weight_push = ceil_div(m_cfg.mxu.weight_push * k, k_folds * m_cfg.mxu.rows);
          if (m_cfg.mxu.load_rows_held) shape.weight_rows = ceil_div(k, k_folds);
        }
        return mxu_cycles(shape, ceil_div(core_folds, m_cfg.mxu.count), rows);
      };
      int64_t cycles = 0;
      // Narrow operands at a faster rate hold k_pack contraction elements per row of the array.
      if (e.gemm.passes.empty()) cycles = gemm(ceil_div(e.gemm.k, e.gemm.k_pack), e.gemm.core_folds, e.gemm.rows_per_fold);
      for (const GemmPassWork& p : e.gemm.passes) cycles += gemm(p.k, p.core_folds, p.rows_per_fold);
      // The vector unit's work on the results: the pops when they leave through it (then serial), the epilogue's.
      // A convolution's fused work runs beside the MXU (ExecOp::vector_beside), its pops serial.
      const bool serial = m_cfg.mxu.result_pop > 0;
      const int64_t fused = vpu_cycles(m_cfg.vpu, e.core_vector);
      const int64_t pops = e.gemm.result_vectors * m_cfg.mxu.result_pop;
      const bool beside = serial && e.vector_beside;
      for (int c = 0; c < e.cores; ++c) {
        UnitJob job{op, cycles, e.groups, e.core_hbm_read, e.core_hbm_write, e.read_run, e.read_pattern,
                    e.write_pattern, beside ? pops : fused + pops, serial};
        job.vpu_beside = beside ? fused : 0;
        job.overhead = static_cast<double>(m_cfg.kernel_overhead) * m_period;
        job.rank = m_ctx.issue_rank[m_role][op];
        job.by_rank = m_ctx.latency_hiding;
        m_mxu[c]->submit(std::move(job));
      }
      break;
    }
    case Unit::Vpu: {
      int64_t cycles = vpu_cycles(m_cfg.vpu, e.core_vector);
      for (int c = 0; c < e.cores; ++c) {
        UnitJob job{op, cycles, e.groups, e.core_hbm_read, e.core_hbm_write, e.read_run, e.read_pattern,
                    e.write_pattern, 0};
        job.overhead = static_cast<double>(m_cfg.kernel_overhead) * m_period;
        job.rank = m_ctx.issue_rank[m_role][op];
        job.by_rank = m_ctx.latency_hiding;
        m_vpu[c]->submit(std::move(job));
      }
      break;
    }
    case Unit::Ici:
      m_dma->start(op);
      break;
    case Unit::Host:
      host_transfer(op);
      break;
  }
}

void Chip::host_transfer(int32_t op) {
  const ExecOp& e = m_prog->ops[op];
  const Op& gop = m_program->graph.op(e.members.front());
  const double bytes = m_program->graph.tensor(gop.inputs.front()).stored_bytes();
  const bool to_host = gop.kind == OpKind::ToHost;
  const double start = now_seconds();
  m_host_link->transfer(to_host ? HostLink::Way::ToHost : HostLink::Way::FromHost, bytes, op, true,
                        [this, op, start, bytes, to_host] {
                          OpRecord& r = m_log.ops[op];
                          (to_host ? r.hbm_read : r.hbm_write) += bytes;
                          op_done(op, start, now_seconds());
                        });
}

void Chip::reduce_on_vpus(int32_t op, double elements, double read, double write, std::function<void()> done) {
  // Shared by the cores like a vector op: each core's VPU adds its share (one add per element), streaming its HBM
  // traffic in groups of about 256 KiB (load the next group while adding this one).
  const int cores = m_cfg.tensorcores;
  // The cores' shares finish apart; the last one calls `done`. Kept in a pool, so a job's callback is small.
  const uint32_t id = m_reductions.add({cores, std::move(done)});
  const int64_t n = static_cast<int64_t>(elements);
  for (int c = 0; c < cores; ++c) {
    VectorWork w;
    w.elements = static_cast<double>(n * (c + 1) / cores - n * c / cores);
    w.simple = 1;
    const double r = read / cores, wr = write / cores;
    UnitJob job{op, vpu_cycles(m_cfg.vpu, w),
                static_cast<int>(std::clamp(std::ceil((r + wr) / (256.0 * 1024)), 1.0, 16.0)), r, wr, 0};
    job.on_done = [this, id](double, double) {
      PendingReduction& p = m_reductions[id];
      if (--p.left > 0) return;
      std::function<void()> finish = std::move(p.done);
      m_reductions.release(id);
      finish();
    };
    m_vpu[c]->submit(std::move(job));
  }
}

void Chip::part_done(int32_t op, double start, double end, int64_t cycles) {
  OpRecord& r = m_log.ops[op];
  r.start = r.start < 0 ? start : std::min(r.start, start);
  r.end = std::max(r.end, end);
  r.busy_cycles = std::max(r.busy_cycles, cycles);
  r.hbm_read += m_prog->ops[op].core_hbm_read;
  r.hbm_write += m_prog->ops[op].core_hbm_write;
  if (++r.parts_done == m_prog->ops[op].cores) op_done(op, r.start, r.end);
}

void Chip::op_done(int32_t op, double start, double end) {
  OpRecord& r = m_log.ops[op];
  if (r.start < 0) r.start = start;
  r.end = std::max(r.end, end);
  if (m_state[op] == 2) throw Error(Err::Internal, "op finished twice on chip " + std::to_string(m_id));
  m_state[op] = 2;
  ++m_done;
  m_ctx.ops_completed.fetch_add(1, std::memory_order_relaxed);
  m_last_end = std::max(m_last_end, end);
  const ExecOp& e = m_prog->ops[op];
  if (m_ctx.numeric && e.unit != Unit::Ici)  // compute ops and host transfers (a copy) run their kernels
    for (OpId id : e.members) run_op(m_program->graph, m_program->graph.op(id), m_store);
  for (int32_t next : m_ctx.dependents[m_role][op])
    if (--m_pending[next] == 0) m_ready.push(m_ctx.issue_rank[m_role][next]);
  drain();
}

std::vector<std::string> Chip::stuck_ops() const {
  std::vector<std::string> out;
  if (!m_prog) return out;
  for (const std::string& w : m_dma->waiting()) out.push_back(w);
  for (size_t i = 0; i < m_prog->ops.size() && out.size() < 4; ++i) {
    if (m_state[i] != 0) continue;
    const ExecOp& e = m_prog->ops[i];
    std::vector<std::string> on;
    for (int32_t d : e.deps)
      if (m_state[d] != 2) on.push_back("'" + m_prog->ops[d].name + "'");
    if (on.size() > 2) on.resize(2);
    out.push_back("'" + e.name + "' waits for " + join(on, ", "));
    break;  // the first blocked op says enough
  }
  return out;
}

}  // namespace podsim
