// What a chip's models record while they run: per-op timing, unit busy time, HBM and link traffic, and (for
// traced chips) the intervals the trace is drawn from. Plain data: the engine turns it into summary.json and the
// trace after the simulation. Untraced chips keep only totals, so a pod of thousands of chips stays small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/chip/log_list.h"
#include "hw/chip/op_spans.h"

namespace podsim {

enum class HbmClient : uint8_t { Mxu, Vpu, Dma };

struct OpRecord {
  double start = -1, end = -1;  // seconds; -1 until the op starts / ends
  int64_t busy_cycles = 0;      // cycles the op kept its unit busy (largest over cores)
  double hbm_read = 0, hbm_write = 0;
  int parts_done = 0;
};

struct Interval {
  double begin = 0, end = 0;
  int32_t op = -1;   // exec op index, -1 when none
  uint8_t lane = 0;  // MXU/VPU: core; HBM: client; link: direction
  double bytes = 0;
};

struct MessageSlice {  // one ICI transfer as the trace shows it
  int32_t op = -1;
  double begin = 0, end = 0;
  int64_t peer = -1;  // chip
  double bytes = 0;
  uint64_t flow = 0;  // pairs the send slice with the receive slice
  bool send = true;
  std::string label;
};

struct ChipLog {
  std::vector<OpRecord> ops;
  double mxu_busy = 0;  // seconds, summed over cores
  double vpu_busy = 0;
  double hbm_busy = 0;  // channel-seconds
  double hbm_read = 0, hbm_write = 0;
  double hbm_queue_wait_max = 0;
  std::vector<double> link_bytes;  // per direction
  std::vector<double> link_busy;   // seconds per direction
  uint64_t stalls = 0;
  double stall_seconds = 0;
  // The host link (hw/chip/host_link.h), per way: 0 to the host, 1 from it.
  double host_bytes[2] = {0, 0};
  double host_busy[2] = {0, 0};  // seconds the channel carried a chunk
  // The data-center network (hw/dcn/): bytes this chip sent to and received from other slices.
  double dcn_bytes_out = 0, dcn_bytes_in = 0;

  // Synthetic traffic received by this chip (workload.model: traffic).
  uint64_t traffic_messages = 0;
  double traffic_bytes = 0;
  double traffic_bytes_in_window = 0;  // arrived before the injection window closed
  double traffic_latency_sum = 0;
  double traffic_latency_max = 0;
  double last_delivery = 0;

  bool traced = false;       // drawn in the trace (its ops; with keep_units its intervals too, below)
  bool keep_messages = false;  // traced at run.trace.detail links, the one detail that draws them: keeps the
                               // message slices (a send and a receive per chunk: most of a long run's memory)
  bool keep_compute = false; // logs the intervals below (the result chip, for its timeline and the busy time of its
                             // ops; traced chips drawn at run.trace.detail units or links)
  bool keep_units = false;   // keeps every interval whole (compute, hbm, links, host): traced at detail units or
                             // links, the details that draw them; else the result chip keeps only its timeline's
                             // spans (below), half the memory
  LogList<Interval> compute;  // MXU (lane = core) and VPU (lane = 16 + core)
  LogList<Interval> hbm;      // lane = HbmClient
  LogList<Interval> links;    // lane = direction; op: the chip's own op sending (-1: a message it forwards)
  LogList<Interval> host;     // host link chunks; lane = way (0 to the host, 1 from it)
  LogList<Interval> dcn;      // traced chips: DCN messages over the host link (lane 0 sent, 1 received)
  std::vector<MessageSlice> messages;
  // The result chip's timeline (summary.json, sim/engine/timeline.cpp) when the whole intervals are not kept: what it
  // reads of them, in the order they came.
  struct Span {
    double begin, end;
  };
  struct BytesSpan {
    double begin, end, bytes;
  };
  LogList<Span> mxu_spans, vpu_spans, link_spans;
  LogList<BytesSpan> hbm_spans;
  // Per op, the union of its intervals in compute, hbm, links and host (the busy time of its span in summary.json),
  // folded as they come.
  OpSpans op_spans;

  // An interval of each kind, when keep_compute: added to its op's spans, and kept whole or as a timeline span.
  void log_compute(const Interval& x) {
    op_spans.add(x.op, x.begin, x.end);
    if (keep_units) compute.push_back(x);
    else (x.lane < 16 ? mxu_spans : vpu_spans).push_back({x.begin, x.end});
  }
  void log_hbm(const Interval& x) {
    op_spans.add(x.op, x.begin, x.end);
    if (keep_units) hbm.push_back(x);
    else hbm_spans.push_back({x.begin, x.end, x.bytes});
  }
  void log_link(const Interval& x) {
    op_spans.add(x.op, x.begin, x.end);
    if (keep_units) links.push_back(x);
    else link_spans.push_back({x.begin, x.end});
  }
  void log_host(const Interval& x) {
    op_spans.add(x.op, x.begin, x.end);
    if (keep_units) host.push_back(x);
  }
};

}  // namespace podsim
