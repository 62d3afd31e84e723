// HBM of one chip as a SystemC module: a shared resource that the MXU feeds, the VPU and the DMA engines (ICI
// transfers and collective reductions) all reserve time on. The timing is hw/timing/hbm_timing.h (channels,
// queues, access patterns); this module adds stall injection, per-client statistics and trace intervals.
//
//   double done = hbm.access(bytes, run, HbmClient::Mxu, op);   // absolute completion time in seconds
#pragma once

#include <systemc>
#include <vector>

#include "hw/chip/chip_log.h"
#include "hw/chip/stall.h"
#include "hw/timing/hbm_timing.h"

namespace podsim {

class Hbm : public sc_core::sc_module {
 public:
  Hbm(sc_core::sc_module_name name, const HbmConfig& cfg, double clock_period, StallInjector& stalls, ChipLog& log);

  // Reserves HBM for an access issued now; returns when its last byte is done (seconds, on a clock edge).
  double access(double bytes, double run, HbmClient who, int32_t op, bool write);
  // The same for an access with a pattern (hw/timing/hbm_timing.h).
  double access(const HbmRequest& r, HbmClient who, int32_t op);
  // An access a unit will issue at `at` (seconds, not before now) without waking for it: made at its time, in time
  // order with every other access (before those of the same time), when HBM is next used at or after `at`, or at
  // the latest at `at` itself. Its completion time then raises *done_max.
  void post(const HbmRequest& r, double at, HbmClient who, int32_t op, double* done_max);

 private:
  double make(double now, const HbmRequest& r, HbmClient who, int32_t op);
  void flush(double now);  // makes the posted accesses due by `now`

  struct Posted {
    double at;
    uint64_t seq;
    HbmRequest r;
    HbmClient who;
    int32_t op;
    double* done_max;
  };
  // The timing first: an access reads its first fields (hot_state()).
  HbmTiming m_timing;
  std::vector<Posted> m_posted;  // by (at, seq)
  uint64_t m_posts = 0;
  double m_period;
  StallInjector& m_stalls;
  ChipLog& m_log;

 public:
  // Where the state an access reads first begins, for the calendar to fetch ahead (hw/chip/action_queue.h).
  const void* hot_state() const { return &m_timing; }
};

}  // namespace podsim
