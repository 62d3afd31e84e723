// One TensorCore's MXU group or VPU as a SystemC module. It runs its share of one op at a time, in the order the
// sequencer submits them, as a pipeline of tile groups over HBM:
//
//   issue | load(0) | compute(0) + load(1) | compute(1) + write(0) + load(2) | ... | write(G-1)
//
// The issue is the kernel's fixed cost (hardware.chip.kernel_overhead, docs/model.md "A chip"): the unit is taken
// for it, and its first load goes out when it is over.
// Two VMEM buffers per operand: group g+1 is fetched while group g computes, and compute(g) waits for its data.
// With a load depth d (hardware.chip.load_depth, docs/model.md "A chip") there are d + 1: the loads of groups
// g+1..g+d are in flight while g computes (d loads at the job's start), so their HBM latencies overlap; d = 1 is
// the double buffering above.
// An op therefore takes about max(compute, memory) plus the first load and the last write: whichever of the unit
// and HBM is slower bounds it (the roofline), and HBM contention with other requesters stretches it.
// Compute cycles come from the unit's timing model (MXU: hw/timing/mxu_timing.h, VPU: hw/timing/vpu_timing.h),
// on clock edges. The unit steps from the simulation's calendar (hw/chip/action_queue.h); events only at group
// boundaries, never per cycle.
#pragma once

#include <cstdint>
#include <vector>
#include <functional>
#include <systemc>

#include "hw/chip/action_queue.h"
#include "hw/chip/chip_log.h"
#include "hw/chip/hbm.h"

namespace podsim {

struct UnitJob {
  int32_t op = -1;
  int64_t cycles = 0;      // compute cycles of this core's share
  int groups = 1;
  double read = 0;         // HBM bytes read by this core's share
  double write = 0;        // HBM bytes written
  double read_run = 0;     // run length of strided or gathered accesses
  HbmPattern read_pattern = HbmPattern::Stream;
  HbmPattern write_pattern = HbmPattern::Stream;
  int64_t vpu_cycles = 0;  // MXU jobs: the vector unit's cycles on the results (pops, the output fusion's epilogue)
  bool vpu_serial = false;  // MXU jobs: those cycles run between the MXU's streams (results through the vector unit)
  // MXU jobs: vector cycles that run beside the MXU's streams, a group behind (a convolution's fused batch-norm and
  // ReLU work, which its emitter interleaves with the pushes), on top of vpu_cycles.
  int64_t vpu_beside = 0;
  // The issue rank of the job's op (PodContext::issue_rank); with `by_rank` the unit begins the queued job of the
  // lowest rank, not the first submitted.
  int32_t rank = 0;
  bool by_rank = false;
  // Seconds the unit spends on the kernel before its first load is issued (hardware.chip.kernel_overhead: the
  // kernel's issue, its pipeline's fill and drain, the synchronization with the kernel before it); 0 for the adds
  // of a collective's reduction, which run inside the collective's kernel.
  double overhead = 0;
  // When set, called at the end instead of the unit's Done callback (work the DMA engines queue: reductions).
  std::function<void(double start, double end)> on_done = nullptr;
};

class ComputeUnit : public sc_core::sc_module {
 public:
  enum class Kind : uint8_t { Mxu, Vpu };
  // Called when a job finishes: (op, start, end, busy cycles).
  using Done = std::function<void(int32_t op, double start, double end, int64_t cycles)>;

  ComputeUnit(sc_core::sc_module_name name, Kind kind, int core, double clock_period, Hbm& hbm, ChipLog& log,
              Done on_done, int load_depth = 1);
  static constexpr int kMaxLoadDepth = 16;

  void submit(UnitJob job);
  bool idle() const { return !m_active && m_next == m_queue.size(); }
  // The op running now (-1 when idle), for deadlock reports.
  int32_t current() const { return m_active ? m_job.op : -1; }

 private:
  void step();
  void wake_in(double seconds);  // step() again after `seconds`
  void wake_at(const sc_core::sc_time& at);
  // Waits `seconds` for the load of group m_group (the last group: computes it then, without waking for the load).
  void wait_load(double seconds);
  // Group m_group's compute ends at `now`: its busy time and its results' write (made now, or posted to HBM for
  // that time when `post`).
  void finish_group(double now, bool post);
  void begin_job();
  int64_t group_cycles(int g) const;
  HbmRequest load_request() const;
  // Issues the loads of the groups before `upto` (exclusive, at most the job's groups) not issued yet.
  void issue_loads(int upto);

  // What a wake reads first, together from m_wakes on (the calendar fetches it ahead: hw/chip/action_queue.h).
  uint64_t m_wakes = 0;  // wakes scheduled so far; only the latest one steps
  bool m_woken = false;  // a step is scheduled for a submitted job
  bool m_active = false;
  enum class State : uint8_t { Issue, WaitLoad, Computing, Drain } m_state = State::WaitLoad;
  int m_group = 0;
  double m_start = 0;
  double m_issued = 0;  // when the job's issue (UnitJob::overhead) is over and its first load goes out
  // Completion of the loads of groups g..g+d (ring of d + 1 buffers, slot g mod (d + 1)).
  double m_load_done[kMaxLoadDepth + 1] = {};
  int m_depth = 1;   // loads in flight (hardware.chip.load_depth)
  int m_loads = 0;   // loads of the job issued so far
  double m_last_write = 0;
  double m_compute_begin = 0;
  double m_period;
  Hbm& m_hbm;
  UnitJob m_job;

  Kind m_kind;
  int m_core;
  ChipLog& m_log;
  Done m_on_done;
  HbmClient m_client;

  // Submitted jobs not begun: m_queue[m_next..]. A vector emptied in place, so a unit that runs one job after
  // another allocates nothing (a deque allocated and freed a block every few jobs).
  std::vector<UnitJob> m_queue;
  size_t m_next = 0;
  ActionQueue m_calendar;
};

}  // namespace podsim
