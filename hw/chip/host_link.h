// The chip's host link: the PCIe-class DMA path between the chip's HBM and its host's memory, one channel each way
// (full duplex), `hardware.chip.host_link`. Every transfer of the chip to or from its host shares it: a program's
// host transfers (to_host / from_host ops: host offload) and the data-center network's hop from the chip to its host
// and back (hw/dcn/). It contends with nothing on the ICI; it reads and writes HBM, where it contends with compute.
//
// A transfer is split into DMA chunks of at most `chunk` bytes (XLA's xla_tpu_iova_dma_chunk_size_bytes); the
// transfers queued on one way take turns chunk by chunk (round robin), each chunk occupying the channel for
// bytes / bandwidth. To the host, a chunk is read from HBM as it streams (the channel is busy until both the read and
// the serialisation are done) and reaches host memory `latency` after it left. From the host, a chunk reaches the
// chip `latency` after it left and is then written to HBM. A lone transfer of B bytes in chunks of c therefore
// takes B / bandwidth + latency to the host (when HBM outpaces the link) and B / bandwidth + latency + the last
// chunk's HBM write from it.
//
//   HostLink link(cfg, hbm, log, period);
//   link.transfer(HostLink::Way::ToHost, bytes, op, /*hbm=*/true, [] { /* all of it in host memory */ });
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "base/params/experiment.h"
#include "hw/chip/action_queue.h"
#include "hw/chip/chip_log.h"
#include "hw/chip/hbm.h"
#include "hw/chip/slots.h"

namespace podsim {

class HostLink {
 public:
  enum class Way : uint8_t { ToHost = 0, FromHost = 1 };
  using Done = std::function<void()>;

  HostLink(const HostLinkConfig& cfg, Hbm& hbm, ChipLog& log);

  // Moves `bytes` over the link in `way`. `hbm`: the link reads each chunk from HBM (to the host) or writes it
  // there (from the host); false when the caller's DMA does (a data-center network message, which the DMA engines
  // read before it leaves and land when it arrives). `done` runs when the last chunk has arrived on the far side
  // (and, from the host with `hbm`, has been written). `op` names the exec op for traces and statistics (-1: none).
  void transfer(Way way, double bytes, int32_t op, bool hbm, Done done);

  const HostLinkConfig& config() const { return m_cfg; }

 private:
  struct Transfer {
    double left = 0;     // bytes not yet started
    int chunks = 0;      // chunks started and not yet arrived
    int32_t op = -1;
    bool hbm = true;
    Done done;
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Channel {
    std::deque<uint32_t> turn;  // transfers waiting for their next chunk, in turn order
    uint32_t current = kNone;   // the transfer whose chunk is on the channel
    bool busy = false;          // a chunk is on the channel
  };
  void next(Way way);                         // starts the next chunk when the channel is free
  void arrived(Way way, uint32_t transfer, double bytes);  // a chunk has reached the far side
  void landed(uint32_t transfer);  // ... and is in place (written to HBM, from the host with `hbm`)

  HostLinkConfig m_cfg;
  Hbm& m_hbm;
  ChipLog& m_log;
  ActionQueue m_queue;
  Channel m_way[2];
  Slots<Transfer> m_transfers;
};

}  // namespace podsim
