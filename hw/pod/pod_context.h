// What every chip of a simulated pod reads while it runs: the experiment, the plan's programs lowered for the
// chip, the torus, and how mesh axes map onto it. Shared and read-only during the simulation; chips keep their
// mutable state (progress, tensors, logs) to themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "collectives/i_algorithm.h"
#include "hw/chip/schedule_cache.h"
#include "hw/compiler/exec_program.h"
#include "hw/ici/message.h"
#include "topology/torus.h"
#include "base/params/experiment.h"
#include "plan/plan.h"

namespace podsim {

// The group of chips one collective spans, seen from one member (plan/mesh.h).
using CollectiveGroup = MeshGroup;

struct PodContext {
  const Experiment* exp = nullptr;
  const Plan* plan = nullptr;
  const ModelGraph* logical = nullptr;  // the logical step the plan's bindings refer to
  std::vector<ExecProgram> programs;                    // per role, lowered
  std::vector<std::vector<std::vector<int32_t>>> dependents;  // per role, per exec op: ops waiting on it
  // Per role: the order in which ready ops issue, each op's rank and the op of each rank (hw/compiler/issue_order.h);
  // with `latency_hiding` the units also take their queued ops by rank (run.scheduler).
  std::vector<std::vector<int32_t>> issue_rank, op_at_rank;
  bool latency_hiding = false;
  Torus torus{{1, 1}, {true, true}};
  bool numeric = false;
  std::vector<bool> traced;  // per chip
  int64_t result_chip = 0;
  std::atomic<int64_t> ops_completed{0};  // progress, read by the watchdog thread
  MessagePool messages;                   // every message in flight
  mutable ScheduleCache schedules;        // collective schedules, built as chips first run them and shared
  double traffic_window = 0;              // end of synthetic traffic injection (seconds), 0 when none
  std::exception_ptr failure;             // an error a model met while running (rethrown after sc_start)

  // The group of `chip` for a collective over mesh `axes` (empty: every mesh axis).
  CollectiveGroup group(int64_t chip, const std::vector<std::string>& axes, int64_t block = 0) const;
  // The chip a Send or Recv of `chip` exchanges with: attrs.peer, or `shift` steps along its mesh axes when it
  // names some. Throws Error(Internal) when there is no chip that far along.
  int64_t p2p_peer(int64_t chip, const Op& op) const;
};

}  // namespace podsim
