// One TPU chip: a sequencer, TensorCores (each with its MXUs as one unit and a VPU), HBM, DMA engines and the ICI
// router. The sequencer issues the role's ExecProgram in dependency order: an op becomes ready when every op it
// depends on has finished, and goes to its unit's queue (to every TensorCore's unit for its share, megacore
// style) or to the DMA engines; independent ops on different units overlap. In numeric mode a finished op's
// kernels run on the chip's own tensors, so the numbers follow the simulated order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <systemc>
#include <vector>

#include "hw/chip/chip_log.h"
#include "hw/chip/compute_unit.h"
#include "hw/chip/dma.h"
#include "hw/chip/hbm.h"
#include "hw/chip/host_link.h"
#include "hw/chip/slots.h"
#include "hw/chip/stall.h"
#include "hw/dcn/dcn.h"
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"
#include "workloads/tensor.h"

namespace podsim {

class Chip : public sc_core::sc_module {
 public:
  Chip(sc_core::sc_module_name name, int64_t id, PodContext& ctx);

  int64_t id() const { return m_id; }
  int role() const { return m_role; }
  IciRouter& router() { return *m_router; }
  HostLink& host_link() { return *m_host_link; }
  // With several slices: the chip's way onto the data-center network (hw/dcn/dcn.h).
  void attach_dcn(DcnNetwork& net);
  ChipLog& log() { return m_log; }
  const ChipLog& log() const { return m_log; }
  TensorStore& store() { return m_store; }
  const StallInjector& stalls() const { return m_stalls; }

  bool finished() const { return m_prog == nullptr || m_done == m_prog->ops.size(); }
  size_t ops_total() const { return m_prog ? m_prog->ops.size() : 0; }
  size_t ops_done() const { return m_done; }
  double last_end() const { return m_last_end; }
  // Unfinished ops and what they wait for, for deadlock reports.
  std::vector<std::string> stuck_ops() const;

 private:
  SC_HAS_PROCESS(Chip);
  void kick();  // issues the ops with no dependencies at time 0
  // No route is left for `m` (hardware.faults): records Error(Unroutable) naming its op and stops the simulation.
  void unroutable(const Message& m, const std::string& why);
  void dispatch(int32_t op);
  // A to_host or from_host op: its tensor over the host link (hw/chip/host_link.h).
  void host_transfer(int32_t op);
  // The adds of a collective's reduction on the cores' VPUs, queued behind their vector ops (hw/chip/dma.h).
  void reduce_on_vpus(int32_t op, double elements, double read, double write, std::function<void()> done);
  void part_done(int32_t op, double start, double end, int64_t cycles);
  void op_done(int32_t op, double start, double end);
  void drain();

  int64_t m_id;
  PodContext& m_ctx;
  int m_role = -1;
  const Program* m_program = nullptr;
  const ExecProgram* m_prog = nullptr;
  ChipConfig m_cfg;
  double m_period;

  ChipLog m_log;
  StallInjector m_stalls;
  TensorStore m_store;
  std::unique_ptr<Hbm> m_hbm;
  std::unique_ptr<HostLink> m_host_link;
  std::vector<std::unique_ptr<ComputeUnit>> m_mxu, m_vpu;
  std::unique_ptr<IciRouter> m_router;
  std::unique_ptr<Dma> m_dma;
  std::unique_ptr<DcnPort> m_dcn;

  struct PendingReduction {
    int left = 0;                // cores still adding
    std::function<void()> done;  // called when the last one is done
  };
  Slots<PendingReduction> m_reductions;  // reductions on the VPUs in progress (reduce_on_vpus)

  std::vector<int32_t> m_pending;  // dependencies left per op
  std::vector<uint8_t> m_state;    // 0 waiting, 1 issued, 2 done
  // Ops to issue, by issue rank (PodContext::issue_rank: program order unless run.scheduler is latency_hiding),
  // lowest first; a worklist, so completions never recurse.
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> m_ready;
  bool m_draining = false;
  size_t m_done = 0;
  double m_last_end = 0;
};

}  // namespace podsim
